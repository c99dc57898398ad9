"""``polygraphy.cuda``: device memory and streams on cuda-python (see :mod:`parity_polygraphy.cuda.cuda`)."""

from parity_polygraphy.cuda.cuda import Cuda, DeviceArray, DeviceView, MemcpyKind, Stream, wrapper

__all__ = ["Cuda", "DeviceArray", "DeviceView", "MemcpyKind", "Stream", "wrapper"]
