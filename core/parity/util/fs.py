"""Atomic file writes: a crash or Ctrl-C never leaves a half-written file where the user expects one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it into place only on success."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_write(path, "wb") as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    with atomic_write(path, "w") as handle:
        handle.write(text)


def check_model_path(path: str | os.PathLike[str]) -> Path:
    """The model file the user named, or a one-line ModelError (exit 3) saying why it cannot be read."""
    from parity.errors import ModelError

    p = Path(path)
    if not p.exists():
        raise ModelError(f"model not found: {p}")
    if p.is_dir():
        raise ModelError(f"model path is a directory: {p}")
    return p


def refuse_overwrite(source: str | os.PathLike[str], *outputs: str | os.PathLike[str] | None) -> None:
    """Nothing the user passed in is modified: an output path that is the input model is a usage error."""
    from parity.errors import UsageError

    src = Path(source).resolve()
    for out in outputs:
        if out and Path(out).resolve() == src:
            raise UsageError(f"refusing to overwrite the input model ({out}); choose another output path")
