"""The plugin seen from outside: listed by `parity plugins`, and deciding `parity run` verdicts."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from parity import IterationResult, RunResults, save_results

MODULE = Path(__file__).resolve().parents[1] / "parity_mymetric.py"


def installed() -> bool:
    try:
        importlib.metadata.distribution("parity-mymetric")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def parity(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if not installed():  # not pip-installed yet: load this folder's module as a one-off plugin
        env["PARITY_PLUGINS"] = str(MODULE)
    return subprocess.run([sys.executable, "-m", "parity", *args], capture_output=True, text=True, env=env, timeout=120)


def test_listed_by_parity_plugins():
    proc = parity("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    [row] = [r for r in json.loads(proc.stdout) if "mymetric" in r["registered"].get("comparators", [])]
    assert row["status"] == "loaded"
    assert row["source"] == ("entry-point" if installed() else "file")


@pytest.mark.parametrize(("limit", "code"), [("0.2", 0), ("0.05", 1), ("-1", 2)])
def test_decides_the_verdict(tmp_path, limit, code):
    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    for name, values in (("a", x), ("b", x + 0.1)):
        save_results(RunResults([(name, [IterationResult({"y": values})])]), tmp_path / f"{name}.npz")
    proc = parity("run", "--load-outputs", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--compare-func", "mymetric", "--mymetric-max", limit)
    assert proc.returncode == code, proc.stdout + proc.stderr
    if code < 2:
        assert "mymetric max_abs=0.1" in proc.stdout
