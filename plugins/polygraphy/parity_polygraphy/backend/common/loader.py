"""Bytes from and to files, and loaders defined in user scripts."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from parity.api import BytesFromPath as _ParityBytesFromPath
from parity.api import invoke_if_callable, write_bytes_atomic
from parity_polygraphy.backend._funcify import polygraphy_errors, twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.exception import PolygraphyException


class BytesFromPath(BaseLoader):
    """The bytes of a file (``path``: a path or a loader of one)."""

    def __init__(self, path: Any) -> None:
        self._path = path

    @polygraphy_errors
    def call_impl(self) -> bytes:
        path, _ = invoke_if_callable(self._path)
        return _ParityBytesFromPath(path)()


class SaveBytes(BaseLoader):
    """Writes ``obj`` (bytes or a loader of them) to ``path`` atomically, creating its folder; returns ``obj``."""

    def __init__(self, obj: Any, path: str | os.PathLike[str]) -> None:
        self._obj = obj
        self.path = path

    @polygraphy_errors
    def call_impl(self) -> Any:
        obj, _ = invoke_if_callable(self._obj)
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        write_bytes_atomic(self.path, bytes(obj))
        return obj


class InvokeFromScript(BaseLoader):
    """Imports the Python file ``path`` and calls its symbol ``name`` with the arguments the loader is called with."""

    def __init__(self, path: str | os.PathLike[str], name: str) -> None:
        self.path = os.fspath(path)
        self.name = name

    def call_impl(self, *args: Any, **kwargs: Any) -> Any:
        module_name = f"_parity_polygraphy_script_{abs(hash(os.path.abspath(self.path)))}"
        spec = importlib.util.spec_from_file_location(module_name, self.path)
        if spec is None or spec.loader is None:
            raise PolygraphyException(f"Could not import symbol: {self.name} from: {self.path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        folder = os.path.dirname(os.path.abspath(self.path))
        sys.path.insert(0, folder)  # a script may import its neighbours, as when run directly
        try:
            spec.loader.exec_module(module)
        except FileNotFoundError:
            raise PolygraphyException(f"Could not import symbol: {self.name} from: {self.path}: no such file") from None
        finally:
            sys.path.remove(folder)
        if not hasattr(module, self.name):
            raise PolygraphyException(f"Could not import symbol: {self.name} from: {self.path}")
        return getattr(module, self.name)(*args, **kwargs)


bytes_from_path = twin(BytesFromPath)
save_bytes = twin(SaveBytes)
invoke_from_script = twin(InvokeFromScript)
