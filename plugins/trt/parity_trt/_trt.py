"""Importing TensorRT: one place that turns "not installed" into the one-line error users see."""

from __future__ import annotations

import functools
from types import ModuleType

from parity.errors import missing_dependency

INSTALL_HINT = "pip install 'parity-trt[tensorrt]' (or pip install tensorrt; needs an NVIDIA GPU and driver)"
CUDA_INSTALL_HINT = "pip install cuda-python"


@functools.cache
def import_trt() -> ModuleType:
    try:
        import tensorrt
    except ImportError as exc:
        raise missing_dependency("tensorrt", INSTALL_HINT) from exc
    return tensorrt


@functools.cache
def get_logger(severity: str = "WARNING"):  # -> trt.ILogger
    """One logger per process, as TensorRT expects (builders and runtimes share it). ``PARITY_TRT_LOG`` wins
    over ``severity``, so Python API users who load an engine without building a network get it too."""
    from parity_trt.options import log_severity

    trt = import_trt()
    return trt.Logger(getattr(trt.Logger, log_severity() or severity))
