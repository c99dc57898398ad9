"""``SessionFromOnnx``: an ONNX Runtime session, with Polygraphy's provider matching."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parity_onnxrt.api import SessionFromOnnx as _ParitySession

from parity.api import invoke_if_callable
from parity_polygraphy.backend._funcify import polygraphy_errors, twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.exception import PolygraphyException

_LEVELS = {"ORT_DISABLE_ALL": "disable", "ORT_ENABLE_BASIC": "basic", "ORT_ENABLE_EXTENDED": "extended", "ORT_ENABLE_LAYOUT": "layout", "ORT_ENABLE_ALL": "all"}


def _resolve_providers(requested: Sequence[Any]) -> list[Any]:
    """Each provider (a name, or a ``(name, options)`` pair) matched case-insensitively against a part of the
    available providers' names (``"cpu"`` -> ``"CPUExecutionProvider"``)."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    out = []
    for item in requested:
        name, options = (item[0], item[1]) if isinstance(item, (tuple, list)) else (item, None)
        hits = [p for p in available if name.lower() in p.lower()]
        if not hits:
            raise PolygraphyException(f"Could not find specified ONNX-Runtime execution provider: {name!r}.\nNote: Available providers are: {available}")
        out.append((hits[0], dict(options)) if options is not None else hits[0])
    return out


class SessionFromOnnx(BaseLoader):
    """Builds an ``onnxruntime.InferenceSession`` from a serialized model, a path, a ModelProto or a loader of one.

    ``providers`` (default CPU): names matched as parts of the available providers' names, or
    ``(name, options)`` pairs. ``graph_optimization_level``: an ``onnxruntime.GraphOptimizationLevel``."""

    def __init__(self, model_bytes: Any, providers: Sequence[Any] | None = None, graph_optimization_level: Any = None) -> None:
        self._model_bytes = model_bytes
        self.providers = list(providers) if providers else ["cpu"]
        self.graph_optimization_level = graph_optimization_level

    @polygraphy_errors
    def call_impl(self) -> Any:
        providers = _resolve_providers(self.providers)
        level = self.graph_optimization_level
        if level is not None and not isinstance(level, str):
            level = _LEVELS[getattr(level, "name", str(level)).split(".")[-1]]
        if all(isinstance(p, str) for p in providers):  # Parity's loader: one-line errors, external data handled
            return _ParitySession(self._model_bytes, providers=providers, graph_optimization_level=level)()
        import onnxruntime as ort

        model, _ = invoke_if_callable(self._model_bytes)
        if hasattr(model, "SerializeToString"):
            model = model.SerializeToString()
        options = ort.SessionOptions()
        if level is not None:
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, {v: k for k, v in _LEVELS.items()}[level])
        return ort.InferenceSession(model, sess_options=options, providers=providers)


session_from_onnx = twin(SessionFromOnnx)
