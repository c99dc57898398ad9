"""The ``parity`` command line.

Built-in commands live in small modules here; plugins add theirs through ``parity_register_commands``.
Nothing heavy is imported while the command tree is built, so ``parity --help`` stays fast: onnx,
onnxruntime and tensorrt are imported by the code that needs them, when it runs.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from parity import __version__, plugins
from parity.cli.common import SETTINGS, install_warning_printer, run_guarded
from parity.cli.parsing import ParityGroup

BUILTIN_GROUPS = {
    "inspect": "Show models, saved data and other files.",
    "debug": "Find what makes a model fail: reduce, precision, repeat, build.",
    "surgeon": "Edit ONNX models: sanitize, extract, insert.",
    "check": "Check models for problems.",
    "data": "Work with saved input and output files.",
}
BUILTIN_COMMANDS = ("parity.cli.run", "parity.cli.convert", "parity.cli.inspect", "parity.cli.plugins_cmd", "parity.debug.cli")


def group(cli: click.Group, name: str) -> click.Group:
    """The built-in sub-group ``name`` of ``cli`` (``inspect``, ``debug``, ...), for plugins to add to."""
    found = cli.commands.get(name)
    if not isinstance(found, click.Group):
        raise KeyError(f"no command group '{name}' (groups: {', '.join(BUILTIN_GROUPS)})")
    return found


def build_cli() -> click.Group:
    """The full command tree: built-ins, then every plugin's commands."""

    @click.group(cls=ParityGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
    @click.version_option(__version__, "--version", prog_name="parity")
    @click.option("--plugin", "plugin_files", multiple=True, metavar="FILE.py", help="Load a one-off plugin module (repeatable; also PARITY_PLUGINS).")
    def cli(plugin_files: tuple[str, ...]) -> None:  # noqa: ARG001 - pre-scanned in main()
        """Parity: run, compare and debug deep-learning models across inference backends.

        Exit codes: 0 passed, 1 accuracy mismatch, 2 usage error, 3 model or backend failure.
        """

    for name, help_text in BUILTIN_GROUPS.items():
        cli.add_command(ParityGroup(name=name, help=help_text, short_help=help_text))
    for module in BUILTIN_COMMANDS:
        importlib.import_module(module).add_to(cli)
    plugins.register_commands(cli)
    return cli


def _prescan(argv: list[str]) -> list[str]:
    """``--plugin`` must load before the command tree is built (a plugin may add commands or options)."""
    files, rest, i = [], [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--plugin" and i + 1 < len(argv):
            files.append(argv[i + 1])
            i += 2
            continue
        if token.startswith("--plugin="):
            files.append(token.split("=", 1)[1])
        elif token in ("-v", "--verbose"):
            SETTINGS["verbose"] = True
            rest.append(token)
        elif token in ("--check",):
            rest.extend(argv[i:])  # the check command's own flags are not ours
            break
        else:
            rest.append(token)
        i += 1
    if files:
        plugins.add_plugin_files(files)
    return rest


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (and exits with it when run as ``parity``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    install_warning_printer()

    def invoke() -> Any:
        rest = _prescan(args)  # first: one-off plugins must be loaded before their options and commands are built
        cli = build_cli()
        return cli.main(args=rest, prog_name="parity", standalone_mode=False)

    code = run_guarded(invoke)
    if argv is None:
        sys.exit(code)
    return code


def __getattr__(name: str) -> Any:
    if name == "cli":  # ``from parity.cli import cli`` for click's CliRunner
        return build_cli()
    raise AttributeError(name)
