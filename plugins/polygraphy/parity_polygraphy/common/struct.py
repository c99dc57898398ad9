"""Polygraphy's ``TensorMetadata`` (name -> dtype and shape, as runners report their inputs and data loaders take
them) and ``FormattedArray``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parity_polygraphy.common.interface import TypedDict
from parity_polygraphy.datatype import DataType
from parity_polygraphy.json import Decoder, Encoder, add_json_methods

__all__ = ["BoundedShape", "FormattedArray", "MetadataTuple", "TensorMetadata"]


class BoundedShape(list):
    """A shape (dynamic dimensions as negative values, None or names) with optional ``min`` / ``max`` shapes."""

    def __init__(self, shape: Sequence[Any], min: Sequence[int] | None = None, max: Sequence[int] | None = None) -> None:  # noqa: A002 (Polygraphy's names)
        super().__init__(shape)
        self.min = min
        self.max = max

    def __repr__(self) -> str:
        return f"BoundedShape({list(self)}, min={self.min}, max={self.max})"


class MetadataTuple:
    """One tensor's ``dtype`` (a DataType, converted from any library's type on assignment) and ``shape``;
    unpacks as ``dtype, shape = meta``."""

    def __init__(self, dtype: Any, shape: BoundedShape | None, docstring: str | None) -> None:
        self.dtype = dtype
        self.shape = shape
        self.docstring = docstring

    @property
    def dtype(self) -> Any:
        return self._dtype

    @dtype.setter
    def dtype(self, new: Any) -> None:
        self._dtype = DataType.from_dtype(new) if new is not None else None

    def __iter__(self) -> Any:
        yield from (self.dtype, self.shape)

    def __repr__(self) -> str:
        return f"MetadataTuple({self.dtype}, {self.shape}, {self.docstring})"

    def __str__(self) -> str:
        items = [f"dtype={self.dtype}"] if self.dtype is not None else []
        if self.shape is not None:
            items.append(f"shape={tuple(self.shape)}")
        if self.docstring:
            items.append(self.docstring)
        return "[" + ", ".join(items) + "]" if items else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetadataTuple) and self.shape == other.shape and self.dtype == other.dtype

    __hash__ = None  # type: ignore[assignment]


class TensorMetadata(TypedDict(lambda: str, lambda: MetadataTuple)):
    """An ordered mapping of tensor names to :class:`MetadataTuple` (``meta["x"].dtype``, ``meta["x"].shape``)."""

    @staticmethod
    def from_feed_dict(feed_dict: Mapping[str, Any]) -> TensorMetadata:
        """The names, dtypes and shapes of a feed dict's arrays (NumPy arrays or torch tensors)."""
        meta = TensorMetadata()
        for name, array in feed_dict.items():
            meta.add(name, DataType.from_dtype(array.dtype), tuple(array.shape))
        return meta

    def add(self, name: str, dtype: Any, shape: Sequence[Any] | None, min_shape: Sequence[int] | None = None, max_shape: Sequence[int] | None = None,
            docstring: str | None = None) -> TensorMetadata:
        """Add (or replace) an entry; returns this object, so calls chain."""
        self[name] = MetadataTuple(dtype, BoundedShape(shape, min=min_shape, max=max_shape) if shape is not None else None, docstring)
        return self

    def __repr__(self) -> str:
        text = "TensorMetadata()"
        for name, meta in self.items():
            args = [repr(name), repr(meta.dtype), repr(list(meta.shape) if meta.shape is not None else None)]
            for key, value in (("min_shape", getattr(meta.shape, "min", None)), ("max_shape", getattr(meta.shape, "max", None)), ("docstring", meta.docstring)):
                if value is not None:
                    args.append(f"{key}={value!r}")
            text += f".add({', '.join(args)})"
        return text

    def __str__(self) -> str:
        return "{" + ",\n ".join(f"{name} {meta}".strip() for name, meta in self.items()) + "}"


@add_json_methods("formatted array")
class FormattedArray:
    """An array (often raw bytes) with the semantic ``shape`` of the data it holds, for formats whose memory
    layout is padded (``N(C/4)HW4``). Experimental in Polygraphy too."""

    def __init__(self, array: Any, shape: Sequence[int]) -> None:
        self.array = array
        self.shape = shape


@Encoder.register(FormattedArray)
def _encode_formatted_array(farray: FormattedArray) -> dict[str, Any]:
    return {"array": farray.array, "shape": farray.shape}


@Decoder.register(FormattedArray)
def _decode_formatted_array(dct: dict[str, Any]) -> FormattedArray:
    return FormattedArray(dct["array"], dct["shape"])
