"""Registers the reduce plugin's strategies and ``debug reduce`` / ``debug precision``. Imports nothing heavy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parity import hookimpl

# name -> (help, the commands whose --mode offers it); the factories live in parity_reduce.strategies
# (imported when a strategy is built). debug reduce and debug precision look every mode up in the registry,
# these as any third party's.
MODES = {
    "dichotomic": ("binary search for each culprit node, O(k log n) checks (default)", ("reduce", "precision")),
    "quickxplain": ("QuickXplain divide and conquer (Junker 2004)", ("reduce", "precision")),
    "ddmin": ("delta debugging over graph regions (Zeller & Hildebrandt 2002); parallel with --jobs", ("reduce", "precision")),
    "bisect": ("Polygraphy's bisect: ancestors, then descendants, of one node by binary search", ("reduce", "precision")),
    "linear": ("Polygraphy's linear: every node as the new output, then as the new input", ("reduce", "precision")),
    "staged": ("a region in no more checks than bisect, then dichotomic inside it (for --max-checks/--max-time)", ("reduce",)),
}


def _factory(name: str):
    def factory(options: Mapping[str, Any]) -> Any:
        from parity_reduce.strategies import STRATEGIES  # here: discovery imports this module; a strategy loads when built

        return STRATEGIES[name](options)

    return factory


@hookimpl
def parity_register_debug_strategies(register):
    from parity.api import StrategySpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    for name, (help_text, kinds) in MODES.items():
        register(StrategySpec(name, _factory(name), help_text, kinds=kinds))


@hookimpl
def parity_describe_commands(register):
    # parity_reduce.cli is imported only when one of these runs or shows its --help
    register("debug reduce", "parity_reduce.hooks:reduce_command", "Shrink a failing model to a minimal failing subgraph.")
    register("debug precision", "parity_reduce.hooks:precision_command", "Find the nodes that must stay fp32 (strongly typed).")


def reduce_command() -> Any:
    return _debug_command("reduce")


def precision_command() -> Any:
    return _debug_command("precision")


def _debug_command(name: str) -> Any:
    """One of the commands ``parity_reduce.cli.add_commands`` builds into a ``debug`` group (it builds both)."""
    import click

    from parity_reduce.cli import add_commands

    scratch = click.Group()
    scratch.add_command(click.Group("debug"))
    add_commands(scratch)
    return scratch.commands["debug"].commands[name]  # type: ignore[attr-defined]
