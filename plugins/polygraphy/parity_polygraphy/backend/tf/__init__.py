"""``polygraphy.backend.tf``: Polygraphy's TensorFlow 1 loaders. Parity has no TensorFlow backend: the names
exist (scripts that import them load), and calling one raises ``PolygraphyException`` saying so."""

from __future__ import annotations

from typing import Any

from parity_polygraphy.backend._funcify import twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.exception import PolygraphyException


class _Unsupported(BaseLoader):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args, self._kwargs = args, kwargs

    def call_impl(self) -> Any:
        raise PolygraphyException(f"{type(self).__name__}: TensorFlow models are not supported by parity_polygraphy (no TensorFlow backend)")


_NAMES = ["OptimizeGraph", "GraphFromKeras", "GraphFromFrozen", "GraphFromCkpt", "UseTfTrt", "ModifyGraphOutputs", "SaveGraph", "CreateConfig", "SessionFromGraph"]
_TWINS = []
for _name in _NAMES:
    _cls = type(_name, (_Unsupported,), {"__module__": __name__, "__doc__": f"Polygraphy's {_name}: unsupported (no TensorFlow backend)."})
    _func = twin(_cls)
    globals()[_name], globals()[_func.__name__] = _cls, _func
    _TWINS.append(_func.__name__)

__all__ = [*_NAMES, *_TWINS]
