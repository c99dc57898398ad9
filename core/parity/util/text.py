"""Small text helpers shared by error messages."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from parity.console import SETTINGS


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidates, or an empty string."""
    import difflib  # 1.8 ms at start-up: only an error message needs it, and every command imports this module

    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"'{c}'" for c in close) + "?)"


def warn(message: str) -> None:
    """The one warning line every part of Parity prints, on stderr (not while ``G_LOGGER`` is set above WARNING)."""
    if SETTINGS.get("warnings", True):
        print(f"parity: warning: {message}", file=sys.stderr, flush=True)


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """An exception's message cut to its first line (its type name if it has none), for one-line errors."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:limit] if limit else line


def one_line(text: str, limit: int | None = 300) -> str:
    """``text`` with its whitespace (newlines included) collapsed to single spaces, cut to ``limit`` characters
    with an ellipsis: for a backend's message that wraps a sentence over several lines."""
    flat = " ".join(str(text).split())
    if limit and len(flat) > limit:
        return flat[: max(limit - 3, 1)].rstrip() + "..."
    return flat


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 node``, ``2 nodes``: a count and its noun in the right number."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def names_preview(names: Iterable[object], limit: int = 5) -> str:
    """The first ``limit`` names and how many there are in all: ``a, b, c, d, e, ... (1234 in all)``.
    Every message that lists tensors, inputs or outputs goes through this, so none becomes a wall of names."""
    items = list(dict.fromkeys(str(n) for n in names))
    if not items:
        return "none"
    shown = ", ".join(items[:limit])
    return shown if len(items) <= limit else f"{shown}, ... ({len(items)} in all)"


def unique_labels(names: Iterable[str], taken: Iterable[str] = ()) -> list[str]:
    """``names`` with repeats (and names in ``taken``) made distinct by a ``~N`` suffix, so the two sides of a
    comparison never carry the same label: ``['onnxrt', 'onnxrt']`` -> ``['onnxrt', 'onnxrt~1']``."""
    used = set(taken)
    out = []
    for name in names:
        label, n = name, 1
        while label in used:
            label = f"{name}~{n}"
            n += 1
        used.add(label)
        out.append(label)
    return out
