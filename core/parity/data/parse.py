"""Parsing of the ``name:value`` arguments that many options share.

Shapes are written ``name:[1,3,224,224]`` and nothing else: the old ``name:1x3x224x224`` and
``a:1x3,b:1x3`` forms are rejected with the right spelling instead of being half-parsed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from parity.errors import UsageError
from parity.util.text import warn

_SHAPE = re.compile(r"^(?P<name>.+):\[(?P<dims>[^\[\]]*)\]$")
# Polygraphy's old spellings, which it still accepts with a deprecation warning: x:1x3x224x224 and x,1x3x224x224
_LEGACY_SHAPE = re.compile(r"^(?P<name>[^\[\]]+?)[:,](?P<dims>\d+(?:x\d+)*)$")


def parse_shape(text: str, option: str = "--input-shapes") -> tuple[str, tuple[int | str, ...]]:
    """``'x:[1,3,224,224]'`` -> ``('x', (1, 3, 224, 224))``. Named dims (``batch``) are kept as strings. The old
    ``x:1x3x224x224`` (or ``x,1x3x224x224``) is read too, with a deprecation warning, as Polygraphy reads it."""
    legacy = _LEGACY_SHAPE.match(text.strip())
    if legacy:
        dims = tuple(int(d) for d in legacy["dims"].split("x"))
        warn(f"{option}: '{text}' is the deprecated shape syntax; write {legacy['name']}:[{','.join(map(str, dims))}]")
        return legacy["name"], dims
    match = _SHAPE.match(text.strip())
    if not match:
        raise UsageError(f"{option}: cannot read '{text}'; write shapes as name:[d0,d1,...], e.g. {_suggest(text)}")
    dims: list[int | str] = []
    raw = match["dims"].strip()
    for part in raw.split(",") if raw else []:
        part = part.strip()
        if re.fullmatch(r"\d+", part):
            dims.append(int(part))
        elif re.fullmatch(r"[A-Za-z_][\w]*", part):
            dims.append(part)
        else:
            raise UsageError(f"{option}: bad dimension '{part}' in '{text}'; dims are non-negative integers")
    return match["name"], tuple(dims)


_GUESS = re.compile(r"([A-Za-z_][\w./-]*)\s*[:,]\s*[\[(]?\s*(\d+(?:\s*[x,]\s*\d+)*)")


def _suggest(text: str) -> str:
    """Best guess at what an old-style (``x:1x3x224x224``, ``x,1x3``) or mangled shape string meant."""
    guesses = [name + ":[" + ",".join(re.findall(r"\d+", dims)) + "]" for name, dims in _GUESS.findall(text)]
    return " ".join(guesses) or "input:[1,3,224,224]"


def parse_shapes(values: Iterable[str], option: str = "--input-shapes") -> dict[str, tuple[int | str, ...]]:
    shapes: dict[str, tuple[int | str, ...]] = {}
    for value in values:
        name, dims = parse_shape(value, option)
        shapes[name] = dims
    return shapes


def parse_per_name(values: Iterable[str], cast, option: str) -> dict[str, object]:
    """``['y:1e-3', '1e-5']`` -> ``{'y': 0.001, '': 1e-05}``; the empty key is the default."""
    result: dict[str, object] = {}
    for value in values:
        name, sep, raw = value.rpartition(":")
        if not sep:
            name, raw = "", value
        try:
            result[name] = cast(raw)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{option}: cannot read '{value}' ({exc}); write [name:]value") from None
    return result


def parse_range(text: str) -> tuple[float, float]:
    match = re.fullmatch(r"\s*\[\s*([^,\]]+)\s*,\s*([^,\]]+)\s*\]\s*", text)
    if not match:
        raise ValueError("expected [lo,hi]")
    lo, hi = float(match[1]), float(match[2])
    if lo > hi:
        raise ValueError(f"lo {lo} > hi {hi}")
    return lo, hi


def parse_val_ranges(values: Iterable[str]) -> dict[str, tuple[float, float]]:
    """``--val-range [0,1] x:[-1,1]``: the default range and per-input ranges."""
    out: dict[str, tuple[float, float]] = {}
    for value in values:
        name, sep, rng = value.partition(":") if not value.lstrip().startswith("[") else ("", "", value)
        if not sep:
            rng = value
        try:
            out[name] = parse_range(rng)
        except ValueError as exc:
            raise UsageError(f"--val-range: cannot read '{value}' ({exc}); write [name:][lo,hi], e.g. x:[-1,1]") from None
    return out
