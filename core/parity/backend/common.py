"""Loaders any backend uses (Polygraphy's ``polygraphy.backend.common``; import them from ``parity``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from parity.backend.base import BaseLoader, invoke_if_callable
from parity.errors import UsageError

__all__ = ["BytesFromPath", "bytes_from_path"]


class BytesFromPath(BaseLoader):
    """``BytesFromPath(path)()`` -> the file's bytes (``path``: a path, or a loader returning one). A missing or
    unreadable file is a one-line :class:`parity.errors.UsageError` naming it (as ``what``: "engine file")."""

    def __init__(self, path: Any, what: str = "file") -> None:
        self.path = path
        self.what = what

    def __call__(self) -> bytes:
        path, _ = invoke_if_callable(self.path)
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            raise UsageError(f"no such {self.what}: {path}") from None
        except IsADirectoryError:
            raise UsageError(f"{path}: is a directory, not a {self.what}") from None
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def bytes_from_path(path: Any) -> bytes:
    """The immediately evaluated :class:`BytesFromPath`."""
    return BytesFromPath(path)()
