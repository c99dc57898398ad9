"""Each Polygraphy loader has an immediately-evaluated twin: ``onnx_from_path(p)`` is ``OnnxFromPath(p)()``."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

from parity.api import ParityError
from parity_polygraphy.exception import PolygraphyException


def twin(loader: type, call_params: tuple[str, ...] = ()) -> Callable[..., Any]:
    """The function that builds ``loader`` and calls it at once; ``call_params`` are the keyword arguments that
    go to the call rather than the constructor (extra positional arguments go there too)."""

    @functools.wraps(loader.__init__)
    def immediately(*args: Any, **kwargs: Any) -> Any:
        call_kwargs = {k: kwargs.pop(k) for k in call_params if k in kwargs}
        code = loader.__init__.__code__
        n_init = len(args) if code.co_flags & inspect.CO_VARARGS else code.co_argcount - 1
        return loader(*args[:n_init], **kwargs)(*args[n_init:], **call_kwargs)

    immediately.__name__ = immediately.__qualname__ = re.sub(r"(?<!^)(?=[A-Z])", "_", loader.__name__).lower()
    immediately.__module__ = loader.__module__
    immediately.__doc__ = f"Immediately evaluated twin of :class:`{loader.__name__}`: builds it and calls it."
    return immediately


def polygraphy_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Parity's one-line errors, raised as Polygraphy's ``PolygraphyException`` (same message)."""

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ParityError as exc:
            raise PolygraphyException(str(exc)) from exc

    return wrapped
