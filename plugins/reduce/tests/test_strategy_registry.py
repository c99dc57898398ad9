"""debug reduce / debug precision find every --mode through the registry, their own modes included: the plugin
registers them as a third party would (parity_register_debug_strategies), and nothing names them elsewhere."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "parity_reduce"


def test_every_mode_is_registered_by_the_plugin():
    from parity_reduce.hooks import MODES
    from parity_reduce.strategies import STRATEGIES

    from parity.api import get_registry

    registry = get_registry()
    assert set(MODES) == set(STRATEGIES)
    for name in STRATEGIES:
        assert registry.owners[("strategies", name)] == "parity-reduce"
    assert registry.strategies["staged"].kinds == ("reduce",)
    assert registry.strategy("staged").factory({}).name == "staged"


def test_modes_are_looked_up_only_in_the_registry():
    for module in ("reducer.py", "precision.py", "cli.py"):
        assert "STRATEGIES" not in (PKG / module).read_text(), module
    assert '"staged"' not in (PKG / "cli.py").read_text().split("def _modes")[1].split("def ")[0]  # listed from the registry


def test_mode_listings_are_unchanged():
    from parity_reduce.cli import _modes

    assert _modes("reduce") == ["auto", "bisect", "ddmin", "dichotomic", "linear", "quickxplain", "staged"]
    assert _modes("precision") == ["bisect", "ddmin", "dichotomic", "linear", "quickxplain"]
