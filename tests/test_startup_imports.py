"""What start-up avoids importing (bench/startup.py measures the time): `parity --help` and `parity run --help`
import neither dataclasses nor pathlib, shutil, json, difflib or matplotlib; a plain `parity run` imports none of the
modules only some runs need (statistics, zipfile, the first-divergence report, dataclasses, the plots and matplotlib). Each is checked in a fresh
interpreter. What replaces an import behaves as it did: the help width Parity computes (click asks shutil) is
click's, and ``median_ms`` (no statistics module) is ``statistics.median``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

MODEL = str(Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_cnn.onnx")
WATCHED = (
    "dataclasses", "pathlib", "shutil", "json", "difflib", "statistics", "zipfile", "parity.compare.divergence", "parity.util.fs",
    "matplotlib", "parity_reports.plots",
)  # fmt: skip

# The editable install's path finders import pathlib (and more) before any Parity code runs: the probe forgets
# the watched modules first, so what it reports is what Parity imported again.
PROBE = f"""
import io, sys, contextlib
for name in {WATCHED!r}:
    sys.modules.pop(name, None)
from parity.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
found = [m for m in {WATCHED!r} if m in sys.modules]
import json
print(json.dumps({{"code": code, "modules": found}}))
"""


def imported(*argv: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    return report["modules"]


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]], ids=" ".join)
def test_help_imports_none_of_the_avoided_modules(argv):
    found = imported(*argv)
    assert not found, f"parity {' '.join(argv)} imported {sorted(found)}"


def test_a_plain_run_imports_only_what_it_needs():
    found = set(imported("run", MODEL, "--onnxrt", "--input-shapes", "x:[4,3,16,16]"))
    # dataclasses may come: the engine's RunRequest is one (issue 27: the standard library over stand-ins, 1-2 ms)
    assert not found & {"statistics", "zipfile", "parity.compare.divergence", "shutil", "difflib", "matplotlib", "parity_reports.plots"}, sorted(found)


@pytest.mark.parametrize("columns", [None, "40", "100", "300", "abc", "0"])
def test_help_width_is_clicks(monkeypatch, columns):
    from parity.cli.parsing import HelpFormatter

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(click.formatting, "FORCED_WIDTH", None)
    for max_width in (None, 80, 110, 200):
        assert HelpFormatter(max_width=max_width).width == click.HelpFormatter(max_width=max_width).width
    assert HelpFormatter(width=33).width == 33
    monkeypatch.setattr(click.formatting, "FORCED_WIDTH", 61)
    assert HelpFormatter(max_width=110).width == 61


def test_median_ms_is_statistics_median():
    import statistics

    from parity.run_engine import median_ms

    for values in ([0.5], [3.0, 1.0], [0.002, 0.001, 0.004], [1, 2, 3, 4], [0.1] * 7 + [0.3]):
        assert median_ms(values) == statistics.median(values) * 1000.0
    assert median_ms([]) != median_ms([])  # nan
