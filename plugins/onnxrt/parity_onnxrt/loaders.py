"""Lazy loaders for ONNX models and ONNX Runtime sessions, with immediately-evaluated twins."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from parity.api import (
    BackendError,
    BaseLoader,
    ModelError,
    UsageError,
    check_model_path,
    did_you_mean,
    invoke_if_callable,
    missing_dependency,
    onnx_models,
)
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
        custom_ops: Sequence[str] = (),
        session_options: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    ) -> None:
        """``log_severity_level``: onnxruntime's logger threshold (0 verbose ... 4 fatal); default: its warnings
        only with ``parity -v``, else none (errors still arrive as the exception's text).

        ``custom_ops``: custom-op libraries (``.so``) registered with ``SessionOptions.register_custom_ops_library``,
        in order (``--onnxrt-custom-ops``). ``session_options``: a JSON file or a mapping of ``SessionOptions``
        attributes (``{"intra_op_num_threads": 2, "execution_mode": "ORT_PARALLEL"}``) and ``config_entries``
        (``{"session.intra_op.allow_spinning": "0"}``, passed to ``add_session_config_entry``)
        (``--onnxrt-session-options``); the arguments above win over it."""
        self.model = model
        self.providers = providers
        self.graph_optimization_level = graph_optimization_level
        self.intra_op_num_threads = intra_op_num_threads
        self.log_severity_level = log_severity_level
        self.custom_ops = [str(lib) for lib in custom_ops]
        self.session_options = session_options

    def __call__(self) -> Any:
        try:
            import onnxruntime as ort
        except ImportError:
            raise missing_dependency("onnxruntime", "pip install onnxruntime") from None
        settings, source_name = read_session_options(self.session_options)  # a bad file fails before the model is read
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
        apply_session_options(options, settings, source_name)
        if self.graph_optimization_level:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[self.graph_optimization_level])
        if self.intra_op_num_threads:
            options.intra_op_num_threads = self.intra_op_num_threads
        for library in dict.fromkeys(self.custom_ops):  # one library named twice is registered once
            register_custom_ops(options, library)
        providers = resolve_providers(self.providers)  # outside the try: a missing provider is no fault of the model
        try:
            return ort.InferenceSession(source, sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            raise _session_error(exc, model, bool(self.custom_ops)) from None


def register_custom_ops(options: Any, library: str) -> None:
    """``options.register_custom_ops_library(library)``; a missing or broken library is one line with
    onnxruntime's own reason (exit 3)."""
    try:
        options.register_custom_ops_library(library)
    except Exception as exc:  # onnxruntime's pybind Fail: "Failed to load library x.so with error: ..."
        raise BackendError(f"onnxruntime could not load the custom-op library {library}: {reason(exc)}") from None


_SOURCE = "--onnxrt-session-options"


def read_session_options(given: str | os.PathLike[str] | Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """``(settings, where)``: the JSON object of a session-options file (``where`` names the file in errors),
    or a mapping as it is. A file that cannot be read or is not a JSON object is one line, exit 2."""
    if given is None:
        return {}, ""
    if isinstance(given, Mapping):
        return dict(given), "session_options"
    import json

    path = os.fspath(given)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise UsageError(f"{_SOURCE}: cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise UsageError(f"{_SOURCE}: {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{_SOURCE}: {path} must hold a JSON object of SessionOptions attributes, not {type(data).__name__}")
    return data, f"{_SOURCE} {path}"


def apply_session_options(options: Any, settings: Mapping[str, Any], where: str) -> None:
    """Set each ``SessionOptions`` attribute of ``settings`` (enums by name: ``"ORT_PARALLEL"``, ``"parallel"``;
    ``graph_optimization_level`` also as ``--graph-optimization-level`` spells it) and add each
    ``config_entries`` item. An unknown key or a value of the wrong type is one line naming it and ``where``."""
    known = sorted(n for n in dir(options) if not n.startswith("_") and not callable(getattr(options, n)))
    for key, value in settings.items():
        if key == "config_entries":
            _config_entries(options, value, where)
            continue
        if key not in known:
            raise UsageError(f"{where}: unknown key '{key}'{did_you_mean(key, [*known, 'config_entries'])}; known: {', '.join([*known, 'config_entries'])}")
        current = getattr(options, key)
        try:
            setattr(options, key, _typed(key, value, current))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{where}: '{key}': {exc}") from None


def _typed(key: str, value: Any, current: Any) -> Any:
    """``value`` as the type of the attribute's current value, refusing what onnxruntime would coerce silently
    (``true`` for a thread count, ``1`` for a flag)."""
    members = getattr(type(current), "__members__", None)
    if members:  # a pybind enum: by name, case-insensitive, with or without ORT_
        if key == "graph_optimization_level" and isinstance(value, str) and value.lower() in _LEVELS:
            value = _LEVELS[value.lower()]
        if isinstance(value, str):
            by_name = {n.lower(): m for n, m in members.items()}
            found = by_name.get(value.lower()) or by_name.get(f"ort_{value.lower()}")
            if found is not None:
                return found
        raise ValueError(f"expected one of {', '.join(members)}, got {value!r}")
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if isinstance(current, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        return value
    if isinstance(current, str) and not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _config_entries(options: Any, entries: Any, where: str) -> None:
    if not isinstance(entries, dict):
        raise UsageError(f"{where}: 'config_entries' must be a JSON object of key: value strings, not {type(entries).__name__}")
    for key, value in entries.items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            raise UsageError(f"{where}: config_entries '{key}': expected a string, got {value!r}")
        try:
            options.add_session_config_entry(key, value)
        except Exception as exc:  # onnxruntime's pybind errors
            raise UsageError(f"{where}: config_entries '{key}': {reason(exc)}") from None


def _serialize(model: Any) -> bytes:
    try:
        return model.SerializeToString()
    except ValueError as exc:  # protobuf refuses messages over 2 GiB
        raise ModelError(f"model is too large to pass in memory ({exc}); save it with external data and pass the path") from None


def _session_error(exc: Exception, model: Any, custom_ops: bool = False) -> ModelError:
    text = str(exc)
    where = model if isinstance(model, str) else "model"
    if "is not a registered function/op" in text:  # "Fatal error: ai.onnx.contrib:Inverse(-1) is not a registered function/op"
        hint = "does a --onnxrt-custom-ops library provide it?" if custom_ops else "a custom op? register its library with --onnxrt-custom-ops LIB.so"
        return ModelError(f"onnxruntime could not load {where}: {reason(exc)} ({hint})")
    if custom_ops and "Domain already set in registry" in text:
        return ModelError(f"onnxruntime could not load {where}: {reason(exc)} (two --onnxrt-custom-ops libraries register the same op domain)")
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
    custom_ops: Sequence[str] = (),
    session_options: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> Any:
    return SessionFromOnnx(model, providers, graph_optimization_level, intra_op_num_threads, log_severity_level, custom_ops, session_options)()
