"""Polygraphy's module helpers (``polygraphy.mod``): internal to Polygraphy and not part of the import rule,
mirrored for what scripts and tests use: ``version`` to compare version strings and ``lazy_import``. Parity never
installs packages while it runs (Polygraphy's AUTOINSTALL_DEPS is ignored)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version

__all__ = ["export", "has_mod", "lazy_import", "version"]

T = TypeVar("T")


def version(num: str) -> Version:
    """A comparable version: ``mod.version(trt.__version__) < mod.version("8.7")``. Suffixes that are not
    PEP 440 (``10.0.0b6+cuda12``) are cut at the first character that does not fit."""
    try:
        return Version(num)
    except InvalidVersion:
        return Version(re.match(r"[0-9]+(\.[0-9]+)*", num).group(0) if re.match(r"[0-9]", num) else "0")


def has_mod(name: str) -> bool:
    """Whether module ``name`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class LazyModule(ModuleType):
    """A module imported on first attribute access; ``is_installed()`` / ``is_importable()`` ask without failing."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._name = re.split(r"[<>=!~\[]", name)[0]  # "torch>=1.13.0" names torch

    def _load(self) -> ModuleType:
        return importlib.import_module(self._name)

    def is_installed(self) -> bool:
        return has_mod(self._name)

    def is_importable(self) -> bool:
        try:
            self._load()
        except Exception:
            return False
        return True

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._load(), attr)


def lazy_import(name: str, log: bool = True, pkg_name: str | None = None, install_flags: Any = None, requires: Any = None) -> Any:
    """``name`` (a module, optionally with a version requirement), imported when first used."""
    return LazyModule(name)


def export(funcify: bool = False, func_name: str | None = None) -> Callable[[T], T]:
    """Polygraphy's export decorator: here it changes nothing (each module lists its names in ``__all__``)."""
    return lambda obj: obj
