"""Sizes as users write them on the command line."""

from __future__ import annotations

import re

from parity.errors import UsageError

_SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
SIZE_ERROR = "{option}: cannot read size '{text}'; write e.g. 16M, 1G or 1048576"


def parse_size(text: str | int, option: str, message: str = SIZE_ERROR) -> int:
    """``'16M'``, ``'2G'``, ``'1.5GiB'``, ``'512MB'``, ``'100000'`` -> bytes (binary units K/M/G/T, then an
    optional ``B`` or ``iB``; case does not matter); an ``int`` is already bytes. Anything else is a
    :class:`parity.errors.UsageError` with ``message`` (``{option}`` and ``{text}`` filled in), so each
    option keeps its own wording."""
    if isinstance(text, int):
        return text
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*", str(text), re.IGNORECASE)
    if not found:
        raise UsageError(message.format(option=option, text=text))
    return int(float(found.group(1)) * _SCALE[found.group(2).lower()])
