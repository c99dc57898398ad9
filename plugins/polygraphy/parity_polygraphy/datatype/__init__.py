"""``polygraphy.datatype``: :class:`DataType` and its conversions to and from NumPy, ONNX, ONNX Runtime, TensorRT
and PyTorch types."""

from parity_polygraphy.datatype.datatype import DataType, DataTypeEntry, register_dtype_exporter, register_dtype_importer

__all__ = ["DataType", "DataTypeEntry", "register_dtype_exporter", "register_dtype_importer"]
