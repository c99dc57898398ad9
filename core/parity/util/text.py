"""Small text helpers shared by error messages."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidates, or an empty string."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"'{c}'" for c in close) + "?)"


def warn(message: str) -> None:
    """The one warning line every part of Parity prints, on stderr."""
    print(f"parity: warning: {message}", file=sys.stderr, flush=True)


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """An exception's message cut to its first line (its type name if it has none), for one-line errors."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:limit] if limit else line
