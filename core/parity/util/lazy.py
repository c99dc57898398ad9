"""Lazy package attributes: ``from plugin import Runner`` works, but nothing heavy loads at import time.

Plugin packages are imported during discovery (their ``hooks`` module lives inside them), so their
``__init__`` must not import numpy, onnx or tensorrt. Each declares ``{name: module}`` and uses this.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, names: Mapping[str, str], unknown: str = "", keep: bool = False) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving ``names[name]`` (an absolute module path) on first access; a path
    ending in ``.<name>`` is that module itself. ``unknown`` is added to the AttributeError of other names;
    ``keep`` stores each resolved value in the package, so it is looked up once."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'{unknown}")
        found = importlib.import_module(module)
        value = found if module.endswith(f".{name}") else getattr(found, name)
        if keep:
            setattr(sys.modules[package], name, value)
        return value

    return __getattr__
