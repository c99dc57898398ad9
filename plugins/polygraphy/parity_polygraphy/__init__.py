"""Polygraphy's Python API on Parity's engine (issue 28): one import rule. A script written for Polygraphy runs
after replacing the word ``polygraphy`` with ``parity_polygraphy`` in its imports, and nothing else:
``from polygraphy.comparator import Comparator`` becomes ``from parity_polygraphy.comparator import Comparator``.

The modules mirror Polygraphy's public tree (``exception``, ``datatype``, ``common``, ``logger``, ``json``,
``func``, ``comparator``, ``backend.*``); Parity's own API (``parity``, ``parity_onnxrt``, ``parity_trt``, ...)
stays Parity's. docs/python-api.md lists each mirrored module and what differs."""

from typing import Any

__version__ = "0.1.0"  # this distribution's version; it follows Polygraphy 0.53.6's behaviour


def __getattr__(name: str) -> Any:
    """``parity_polygraphy.config`` as ``import polygraphy`` gives ``polygraphy.config``, imported on first use: the
    package's hooks (``parity_polygraphy.hooks``, an entry point) load on every ``parity`` command, ``--help`` too."""
    if name == "config":
        import parity_polygraphy.config as config  # here: only a script that reads parity_polygraphy.config gets here

        return config
    raise AttributeError(f"module 'parity_polygraphy' has no attribute '{name}'")
