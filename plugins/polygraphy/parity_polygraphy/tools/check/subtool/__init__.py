"""``polygraphy.tools.check.subtool``: ``Lint``, the names of ``check lint``'s report."""

from parity_polygraphy.tools.check.subtool.lint import Lint

__all__ = ["Lint"]
