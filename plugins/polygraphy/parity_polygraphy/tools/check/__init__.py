"""``polygraphy.tools.check``: the names of ``check``'s subtools (see ``subtool``)."""
