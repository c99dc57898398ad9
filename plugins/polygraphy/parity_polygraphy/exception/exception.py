"""Polygraphy's exceptions. :class:`PolygraphyException` is a :class:`parity.api.ParityError`, so Parity's own
code and command line treat it as an expected failure (one line, exit code 1), as they treat Parity's errors."""

from __future__ import annotations

from parity.api import ParityError

__all__ = ["DataTypeConversionException", "PolygraphyException", "PolygraphyInternalException"]


class PolygraphyException(ParityError):
    """An expected failure: bad input, a model or backend that cannot do what was asked."""


class PolygraphyInternalException(Exception):
    """An internal check failed (a bug, not bad input): deliberately not a PolygraphyException, as in Polygraphy."""


class DataTypeConversionException(PolygraphyException):
    """A data type has no equivalent in the library asked for."""
