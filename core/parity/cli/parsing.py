"""Argument shapes that click lacks, added by normalising argv before click parses it.

* Greedy options (``--input-shapes a:[1] b:[2]``, ``--atol y:1e-3 1e-5``, ``--show layers attrs``) take
  values until the next option, as Polygraphy users type them; they become ``--opt=v`` repeats.
* Remainder options (``--check parity run ... --onnxrt``) take the rest of the line.
* Backend flags (``--onnxrt --trt``) keep their order, may repeat, and may carry per-runner settings:
  ``--onnxrt=graph-optimization-level=disable`` applies only to that runner.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import click

_NUMBER = re.compile(r"^-\d|^-\.\d|^-inf$|^-\[")
_INTEGER = re.compile(r"^[+-]?\d+$")


class GreedyOption(click.Option):
    """``multiple=True`` option whose values may be written space-separated after one flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("multiple", True)
        super().__init__(*args, **kwargs)
        self.greedy = True


class RemainderOption(click.Option):
    """Takes every remaining token as a command line (a JSON-encoded list internally)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("metavar", "CMD...")
        super().__init__(*args, **kwargs)
        self.remainder = True

    def type_cast_value(self, ctx: click.Context, value: Any) -> Any:
        if value is None:
            return None
        import json  # 2.5 ms at start-up: every command imports this module, few use remainder options

        return json.loads(value) if isinstance(value, str) else value


class BackendFlag(click.Option):
    """A runner-selecting flag: counted by click, ordered (with per-runner settings) by :func:`normalize`."""

    def __init__(self, flag: str, backend: str, help: str) -> None:
        super().__init__([flag], count=True, help=help, expose_value=False)
        self.backend = backend


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NUMBER.match(token)


def normalize(command: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
    greedy, numeric, remainder, backends = set(), set(), set(), {}
    for param in command.params:
        if isinstance(param, click.Option):
            if getattr(param, "greedy", False):
                greedy.update(param.opts)
                if isinstance(param.type, click.types.IntParamType):  # --fail-code 1 model.onnx: the model is no code
                    numeric.update(param.opts)
            if getattr(param, "remainder", False):
                remainder.update(param.opts)
            if isinstance(param, BackendFlag):
                backends[param.opts[0]] = param.backend
    runners: list[tuple[str, dict[str, str]]] = []
    out: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        key, eq, inline = token.partition("=")
        if token == "--":
            out.extend(args[i:])
            break
        if key in remainder:
            import json  # (2.5 ms, see type_cast_value)

            rest = ([inline] if eq else []) + args[i + 1 :]
            out.append(f"{key}={json.dumps(rest)}")
            break
        if key in backends:
            runners.append((backends[key], _settings(key, inline) if eq else {}))
            out.append(key)
            i += 1
            continue
        if key in greedy and not eq:
            j = i + 1
            while j < len(args) and not _is_option(args[j]) and not (key in numeric and j > i + 1 and not _INTEGER.match(args[j])):
                out.append(f"{key}={args[j]}")
                j += 1
            if j == i + 1:
                out.append(token)  # let click report the missing value
            i = j
            continue
        out.append(token)
        i += 1
    ctx.meta["parity.runners"] = runners
    return out


def _settings(flag: str, text: str) -> dict[str, str | list[str]]:
    """``opt=v,other=w`` -> ``{"opt": "v", "other": "w"}``; a repeated option collects its values in a list
    (``custom-ops=a.so,custom-ops=b.so``), which only a repeatable option accepts (:func:`cast_runner_settings`)."""
    settings: dict[str, str | list[str]] = {}
    for part in filter(None, text.split(",")):
        name, eq, value = part.partition("=")
        if not eq:
            raise click.UsageError(f"{flag}={text}: write per-runner settings as option=value[,option=value]")
        key = name.strip().lstrip("-").replace("-", "_")
        if key in settings:
            before = settings[key]
            settings[key] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            settings[key] = value
    return settings


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` (``$COLUMNS``, else the terminal's width, else 80) without
    importing shutil, which click's help formatter does to ask it: with zlib, bz2 and lzma, ~2 ms of every
    ``--help``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return columns


class HelpFormatter(click.HelpFormatter):
    """click's formatter, with the width it would choose (:func:`terminal_columns`, at most ``max_width``, less 2,
    at least 50) computed here; an explicit width, and click's ``FORCED_WIDTH`` (its test runner), still win."""

    def __init__(self, indent_increment: int = 2, width: int | None = None, max_width: int | None = None) -> None:
        if width is None and click.formatting.FORCED_WIDTH is None:
            width = max(min(terminal_columns(), 80 if max_width is None else max_width) - 2, 50)
        super().__init__(indent_increment, width, max_width)


class ParityContext(click.Context):
    formatter_class = HelpFormatter


class ParityCommand(click.Command):
    context_class = ParityContext

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, normalize(self, ctx, args))

    def invoke(self, ctx: click.Context) -> Any:
        """Exit codes are part of the contract: a returned code (1 = mismatch) or a ParityError (one line) ends
        the command with that code, also when the tree is embedded (click's CliRunner, standalone mode)."""
        from parity.cli.common import run_guarded
        from parity.cli.owners import refuse_unused  # here: the option rule needs the registry, which `parity --help` never loads

        def call() -> Any:
            refuse_unused(ctx)
            return super(ParityCommand, self).invoke(ctx)

        code = run_guarded(call)
        if code:
            ctx.exit(code)
        return code


# the loudness flags every command takes (``-vv`` and ``-qq`` are click's repeated short flags)
_LOUDNESS = re.compile(r"^-(v+|q+)$|^--(verbose|quiet|silent)$|^--verbosity=")


def move_loudness(args: list[str]) -> list[str]:
    """Polygraphy takes ``-v``/``-q`` between a tool and its subtool (``polygraphy surgeon -v sanitize``, as its
    own tests call it): such flags written before the subcommand's name move to just after it, where every
    command takes them. Anything else before the name is left for click to judge."""
    moved: list[str] = []
    i = 0
    while i < len(args):
        if _LOUDNESS.match(args[i]):
            moved.append(args[i])
            i += 1
        elif args[i] == "--verbosity" and i + 1 < len(args):
            moved += args[i : i + 2]
            i += 2
        else:
            break
    if not moved or i == len(args) or args[i].startswith("-"):
        return args
    return [args[i], *moved, *args[i + 1 :]]


class ParityGroup(click.Group):
    context_class = ParityContext
    command_class = ParityCommand
    group_class = type  # sub-groups are ParityGroup too

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, move_loudness(args))
