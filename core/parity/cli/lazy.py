"""Command groups that list their commands without importing them (click's "lazily loading subcommands").

A :class:`LazyGroup` holds, next to click's ``commands``, a table of commands it knows only by name, one-line
help and a ``"module:attr"`` target (from the core's table and the plugins' ``parity_describe_commands``).
``parity --help`` and ``parity debug --help`` print that table; the target's module is imported only when
the command runs, shows its own ``--help``, or is asked for by name (shell completion, tests).
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from parity.cli.parsing import ParityGroup


class LazyCommand:
    """A command known by name until it is needed: ``target`` is ``"module:attr"``, where ``attr`` is a
    :class:`click.Command` or a function without arguments that returns one. (A plain class: every dataclass
    costs ~0.7 ms of start-up.)"""

    __slots__ = ("path", "target", "help", "owner", "hidden")

    def __init__(self, path: str, target: str, help: str, owner: str = "parity", hidden: bool = False) -> None:
        self.path = path  # "run", "debug reduce"
        self.target = target
        self.help = help
        self.owner = owner
        self.hidden = hidden

    def __repr__(self) -> str:
        return f"LazyCommand({self.path!r}, {self.target!r}, owner={self.owner!r})"

    @property
    def name(self) -> str:
        return self.path.split()[-1]

    def load(self) -> click.Command:
        module_name, _, attr = self.target.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        command = obj if isinstance(obj, click.Command) else obj()  # a click.Command is callable too: test it first
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} (command 'parity {self.path}' of {self.owner}) is not a click command")
        if command.name != self.name:
            raise TypeError(f"{self.target} is command '{command.name}', but {self.owner} described it as 'parity {self.path}'")
        return command


class LazyGroup(ParityGroup):
    """A :class:`ParityGroup` whose ``lazy`` commands are imported on first use; ``path`` is its place in the
    tree (``""`` for the root, ``"debug"``). ``on_load(path, command)`` runs once for every command handed out
    (plugin options join it there)."""

    group_class = type  # sub-groups made with @group.group() are LazyGroups too

    def __init__(self, *args: Any, path: str = "", on_load: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.path = path
        self.lazy: dict[str, LazyCommand] = {}
        self.on_load = on_load
        self._handed_out: set[str] = set()

    def add_lazy(self, spec: LazyCommand) -> None:
        self.lazy[spec.name] = spec

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(cmd, name)
        self.lazy.pop(name or cmd.name or "", None)  # an eager command replaces a described one, as click replaces

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            spec = self.lazy.get(cmd_name)
            if spec is None:
                return None
            self.commands[cmd_name] = spec.load()
            del self.lazy[cmd_name]
        command = self.commands[cmd_name]
        if cmd_name not in self._handed_out:
            self._handed_out.add(cmd_name)
            if self.on_load is not None and not isinstance(command, LazyGroup):
                self.on_load(f"{self.path} {cmd_name}".strip(), command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, from the described help of commands not imported yet (so it imports none)."""
        rows: list[tuple[str, Any]] = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                if not self.commands[name].hidden:
                    rows.append((name, self.commands[name]))
            elif not self.lazy[name].hidden:
                rows.append((name, self.lazy[name]))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        lines = [(name, short_help(item, limit)) for name, item in rows]
        with formatter.section("Commands"):
            formatter.write_dl(lines)


def short_help(item: click.Command | LazyCommand, limit: int) -> str:
    if isinstance(item, LazyCommand):
        return click.Command(item.name, short_help=item.help).get_short_help_str(limit)
    return item.get_short_help_str(limit)
