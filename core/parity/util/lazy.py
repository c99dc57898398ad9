"""Lazy package attributes: ``from plugin import Runner`` works, but nothing heavy loads at import time.

Plugin packages are imported during discovery (their ``hooks`` module lives inside them), so their
``__init__`` must not import numpy, onnx or tensorrt. Each declares ``{name: module}`` and uses this.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving ``names[name]`` (an absolute module path) on first access."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module '{package}' has no attribute '{name}'")

    return __getattr__
