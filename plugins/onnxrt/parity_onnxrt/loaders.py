"""Lazy loaders for ONNX models and ONNX Runtime sessions, with immediately-evaluated twins."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
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
    """Loads an ``onnx.ModelProto`` from a path (Polygraphy's signature), with its weights left in their
    external data files: the graph is parsed, each external reference is checked to resolve (a missing data
    file is one line, exit 3), no weight byte is read. ``base_dir`` is the folder the references are relative
    to (``external_data_dir``, default the model's folder); :class:`SessionFromOnnx` reads it, so
    ``SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(p), ...))`` hands onnxruntime the small graph-only
    message plus that folder (:func:`parity.api.runtime_bytes`), never a message holding the weights.
    ``ignore_external_data``: the structure only (references are not checked; the model cannot run)."""

    def __init__(self, path: str, external_data_dir: str | os.PathLike[str] | None = None, ignore_external_data: bool = False) -> None:
        self.path = os.fspath(path)
        self.external_data_dir = external_data_dir
        self.ignore_external_data = ignore_external_data

    @property
    def base_dir(self) -> str:
        return os.fspath(onnx_models.data_dir(self.path, self.external_data_dir))

    def __call__(self) -> Any:
        return onnx_models.load(self.path, load_external_data=False, external_data_dir=self.external_data_dir, ignore_external_data=self.ignore_external_data)


def onnx_from_path(path: str, external_data_dir: str | os.PathLike[str] | None = None, ignore_external_data: bool = False) -> Any:
    """The model with its weights left in their files (see :class:`OnnxFromPath`); pass
    ``base_dir=onnx_models.data_dir(path, external_data_dir)`` to :class:`SessionFromOnnx` when the model has
    external data in another folder than the working directory."""
    return OnnxFromPath(path, external_data_dir, ignore_external_data)()


class ModifyOnnxOutputs(BaseLoader):
    """Marks tensors as graph outputs: named ones, or every tensor (``'mark all'``), minus ``exclude``. The
    edit touches the graph only: weights left in their files stay there (``base_dir`` is the wrapped
    loader's)."""

    def __init__(self, model: Any, outputs: Sequence[str], exclude: Sequence[str] = ()) -> None:
        self.model, self.outputs, self.exclude = model, list(outputs), list(exclude)

    @property
    def base_dir(self) -> str | None:
        return base_dir_of(self.model)

    def __call__(self) -> Any:
        model, _ = invoke_if_callable(self.model)
        return onnx_models.mark_outputs(model, self.outputs, self.exclude)  # shared with other ONNX backends


def base_dir_of(source: Any) -> str | None:
    """The folder of a loader chain's external data: the first ``base_dir`` found on ``source`` or the loaders
    it wraps (their ``model`` attribute), None when none says."""
    seen = 0
    while source is not None and seen < 32:
        found = getattr(source, "base_dir", None)
        if found is not None and not callable(found):
            return os.fspath(found)
        source = getattr(source, "model", None) if isinstance(source, BaseLoader) else None
        seen += 1
    return None


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
    """Builds an ``onnxruntime.InferenceSession`` from a path, bytes, a ModelProto or a loader of one.

    A path goes to onnxruntime as it is (it reads the external data beside the model, or in ``base_dir``).
    A ModelProto whose weights are still in external data files goes as graph-only bytes plus the session
    config entry naming their folder (:func:`parity.api.runtime_bytes`): ``base_dir``, else the loader
    chain's (:class:`OnnxFromPath`'s ``external_data_dir`` or the model's folder). A ModelProto holding its
    weights is serialized (a one-line error past protobuf's 2 GiB)."""

    def __init__(
        self,
        model: Any,
        providers: Sequence[str] | None = None,
        graph_optimization_level: str | None = None,
        intra_op_num_threads: int | None = None,
        log_severity_level: int | None = None,
        custom_ops: Sequence[str] = (),
        session_options: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        prepack: bool | None = None,
    ) -> None:
        """``log_severity_level``: onnxruntime's logger threshold (0 verbose ... 4 fatal); default: its warnings
        only with ``parity -v``, else none (errors still arrive as the exception's text).

        ``custom_ops``: custom-op libraries (``.so``) registered with ``SessionOptions.register_custom_ops_library``,
        in order (``--onnxrt-custom-ops``). ``session_options``: a JSON file or a mapping of ``SessionOptions``
        attributes (``{"intra_op_num_threads": 2, "execution_mode": "ORT_PARALLEL"}``) and ``config_entries``
        (``{"session.intra_op.allow_spinning": "0"}``, passed to ``add_session_config_entry``)
        (``--onnxrt-session-options``); the arguments above win over it. ``base_dir``: the folder of the
        model's external data files (``--external-data-dir``).

        ``prepack``: let onnxruntime pack MatMul/Conv weights into its kernels' layout when the session is
        created (``--onnxrt-prepack``; onnxruntime's own default). Off unless asked, here or as
        ``config_entries {"session.disable_prepacking": "0"}`` in ``session_options``: packing costs about a
        second per GiB of weights before the first inference and pays off only after tens of inferences
        (``bench/ort_session_probe.py``: 2.2 s of a 2.4 s session at 2.4 GiB); unpacked kernels agree with
        packed ones to the last bits (1e-7 relative), not bit for bit."""
        self.model = model
        self.prepack = prepack
        self.base_dir = os.fspath(base_dir) if base_dir is not None else None
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
        base_dir = self.base_dir or base_dir_of(self.model)
        model, _ = invoke_if_callable(self.model)
        given, source = model, model
        entries: dict[str, str] = {}
        if isinstance(model, str):
            check_model_path(model)
            if not _utf8(model) or (base_dir is not None and os.path.realpath(base_dir) != os.path.realpath(os.path.dirname(os.path.abspath(model)))):
                # onnxruntime gets the graph-only message and the data's folder: the data is not beside the model,
                # or the path is one onnxruntime's binding cannot take (it encodes str paths as UTF-8; a file name
                # with byte \xff or a latin-1 é arrives surrogate-escaped); a folder it cannot take is aliased below
                folder = base_dir or os.path.dirname(os.path.abspath(model))
                model = onnx_models.load(model, load_external_data=False, external_data_dir=base_dir)
                source, entries = _graph_bytes(model, folder)
        elif not isinstance(model, (bytes, bytearray)):
            source, entries = _graph_bytes(model, base_dir)  # graph-only when weights are in files; one line past 2 GiB
        severity = default_log_severity() if self.log_severity_level is None else self.log_severity_level
        ort.set_default_logger_severity(severity)  # the process-wide logger (environment, providers)
        options = ort.SessionOptions()
        options.log_severity_level = severity  # this session's logger, also used while it runs
        options.add_session_config_entry("session.disable_prepacking", "1")  # the file's entry may turn it back on
        apply_session_options(options, settings, source_name)
        if self.prepack is not None:
            options.add_session_config_entry("session.disable_prepacking", "0" if self.prepack else "1")
        for key, value in entries.items():
            if key != ORT_DATA_FOLDER:  # set with the session, through a UTF-8 alias where needed
                options.add_session_config_entry(key, value)
        if self.graph_optimization_level:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[self.graph_optimization_level])
        if self.intra_op_num_threads:
            options.intra_op_num_threads = self.intra_op_num_threads
        for library in dict.fromkeys(self.custom_ops):  # one library named twice is registered once
            register_custom_ops(options, library)
        providers = resolve_providers(self.providers)  # outside the try: a missing provider is no fault of the model
        try:
            with _utf8_folder(entries.get(ORT_DATA_FOLDER)) as folder:  # the data is read while the session is made
                if folder is not None:
                    options.add_session_config_entry(ORT_DATA_FOLDER, folder)
                return ort.InferenceSession(source, sess_options=options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            if isinstance(given, str):
                _check_external_data(given, base_dir)  # a missing or short data file: onnx_models' one line names it
            raise _session_error(exc, given, bool(self.custom_ops)) from None


ORT_DATA_FOLDER = "session.model_external_initializers_file_folder_path"  # onnxruntime's key (parity.onnx_external's)


def _utf8(path: str) -> bool:
    """Whether onnxruntime can take ``path``: its binding encodes str paths as UTF-8, which a name decoded
    with surrogate escapes (bytes that are not UTF-8) fails."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _graph_bytes(model: Any, base_dir: str | None) -> tuple[bytes, dict[str, str]]:
    from parity.api import runtime_bytes  # here: a plain run (a path, data beside it) never needs it

    return runtime_bytes(model, base_dir)


@contextlib.contextmanager
def _utf8_folder(folder: str | None) -> Iterator[str | None]:
    """``folder`` as onnxruntime can take it: itself when UTF-8, else a symlink to it in a private temporary
    folder, removed once the session is made (onnxruntime has opened the data files by then)."""
    if folder is None or _utf8(folder):
        yield folder
        return
    import tempfile  # 4.5 ms at a tiny parity run, which never needs it

    with tempfile.TemporaryDirectory(prefix="parity-ort-") as alias:
        link = os.path.join(alias, "data")
        os.symlink(folder, link, target_is_directory=True)
        yield link


def _check_external_data(path: str, base_dir: str | None) -> None:
    """After onnxruntime refused a model given by path: the model's own word on its external data (a missing
    or short data file is a one-line ModelError naming it); a model that reads fine returns quietly."""
    from parity.api import onnx_external  # here: only a failed load needs it

    try:
        model = onnx_models.load(path, ignore_external_data=True)
        folder = onnx_models.data_dir(path, base_dir)
    except Exception:  # noqa: BLE001 - not readable by onnx either: onnxruntime's own reason is the better message
        return
    onnx_external.check_references(model, folder, path)


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


def _session_error(exc: Exception, model: Any, custom_ops: bool = False) -> ModelError:
    text = str(exc)
    where = model if isinstance(model, str) else "model"
    if "is not a registered function/op" in text:  # "Fatal error: ai.onnx.contrib:Inverse(-1) is not a registered function/op"
        hint = "does a --onnxrt-custom-ops library provide it?" if custom_ops else "a custom op? register its library with --onnxrt-custom-ops LIB.so"
        return ModelError(f"onnxruntime could not load {where}: {reason(exc)} ({hint})")
    if custom_ops and "Domain already set in registry" in text:
        return ModelError(f"onnxruntime could not load {where}: {reason(exc)} (two --onnxrt-custom-ops libraries register the same op domain)")
    if "Unsupported model IR version" in text or "IR version" in text and "not supported" in text:
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
    base_dir: str | os.PathLike[str] | None = None,
    prepack: bool | None = None,
) -> Any:
    return SessionFromOnnx(model, providers, graph_optimization_level, intra_op_num_threads, log_severity_level, custom_ops, session_options, base_dir, prepack)()


_TRIM: Any = None  # glibc's malloc_trim, once looked up (False: not glibc)


def release_freed_memory() -> None:
    """Give the memory of a released session back to the system: glibc keeps freed blocks of up to 32 MiB (a
    weight's size) in its heap, so without this a run that loads sessions one after the other (segments,
    parts of a model) would keep every one's weights in the process."""
    global _TRIM
    gc.collect()
    if _TRIM is None:
        import ctypes  # here: 2-12 ms of import a plain run never needs

        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)
