"""The helpers of ``polygraphy.util`` that scripts use; files are written atomically (Parity's rule)."""

from __future__ import annotations

import contextlib
import ctypes.util
import math
import os
import tempfile
import weakref
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import IO, Any

from parity.api import write_bytes_atomic, write_text_atomic
from parity_polygraphy.logger import G_LOGGER

__all__ = ["NamedTemporaryFile", "default", "find_library", "invert_dict", "invoke_if_callable", "is_empty_shape", "is_file_like", "is_sequence",
           "load_file", "save_file", "unique_list", "volume"]


def default(value: Any, fallback: Any) -> Any:
    """``value``, or ``fallback`` where it is None."""
    return fallback if value is None else value


def invert_dict(dct: Mapping[Any, Hashable]) -> dict[Hashable, Any]:
    """Values become keys and keys values."""
    return {value: key for key, value in dct.items()}


def unique_list(sequence: Iterable[Any]) -> list[Any]:
    """The elements in order, each once."""
    return list(dict.fromkeys(sequence))


def is_sequence(obj: Any) -> bool:
    return hasattr(obj, "__iter__") and not isinstance(obj, (dict, str, bytes))


def volume(obj: Iterable[int]) -> int:
    """The number of elements of a shape."""
    return math.prod(obj)


def is_empty_shape(shape: Sequence[int]) -> bool:
    return volume(shape) == 0


def find_library(name: str) -> str | None:
    """The file name of a shared library, as the system's loader finds it (``ctypes.util.find_library``)."""
    return ctypes.util.find_library(name)


class NamedTemporaryFile:
    """A temporary file that can be opened again by name while open (``with`` gives the open file). The file is
    deleted when this object is dropped or the interpreter exits (Polygraphy's stays in the temporary folder; a
    run of its tests left some 1,700 files there)."""

    def __init__(self, mode: str | None = None, prefix: str | None = None, suffix: str | None = None) -> None:
        self.mode = default(mode, "wb+")
        fd, self.name = tempfile.mkstemp(prefix=default(prefix, ""), suffix=default(suffix, ""))
        os.close(fd)
        self._fhandle: IO[Any] | None = None
        self._remove = weakref.finalize(self, _remove_quietly, self.name)

    def __enter__(self) -> IO[Any]:
        self._fhandle = open(self.name, self.mode)  # noqa: SIM115 (closed in __exit__)
        return self._fhandle

    def __exit__(self, *exc: object) -> None:
        assert self._fhandle is not None
        self._fhandle.flush()
        self._fhandle.close()


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def invoke_if_callable(func: Any, *args: Any, **kwargs: Any) -> tuple[Any, bool]:
    """``(func(*args, **kwargs), True)`` for a callable, ``(func, False)`` for a ready value."""
    if callable(func):
        return func(*args, **kwargs), True
    return func, False


def is_file_like(obj: Any) -> bool:
    return hasattr(obj, "read") or hasattr(obj, "write")


def load_file(src: str | os.PathLike[str] | IO[Any], mode: str = "rb", description: str | None = None) -> Any:
    """The contents of a path or an open file (read from its start)."""
    if description is not None:
        G_LOGGER.info(f"Loading {description} from {getattr(src, 'name', src)}")
    if is_file_like(src):
        src.seek(0)  # type: ignore[union-attr]
        return src.read()  # type: ignore[union-attr]
    with open(src, mode) as f:
        return f.read()


def save_file(contents: str | bytes | Any, dest: str | os.PathLike[str] | IO[Any], mode: str = "wb", description: str | None = None) -> Any:
    """Write ``contents`` to an open file, or to a path atomically (folders made as needed); returns ``dest``."""
    if description is not None:
        G_LOGGER.info(f"Saving {description} to {getattr(dest, 'name', dest)}")
    if is_file_like(dest):
        dest.write(contents)  # type: ignore[union-attr]
        dest.flush()  # type: ignore[union-attr]
        return dest
    folder = os.path.dirname(os.fspath(dest))
    if folder:
        os.makedirs(folder, exist_ok=True)
    if isinstance(contents, str):
        write_text_atomic(dest, contents)
    else:
        write_bytes_atomic(dest, bytes(contents))
    return dest


