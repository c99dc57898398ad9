"""Polygraphy's TensorRT engine loaders (``EngineBytesFromNetwork``, ``EngineFromNetwork``, ``EngineFromBytes``,
``SaveEngine``) and
their immediately evaluated twins, built on parity_trt's (``parity_trt.api``): its errors come as
``PolygraphyException``; anything else a network loader raises (a crashed subprocess, say) passes through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parity_trt import api as trt_api

from parity_polygraphy.backend._funcify import polygraphy_errors, twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.util.util import save_file


class EngineBytesFromNetwork(BaseLoader):
    """Builds a serialized engine (bytes).

    ``network``: ``(builder, network[, parser])`` or a loader returning it (``NetworkFromOnnxBytes``,
    ``CreateNetwork``, a function ``func.extend`` wraps). ``config``: a callable ``(builder, network) -> IBuilderConfig``
    or a ready ``IBuilderConfig``; ``None`` is parity_trt's default config (TensorRT's defaults;
    a dynamic input gets 1 in its dynamic dims for min/opt/max, with a warning, as in Polygraphy). ``save_timing_cache``: a path to write
    the build's timing cache to."""

    def __init__(self, network: Any, config: Callable[[Any, Any], Any] | Any | None = None, save_timing_cache: str | None = None) -> None:
        self._network = network
        self._config = config
        self.timing_cache_path = save_timing_cache

    @polygraphy_errors
    def call_impl(self) -> bytes:
        return trt_api.EngineBytesFromNetwork(self._network, self._config, self.timing_cache_path)()


class EngineFromNetwork(EngineBytesFromNetwork):
    """Builds and deserializes an engine (a ``trt.ICudaEngine``); arguments as :class:`EngineBytesFromNetwork`."""

    @polygraphy_errors
    def call_impl(self) -> Any:
        return trt_api.EngineFromNetwork(self._network, self._config, self.timing_cache_path)()


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
