"""``polygraphy.common``: ``TensorMetadata`` and ``FormattedArray``; the typed containers are in
``parity_polygraphy.common.interface``."""

from parity_polygraphy.common.struct import BoundedShape, FormattedArray, MetadataTuple, TensorMetadata

__all__ = ["BoundedShape", "FormattedArray", "MetadataTuple", "TensorMetadata"]
