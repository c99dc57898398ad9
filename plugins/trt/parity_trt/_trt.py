"""Importing TensorRT: one place that turns "not installed" into the one-line error users see."""

from __future__ import annotations

import collections
import functools
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

from parity.api import missing_dependency

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
    over ``severity``, so Python API users who load an engine without building a network get it too.

    It prints what TensorRT logs at ``min_severity`` or worse to stderr, as ``trt.Logger`` does, except errors
    while ``PARITY_TRT_LOG`` is unset: those are kept (``errors``) and carried by Parity's own one-line failure
    (:func:`reason_since`, :func:`failure_reason`), or shown as one warning after an operation that still succeeded
    (:func:`warn_errors_since`). ``listeners`` get every message (a tactic recorder reads the verbose build log)."""
    from parity_trt.options import log_severity

    trt = import_trt()

    class ParityLogger(trt.ILogger):  # subclassing ILogger: pyCore.cpp binds it with a Python trampoline
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.min_severity = getattr(trt.ILogger.Severity, log_severity() or severity)
            self.print_errors = log_severity() is not None
            self.errors: collections.deque[str] = collections.deque(maxlen=32)
            self.logged_errors = 0  # how many errors were ever logged: marks for reason_since
            self.listeners: list[Callable[[Any, str], None]] = []

        def log(self, level: Any, msg: str) -> None:
            error = int(level) <= int(trt.ILogger.Severity.ERROR)
            if error:
                self.errors.append(msg)
                self.logged_errors += 1
            for listener in self.listeners:
                listener(level, msg)
            shown = self.min_severity if self.print_errors else _python_api_severity(trt, self.min_severity)
            if int(level) <= int(shown) and (self.print_errors or not error):
                print(f"[TensorRT] [{str(getattr(level, 'name', level))[:1]}] {msg}", file=sys.stderr)

    return ParityLogger()


def _python_api_severity(trt: Any, default: Any) -> Any:
    """TensorRT's level for the Python API's ``G_LOGGER`` (only once a script imported it; ``PARITY_TRT_LOG`` wins):
    EXTRA_VERBOSE or below shows TensorRT's VERBOSE messages, VERBOSE its INFO, above WARNING only its errors."""
    logger = sys.modules.get("parity.logger")
    if logger is None:
        return default
    level, names = logger.G_LOGGER.severity, trt.ILogger.Severity
    if level <= logger.Logger.EXTRA_VERBOSE:
        return names.VERBOSE
    if level <= logger.Logger.VERBOSE:
        return names.INFO
    return default if level <= logger.Logger.WARNING else names.ERROR


def reason_since(mark: int) -> str:
    """TensorRT's errors logged since ``mark`` (``get_logger().logged_errors`` before the call), the last three
    on one line; '' when it logged none."""
    logger = get_logger()
    fresh = min(logger.logged_errors - mark, len(logger.errors))
    errors = list(logger.errors)[len(logger.errors) - fresh:] if fresh > 0 else []
    shown = [" ".join(e.split()) for e in errors[-3:]]
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(shown) + more


def failure_reason(mark: int) -> str:
    """:func:`reason_since` for a one-line failure: TensorRT's errors since ``mark``, or 'it logged no error'."""
    return reason_since(mark) or "it logged no error"


def warn_errors_since(mark: int, what: str) -> None:
    """After ``what`` succeeded: TensorRT's errors logged meanwhile, as one warning (they were not printed)."""
    reason = reason_since(mark)
    if reason:
        warnings.warn(f"TensorRT logged errors during {what}, which still succeeded: {reason}", stacklevel=2)
