"""Lazy loaders for ONNX models and ONNX Runtime sessions, with immediately-evaluated twins."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parity.api import BackendError, BaseLoader, ModelError, check_model_path, invoke_if_callable, missing_dependency, onnx_models
from parity_onnxrt.messages import default_log_severity, reason

MARK_ALL = onnx_models.MARK_ALL


class OnnxFromPath(BaseLoader):
    """Loads an ``onnx.ModelProto`` from a path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> Any:
        return onnx_models.load(self.path)


def onnx_from_path(path: str) -> Any:
    return OnnxFromPath(path)()


class ModifyOnnxOutputs(BaseLoader):
    """Marks tensors as graph outputs: named ones, or every tensor (``'mark all'``), minus ``exclude``."""

    def __init__(self, model: Any, outputs: Sequence[str], exclude: Sequence[str] = ()) -> None:
        self.model, self.outputs, self.exclude = model, list(outputs), list(exclude)

    def __call__(self) -> Any:
        model, _ = invoke_if_callable(self.model)
        return onnx_models.mark_outputs(model, self.outputs, self.exclude)  # shared with other ONNX backends


def modify_onnx_outputs(model: Any, outputs: Sequence[str], exclude: Sequence[str] = ()) -> Any:
    return ModifyOnnxOutputs(model, outputs, exclude)()


_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "layout": "ORT_ENABLE_LAYOUT", "all": "ORT_ENABLE_ALL"}


def resolve_providers(requested: Sequence[str] | None) -> list[str]:
    """Partial, case-insensitive provider names (``cuda`` -> ``CUDAExecutionProvider``)."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    if not requested:
        return ["CPUExecutionProvider"]
    chosen = []
    for want in requested:
        hits = [p for p in available if want.lower() in p.lower()]
        if not hits:
            raise BackendError(f"onnxruntime has no provider matching '{want}'; available: {', '.join(available)}")
        chosen.append(hits[0])
    return chosen


class SessionFromOnnx(BaseLoader):
    """Builds an ``onnxruntime.InferenceSession`` from a path, bytes, a ModelProto or a loader of one."""

    def __init__(
        self,
        model: Any,
        providers: Sequence[str] | None = None,
        graph_optimization_level: str | None = None,
        intra_op_num_threads: int | None = None,
        log_severity_level: int | None = None,
    ) -> None:
        """``log_severity_level``: onnxruntime's logger threshold (0 verbose ... 4 fatal); default: its warnings
        only with ``parity -v``, else none (errors still arrive as the exception's text)."""
        self.model = model
        self.providers = providers
        self.graph_optimization_level = graph_optimization_level
        self.intra_op_num_threads = intra_op_num_threads
        self.log_severity_level = log_severity_level

    def __call__(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError:
            raise missing_dependency("onnxruntime", "pip install onnxruntime") from None
        model, _ = invoke_if_callable(self.model)
        source: Any = model
        if isinstance(model, str):
            check_model_path(model)
        elif not isinstance(model, (bytes, bytearray)):
            source = _serialize(model)
        severity = default_log_severity() if self.log_severity_level is None else self.log_severity_level
        ort.set_default_logger_severity(severity)  # the process-wide logger (environment, providers)
        options = ort.SessionOptions()
        options.log_severity_level = severity  # this session's logger, also used while it runs
        if self.graph_optimization_level:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[self.graph_optimization_level])
        if self.intra_op_num_threads:
            options.intra_op_num_threads = self.intra_op_num_threads
        providers = resolve_providers(self.providers)  # outside the try: a missing provider is no fault of the model
        try:
            return ort.InferenceSession(source, sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise _session_error(exc, model) from None


def _serialize(model: Any) -> bytes:
    try:
        return model.SerializeToString()
    except ValueError as exc:  # protobuf refuses messages over 2 GiB
        raise ModelError(f"model is too large to pass in memory ({exc}); save it with external data and pass the path") from None


def _session_error(exc: Exception, model: Any) -> ModelError:
    text = str(exc)
    where = model if isinstance(model, str) else "model"
    if "Unsupported model IR version" in text or "IR version" in text and "not supported" in text:
        import re

        found = re.search(r"IR version:?\s*(\d+)", text)
        version = f" {found.group(1)}" if found else ""
        return ModelError(f"{where}: onnxruntime cannot load IR version{version}; fix: {onnx_models.IR_FIX}")
    if "protobuf parsing failed" in text.lower():  # a path says "Protobuf parsing failed", bytes "... protobuf parsing failed"
        return ModelError(f"{where}: not a valid ONNX model (onnxruntime: {reason(exc, 200)})")
    return ModelError(f"onnxruntime could not load {where}: {reason(exc)}")


def session_from_onnx(
    model: Any,
    providers: Sequence[str] | None = None,
    graph_optimization_level: str | None = None,
    intra_op_num_threads: int | None = None,
    log_severity_level: int | None = None,
) -> Any:
    return SessionFromOnnx(model, providers, graph_optimization_level, intra_op_num_threads, log_severity_level)()
