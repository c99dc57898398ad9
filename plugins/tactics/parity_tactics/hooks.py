"""Parity hooks of the tactics plugin: thin, importing nothing heavy (command modules load on use)."""

from __future__ import annotations

from parity import hookimpl


@hookimpl
def parity_register_commands(cli):
    from parity.cli import group

    from parity_tactics import cli as commands

    group(cli, "inspect").add_command(commands.inspect_tactics)
    group(cli, "inspect").add_command(commands.inspect_diff_tactics)
    debug = group(cli, "debug")
    if "diff-tactics" not in debug.commands:
        debug.add_command(commands.debug_diff_tactics)
