"""Parity hooks of the tactics plugin: thin, importing nothing heavy (command modules load on use)."""

from __future__ import annotations

import functools
from typing import Any

from parity import hookimpl

TACTIC_PARAMS = ("save_tactics", "load_tactics")


def _guard(name: str, callback: Any) -> Any:
    """Reject tactic options where no TensorRT build happens, instead of silently ignoring them."""

    @functools.wraps(callback)
    def wrapped(*args: Any, **params: Any) -> Any:
        used = [f"--{p.replace('_', '-')}" for p in TACTIC_PARAMS if params.get(p)]
        if used:
            import click

            from parity.errors import UsageError
            from parity.plugins import module_available

            if not module_available("parity_trt"):
                raise UsageError(f"{', '.join(used)} needs the TensorRT plugin: pip install parity-trt")
            runners = click.get_current_context().meta.get("parity.runners", [])
            if name == "run" and "trt" not in [backend for backend, _ in runners]:
                raise UsageError(f"{', '.join(used)} applies to TensorRT builds; add --trt")
        return callback(*args, **params)

    return wrapped


@hookimpl
def parity_register_commands(cli):
    from parity.cli import group
    from parity_tactics import cli as commands
    from parity_tactics.options import tactic_options

    # --save-tactics/--load-tactics reach the TensorRT builder through the run options: the TensorRT plugin
    # passes every option to the build extension factory registered under the parity_trt.build entry point.
    for name in ("run", "convert"):
        command = cli.commands.get(name)
        if command is not None:
            taken = {o for p in command.params for o in getattr(p, "opts", [])}
            command.params.extend(o for o in tactic_options() if not set(o.opts) & taken)
            command.callback = _guard(name, command.callback)
    group(cli, "inspect").add_command(commands.inspect_tactics)
    group(cli, "inspect").add_command(commands.inspect_diff_tactics)
    debug = group(cli, "debug")
    if "diff-tactics" not in debug.commands:
        debug.add_command(commands.debug_diff_tactics)
    if "build" not in debug.commands:
        debug.add_command(commands.debug_build_command())
