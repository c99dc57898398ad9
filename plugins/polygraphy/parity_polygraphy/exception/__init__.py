"""``polygraphy.exception``: :class:`PolygraphyException` and the exceptions derived from it."""

from parity_polygraphy.exception.exception import DataTypeConversionException, PolygraphyException, PolygraphyInternalException

__all__ = ["DataTypeConversionException", "PolygraphyException", "PolygraphyInternalException"]
