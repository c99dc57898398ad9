"""Registers the reduce plugin's strategies and ``debug reduce`` / ``debug precision``. Imports nothing heavy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parity import hookimpl
from parity.api import StrategySpec

# name -> help; the factories live in parity_reduce.strategies (imported when a strategy is built).
MODES = {
    "dichotomic": "binary search for each culprit node, O(k log n) checks (default)",
    "quickxplain": "QuickXplain divide and conquer (Junker 2004)",
    "ddmin": "delta debugging over graph regions (Zeller & Hildebrandt 2002); parallel with --jobs",
    "bisect": "Polygraphy's bisect: ancestors, then descendants, of one node by binary search",
    "linear": "Polygraphy's linear: every node as the new output, then as the new input",
}


def _factory(name: str):
    def factory(options: Mapping[str, Any]) -> Any:
        from parity_reduce.strategies import STRATEGIES

        return STRATEGIES[name][0](options)

    return factory


@hookimpl
def parity_register_debug_strategies(register):
    for name, help_text in MODES.items():
        register(StrategySpec(name, _factory(name), help_text, kinds=("reduce", "precision")))


@hookimpl
def parity_register_commands(cli):
    from parity_reduce.cli import add_commands

    add_commands(cli)
