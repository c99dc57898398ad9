"""Parity's first-party distributions: which one provides an option or command an install lacks.

The catalogue is data (``distributions.json``, shipped in the package), not code, so the core still names no plugin;
``tests/test_distributions.py`` checks it against what each plugin actually adds. Read only on the error path.
"""

from __future__ import annotations

import json
from importlib import metadata
from importlib.resources import files
from typing import NamedTuple


class Member(NamedTuple):
    distribution: str
    extra: str
    options: tuple[str, ...]
    commands: tuple[str, ...]
    executors: tuple[str, ...] = ()

    @property
    def installed(self) -> bool:
        try:
            metadata.distribution(self.distribution)
        except metadata.PackageNotFoundError:
            return False
        return True

    def remedy(self) -> str:
        """What to do: install it, or (installed, not loaded) look at why."""
        if self.installed:
            return f"{self.distribution} is installed but not loaded: 'parity plugins' says why"
        return f'pip install "parity[{self.extra}]"'


def members() -> list[Member]:
    data = json.loads(files("parity").joinpath("distributions.json").read_text())
    return [Member(name, d["extra"], tuple(d["options"]), tuple(d["commands"]), tuple(d.get("executors", ()))) for name, d in data["distributions"].items()]


def provider(option: str | None = None, command: str | None = None, executor: str | None = None) -> Member | None:
    """The member that adds ``option`` (``--trt``), ``command`` (``debug reduce``, or a group: ``surgeon``) or
    ``executor`` (``--executor ray``)."""
    for member in members():
        if executor is not None and executor in member.executors:
            return member
        if option is not None and option in member.options:
            return member
        if command is not None and any(command == c or c.startswith(command + " ") for c in member.commands):
            return member
    return None


def missing() -> list[Member]:
    """Members not installed."""
    return [m for m in members() if not m.installed]
