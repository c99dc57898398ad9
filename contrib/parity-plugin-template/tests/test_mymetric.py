"""The plugin seen from outside: listed by `parity plugins`, and deciding `parity run` verdicts.

Only `parity.api` and `parity.testing` are used. `parity_invoke` is a fixture of Parity's pytest plugin
(parity.testing, active wherever Parity is installed): it runs `parity` in-process and returns
`CliResult(exit_code, stdout, stderr)`.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np
import pytest

from parity.api import IterationResult, RunResults, save_results

MODULE = Path(__file__).resolve().parents[1] / "parity_mymetric.py"


def installed() -> bool:
    try:
        importlib.metadata.distribution("parity-mymetric")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


@pytest.fixture
def parity(parity_invoke):
    """`parity ARGS...`; before the plugin is pip-installed, this folder's module is loaded as a one-off plugin."""
    env = None if installed() else {"PARITY_PLUGINS": str(MODULE)}
    return lambda *args: parity_invoke(*args, env=env)


def test_listed_by_parity_plugins(parity):
    result = parity("plugins", "--json")
    assert result.exit_code == 0, result.stderr
    [row] = [r for r in json.loads(result.stdout) if "mymetric" in r["registered"].get("comparators", [])]
    assert row["status"] == "loaded"
    assert row["source"] == ("entry-point" if installed() else "file")


@pytest.mark.parametrize(("limit", "code"), [("0.2", 0), ("0.05", 1), ("-1", 2)])
def test_decides_the_verdict(parity, tmp_path, limit, code):
    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    for name, values in (("a", x), ("b", x + 0.1)):
        save_results(RunResults([(name, [IterationResult({"y": values})])]), tmp_path / f"{name}.npz")
    result = parity("run", "--load-outputs", tmp_path / "a.npz", tmp_path / "b.npz", "--compare-func", "mymetric", "--mymetric-max", limit)
    assert result.exit_code == code, result.stdout + result.stderr
    if code < 2:
        assert "mymetric max_abs=0.1" in result.stdout
