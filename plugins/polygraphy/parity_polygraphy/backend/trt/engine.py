"""Polygraphy's TensorRT engine loaders (``EngineBytesFromNetwork``, ``EngineFromNetwork``, ``EngineFromBytes``,
``SaveEngine``) and
their immediately evaluated twins, built on parity_trt's (``parity_trt.api``): its errors come as
``PolygraphyException``; anything else a network loader raises (a crashed subprocess, say) passes through."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

from parity_trt import api as trt_api

from parity_polygraphy.backend._funcify import polygraphy_errors, twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.util.util import invoke_if_callable, is_file_like, save_file


class EngineBytesFromNetwork(BaseLoader):
    """Builds a serialized engine (bytes).

    ``network``: ``(builder, network[, parser])`` or a loader returning it (``NetworkFromOnnxBytes``,
    ``CreateNetwork``, a function ``func.extend`` wraps). ``config``: a callable ``(builder, network) -> IBuilderConfig``
    or a ready ``IBuilderConfig``; ``None`` is parity_trt's default config (TensorRT's defaults;
    a dynamic input gets 1 in its dynamic dims for min/opt/max, with a warning, as in Polygraphy). ``save_timing_cache``: a path
    or an open binary file to write the build's timing cache to (merged with the cache already there)."""

    def __init__(self, network: Any, config: Callable[[Any, Any], Any] | Any | None = None, save_timing_cache: str | IO[bytes] | None = None) -> None:
        self._network = network
        self._config = config
        self.timing_cache_path = save_timing_cache

    @polygraphy_errors
    def call_impl(self) -> bytes:
        with _timing_cache_path(self.timing_cache_path) as path:
            return trt_api.EngineBytesFromNetwork(self._network, self._config, path)()


class EngineFromNetwork(EngineBytesFromNetwork):
    """Builds and deserializes an engine (a ``trt.ICudaEngine``); arguments as :class:`EngineBytesFromNetwork`, and
    ``runtime``: the ``trt.Runtime`` that deserializes it (default: parity_trt's process-wide one)."""

    def __init__(
        self, network: Any, config: Callable[[Any, Any], Any] | Any | None = None, save_timing_cache: str | IO[bytes] | None = None, runtime: Any = None
    ) -> None:
        super().__init__(network, config, save_timing_cache)
        self._runtime = runtime

    @polygraphy_errors
    def call_impl(self) -> Any:
        if self._runtime is None:
            with _timing_cache_path(self.timing_cache_path) as path:
                return trt_api.EngineFromNetwork(self._network, self._config, path)()
        runtime, _ = invoke_if_callable(self._runtime)
        engine = runtime.deserialize_cuda_engine(super().call_impl())
        if engine is None:
            raise PolygraphyException("Could not deserialize the engine with the given runtime. See logging output above for details.")
        return engine


@contextlib.contextmanager
def _timing_cache_path(cache: str | IO[bytes] | None) -> Iterator[str | None]:
    """A path parity_trt can merge the timing cache into: the path itself, or for an open file a temporary copy of
    its contents that is written back to it (from its start) after the build."""
    if cache is None or not is_file_like(cache):
        yield cache
        return
    with tempfile.TemporaryDirectory(prefix="parity-timing-cache-") as folder:
        path = os.path.join(folder, "timing.cache")
        cache.seek(0)
        existing = cache.read()
        if existing:
            with open(path, "wb") as f:
                f.write(existing)
        yield path
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            cache.seek(0)
            cache.truncate()
            cache.write(data)
            cache.flush()


class EngineFromBytes(BaseLoader):
    """Deserializes an engine from bytes (or a loader of them), with the process's one ``trt.Runtime``."""

    def __init__(self, serialized_engine: bytes | Callable[[], bytes]) -> None:
        self._serialized_engine = serialized_engine

    @polygraphy_errors
    def call_impl(self) -> Any:
        return trt_api.EngineFromBytes(self._serialized_engine)()


class SaveEngine(BaseLoader):
    """Writes an engine (a ``trt.ICudaEngine``, or a loader of one) to ``path`` atomically and returns the engine."""

    def __init__(self, engine: Any, path: str) -> None:
        self._engine = engine
        self.path = path

    def call_impl(self) -> Any:
        engine = self._engine() if callable(self._engine) else self._engine
        save_file(bytes(engine.serialize()), self.path, description="engine")
        return engine


engine_bytes_from_network = twin(EngineBytesFromNetwork)
engine_from_network = twin(EngineFromNetwork)
engine_from_bytes = twin(EngineFromBytes)
save_engine = twin(SaveEngine)
