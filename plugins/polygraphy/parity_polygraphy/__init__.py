"""Polygraphy's Python API on Parity's engine (issue 28): one import rule. A script written for Polygraphy runs
after replacing the word ``polygraphy`` with ``parity_polygraphy`` in its imports, and nothing else:
``from polygraphy.comparator import Comparator`` becomes ``from parity_polygraphy.comparator import Comparator``.

The modules mirror Polygraphy's public tree (``exception``, ``datatype``, ``common``, ``logger``, ``json``,
``func``, ``comparator``, ``backend.*``); Parity's own API (``parity``, ``parity_onnxrt``, ``parity_trt``, ...)
stays Parity's. docs/python-api.md lists each mirrored module and what differs."""

from parity_polygraphy import config  # noqa: F401 (as `import polygraphy` gives polygraphy.config)

__version__ = "0.1.0"  # this distribution's version; it follows Polygraphy 0.53.6's behaviour
