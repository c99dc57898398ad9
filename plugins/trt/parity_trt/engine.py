"""Engine loaders: build (serialized) engines from networks, deserialize bytes or files, save engines."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from parity.api import BackendError, BaseLoader, BytesFromPath, ModelError, UsageError, invoke_if_callable, write_bytes_atomic
from parity_trt import versions
from parity_trt._trt import failure_reason, get_logger, import_trt, reason_since, warn_errors_since
from parity_trt.callbacks import clear, raise_pending
from parity_trt.config import CreateConfig, _postprocess_of, save_timing_cache
from parity_trt.network import unpack


@functools.cache
def get_runtime() -> Any:
    """One ``trt.Runtime`` per process; it must outlive the engines it deserialized."""
    trt = import_trt()
    return trt.Runtime(get_logger())


def _config_for(config_loader: Any, builder: Any, network: Any) -> Any:
    """The ``IBuilderConfig`` to build with: ``config_loader(builder, network)`` (a ``CreateConfig`` or any callable
    taking them), or ``config_loader`` itself when it is a ready ``IBuilderConfig`` (as ``create_config`` returns)."""
    if callable(config_loader):
        return config_loader(builder, network)
    trt = import_trt()
    if isinstance(config_loader, trt.IBuilderConfig):
        return config_loader
    raise UsageError(f"config must be a TensorRT IBuilderConfig or a callable taking (builder, network), "
                     f"such as CreateConfig(...); got {type(config_loader).__name__}")


class EngineBytesFromNetwork(BaseLoader):
    """Build a serialized engine.

    ``network``: a loader returning ``(builder, network[, parser])`` (``NetworkFromOnnxPath``, ``CreateNetwork``, a
    function wrapped by ``extend``) or such a tuple itself. ``config``: a ``CreateConfig`` (or any
    ``f(builder, network)`` returning an ``IBuilderConfig``), or a ready ``IBuilderConfig`` (``create_config(builder,
    network, ...)``); ``None`` is ``CreateConfig()``.
    """

    def __init__(self, network: Any, config: Callable[[Any, Any], Any] | Any | None = None,
                 save_timing_cache: str | None = None, extensions: Sequence[Any] = ()) -> None:
        self.network_loader = network
        self.config_loader = CreateConfig() if config is None else config
        self.timing_cache_path = save_timing_cache
        self.extensions = list(extensions)

    def __call__(self) -> bytes:
        builder, network, _parser = unpack(invoke_if_callable(self.network_loader)[0])
        config = _config_for(self.config_loader, builder, network)
        for ext in self.extensions:  # extensions given here (not in CreateConfig) still see the final config
            func = _postprocess_of(ext)
            if func is not None:
                func(builder, network, config)
        owners = _callback_owners(self.config_loader, config)
        if any(hasattr(o, "_set_network_inputs") for o in owners):  # a Parity calibrator checks feeds against these
            from parity_trt.calibrator import expect_network_inputs

            for owner in owners:
                expect_network_inputs(owner, _network_inputs(network))
        clear(*owners)
        mark = get_logger().logged_errors
        serialized = builder.build_serialized_network(network, config)
        # TensorRT logs and swallows exceptions raised in Python callbacks (calibrator, algorithm selector,
        # progress monitor); the first one kept explains a failed build better than TensorRT's log
        raise_pending(*owners)
        # extensions given to CreateConfig(postprocess=...) see the end of the build too (a tactic recorder writes
        # its replay, a replayer explains a failure), once each even if also passed to this loader
        config_exts = list(getattr(self.config_loader, "postprocess", []))
        unique = {id(ext): ext for ext in [*self.extensions, *config_exts]}  # by identity: may be unhashable
        if serialized is None:
            reason = reason_since(mark)
            for ext in unique.values():  # build_failed(builder, network, config, reason) -> a better message, or None
                message = ext.build_failed(builder, network, config, reason) if hasattr(ext, "build_failed") else None
                if message:
                    raise BackendError(message)
            raise BackendError(f"TensorRT failed to build the engine: {failure_reason(mark)} (PARITY_TRT_LOG=verbose shows more)")
        data = bytes(serialized)
        warn_errors_since(mark, "the engine build")
        if self.timing_cache_path:
            save_timing_cache(config, self.timing_cache_path)
        for ext in unique.values():
            if hasattr(ext, "after_build"):
                ext.after_build(builder, network, config, data)
        return data


def _callback_owners(config_loader: Any, config: Any) -> list[Any]:
    """The Python callback objects a build may call: those the config holds and those the loader kept."""
    found: dict[int, Any] = {}
    for owner, attr in [(config_loader, "calibrator"), (config_loader, "_monitor"), (config_loader, "algorithm_selector"),
                        (config, "int8_calibrator"), (config, "algorithm_selector"), (config, "progress_monitor")]:
        try:
            obj = getattr(owner, attr, None)
        except Exception:  # noqa: BLE001 - a property TensorRT refuses to read on this version
            obj = None
        if obj is not None and not isinstance(obj, (bool, int, str)):
            found.setdefault(id(obj), obj)
    return list(found.values())


def _network_inputs(network: Any) -> dict[str, tuple[Any, tuple[int, ...]]]:
    """``{input: (host dtype, shape)}`` of a network's inputs (parity_trt.dtypes: bf16/fp8/int4/fp4 as ml_dtypes)."""
    from parity_trt.dtypes import DTYPES

    inputs = {}
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        key = str(getattr(tensor.dtype, "name", tensor.dtype)).split(".")[-1]
        if key in DTYPES:
            inputs[tensor.name] = (DTYPES[key], tuple(int(d) for d in tensor.shape))
    return inputs


class LoadRuntime(BaseLoader):
    """A ``trt.Runtime`` loaded from a shared library (``--load-runtime``), for version-compatible engines built
    without their lean runtime (``--exclude-lean-runtime``): ``IRuntime::loadRuntime`` (Polygraphy's LoadRuntime)."""

    def __init__(self, path: str) -> None:
        self.path = str(path)

    def __call__(self) -> Any:
        if not Path(self.path).is_file():
            raise UsageError(f"--load-runtime: no such file '{self.path}'")
        mark = get_logger().logged_errors
        runtime = get_runtime().load_runtime(self.path)
        if runtime is None:
            raise ModelError(f"--load-runtime: TensorRT could not load a runtime from '{self.path}': {failure_reason(mark)}")
        runtime.engine_host_code_allowed = True  # the loaded runtime serves version-compatible engines (Polygraphy sets it)
        return runtime


class EngineFromBytes(BaseLoader):
    """Deserialize an engine from bytes or a loader of bytes.

    ``runtime``: a ``trt.Runtime`` or a loader of one (``LoadRuntime``), default the process's one;
    ``dla_workspace_allocation_strategy``: a ``DLAWorkspaceAllocationStrategy`` name set on it first (TensorRT 11.3+);
    ``host_code_allowed``: let it run a version-compatible engine's embedded lean runtime (always with ``runtime``)."""

    def __init__(self, data: bytes | Callable[[], bytes], label: str = "the engine bytes", runtime: Any = None,
                 dla_workspace_allocation_strategy: str | None = None, host_code_allowed: bool = False) -> None:
        self.data = data
        self.label = label
        self.runtime = runtime
        self.dla_workspace_allocation_strategy = dla_workspace_allocation_strategy
        self.host_code_allowed = host_code_allowed or runtime is not None

    def _runtime(self) -> Any:
        trt = import_trt()
        runtime = get_runtime() if self.runtime is None else invoke_if_callable(self.runtime)[0]
        if self.dla_workspace_allocation_strategy is not None:
            versions.require(trt, "Runtime.dla_workspace_allocation_strategy", "--dla-workspace-allocation-strategy")
            runtime.dla_workspace_allocation_strategy = versions.enum_member(
                trt, "DLAWorkspaceAllocationStrategy", self.dla_workspace_allocation_strategy, "--dla-workspace-allocation-strategy")
        if self.host_code_allowed:
            # version-compatible engines carry their lean runtime as host code (Polygraphy's EngineFromBytes allows it)
            runtime.engine_host_code_allowed = True
        return runtime

    def __call__(self) -> Any:
        data, _ = invoke_if_callable(self.data)
        runtime = self._runtime()
        mark = get_logger().logged_errors
        engine = runtime.deserialize_cuda_engine(bytes(data))
        if engine is None:
            raise ModelError(
                f"TensorRT could not deserialize {self.label}: {failure_reason(mark)} (engines load only with the "
                f"TensorRT version, and unless built version-compatible the GPU, that built them; this is TensorRT "
                f"{import_trt().__version__})"
            )
        warn_errors_since(mark, "deserializing the engine")
        return engine


class EngineFromPath(EngineFromBytes):
    def __init__(self, path: str, runtime: Any = None, dla_workspace_allocation_strategy: str | None = None) -> None:
        super().__init__(BytesFromPath(path, what="engine file"), label=str(path), runtime=runtime,
                         dla_workspace_allocation_strategy=dla_workspace_allocation_strategy)


class EngineFromNetwork(BaseLoader):
    """Build and deserialize an engine (an ``ICudaEngine``); arguments as :class:`EngineBytesFromNetwork`."""

    def __init__(self, network: Any, config: Callable[[Any, Any], Any] | Any | None = None,
                 save_timing_cache: str | None = None, extensions: Sequence[Any] = ()) -> None:
        self.bytes_loader = EngineBytesFromNetwork(network, config, save_timing_cache, extensions)

    def __call__(self) -> Any:
        return EngineFromBytes(self.bytes_loader, "the engine just built")()


def engine_to_bytes(engine: Any) -> bytes:
    """Serialized bytes of an ``ICudaEngine``, ``IHostMemory`` or bytes."""
    if isinstance(engine, (bytes, bytearray, memoryview)):
        return bytes(engine)
    trt = import_trt()
    if isinstance(engine, trt.ICudaEngine):
        return bytes(engine.serialize())
    return bytes(engine)


class SaveEngine(BaseLoader):
    """Save what ``engine`` gives (engine or serialized bytes) to ``path`` atomically, and pass it on."""

    def __init__(self, engine: Any, path: str) -> None:
        self.engine_loader = engine
        self.path = str(path)

    def __call__(self) -> Any:
        engine, _ = invoke_if_callable(self.engine_loader)
        write_bytes_atomic(self.path, engine_to_bytes(engine))
        return engine


# ---- immediately evaluated twins --------------------------------------------------------------------------
def engine_bytes_from_network(network: Any, config: Any = None, save_timing_cache: str | None = None) -> bytes:
    return EngineBytesFromNetwork(network, config, save_timing_cache)()


def engine_from_network(network: Any, config: Any = None, save_timing_cache: str | None = None) -> Any:
    return EngineFromNetwork(network, config, save_timing_cache)()


def engine_from_bytes(data: bytes) -> Any:
    return EngineFromBytes(data)()


def engine_from_path(path: str) -> Any:
    return EngineFromPath(path)()


def save_engine(engine: Any, path: str) -> Any:
    return SaveEngine(engine, path)()
