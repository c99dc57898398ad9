"""Parity hooks of the tactics plugin: thin, importing nothing heavy (command modules load on use)."""

from __future__ import annotations

from typing import Any

from parity import hookimpl
from parity.api import UsageError, module_available

TACTIC_PARAMS = ("save_tactics", "load_tactics")


def _validate(command: str, params: Any, ctx: Any) -> None:
    """Reject tactic options where no TensorRT build happens, instead of silently ignoring them."""
    used = [f"--{p.replace('_', '-')}" for p in TACTIC_PARAMS if params.get(p)]
    if not used:
        return
    if not module_available("parity_trt"):
        raise UsageError(f"{', '.join(used)} needs the TensorRT plugin: pip install parity-trt")
    runners = ctx.meta.get("parity.runners", [])
    if command == "run" and "trt" not in [backend for backend, _ in runners]:
        raise UsageError(f"{', '.join(used)} applies to TensorRT builds; add --trt")


@hookimpl
def parity_register_options(register):
    from parity.api import OptionSpec  # here: discovery imports this module and never needs the registry
    from parity_tactics.options import tactic_options

    # --save-tactics/--load-tactics reach the TensorRT builder through the run options: the TensorRT plugin
    # passes every option to parity_trt_build_extension below.
    register(OptionSpec("tactics", ("run", "convert", "debug precision"), tuple(tactic_options()), _validate, "tactic record/replay for TensorRT builds",
                        reads=("load_tactics",), writes=("save_tactics",), backends=("trt",)))


@hookimpl
def parity_describe_commands(register):
    # parity_tactics.cli is imported only when one of these runs or shows its --help
    register("inspect tactics", "parity_tactics.cli:inspect_tactics", "Show a tactic replay file (Parity or Polygraphy) as a table.")
    diff = "Find the tactics that appear in bad builds and not (or rarely) in good ones."
    register("inspect diff-tactics", "parity_tactics.cli:inspect_diff_tactics", diff)
    register("debug diff-tactics", "parity_tactics.cli:debug_diff_tactics", diff, hidden=True)  # Polygraphy's older spelling
    register("debug build", "parity_tactics.cli:debug_build_command", "Rebuild a TensorRT engine repeatedly, sorting tactic replays by a check.")


@hookimpl(optionalhook=True)  # declared by the TensorRT plugin (parity_trt.hookspecs), which may be absent
def parity_trt_build_extension(options):
    from parity_tactics.trt_tactics import build_extension  # at build time only: hooks stay cheap

    return build_extension(options)
