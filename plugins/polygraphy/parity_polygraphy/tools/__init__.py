"""``polygraphy.tools``, as far as Polygraphy's scripts and tests import it: ``tools.sparse.SparsityPruner`` (2:4
structured sparsity of weights) and ``tools.check.subtool.lint.Lint`` (the names of ``check lint``'s report).

Polygraphy's command-line tools themselves are Parity's CLI (``parity check lint``, ``parity surgeon ...``), not
these modules."""
