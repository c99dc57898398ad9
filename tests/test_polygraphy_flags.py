"""Polygraphy's `run` flags as its users write them (issue 14): each works (issue 29: every flag of Polygraphy's
tree is a real option, tests/test_polygraphy_cli_tree.py; TensorFlow's are refused in one line)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MODEL = Path(__file__).resolve().parents[1] / "examples" / "models" / "tiny_cnn.onnx"
RUN = ("run", MODEL, "--onnxrt", "--input-shapes", "x:[1,3,16,16]")

WORKS = [
    ("--silent",),
    ("--verbosity", "INFO"),
    ("--verbosity", "EXTRA_VERBOSE"),
    ("--execution-providers", "cpu"),
    ("--providers", "cpu"),
    ("--onnxrt", "--check-average", "--check-error-stat", "mean"),  # a second runner: a metric's options need a comparison
]
def parity(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    return subprocess.run([sys.executable, "-m", "parity", *map(str, args)], capture_output=True, text=True, env=env, timeout=120, cwd=cwd)


@pytest.mark.parametrize("flags", WORKS, ids=lambda f: " ".join(f))
def test_polygraphy_spellings_work(flags):
    proc = parity(*RUN, *flags)
    assert proc.returncode == 0 and "PASSED" in proc.stdout + proc.stderr, proc.stderr


@pytest.mark.parametrize("flag", ["--save-heatmaps", "--save-error-metrics-plot"])
def test_polygraphy_picture_flags_draw(flag, tmp_path):
    pytest.importorskip("matplotlib")
    proc = parity(*RUN, "--onnxrt", "--iterations", "2", flag, "pictures", cwd=tmp_path)
    assert proc.returncode == 0 and "PASSED" in proc.stdout, proc.stderr
    files = sorted((tmp_path / "pictures").iterdir())
    assert files and all(f.suffix == ".png" and f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in files)


def test_show_heatmaps_without_a_display_says_how_to_save_them(tmp_path):
    pytest.importorskip("matplotlib")
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY") and not k.startswith("PARITY_")}
    proc = subprocess.run([sys.executable, "-m", "parity", *map(str, RUN), "--show-heatmaps"], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "--show-heatmaps: no display" in lines[0] and "--save-heatmaps DIR" in lines[0], proc.stderr


def test_verbosity_switches_before_the_command_too():
    quiet = parity("-q", *RUN)
    assert quiet.returncode == 0 and quiet.stdout.strip().splitlines() == ["PASSED | 1 iteration(s) | " + quiet.stdout.split("| ")[-1].strip()]
    loud = parity("-v", *RUN)
    assert loud.returncode == 0 and "median inference" in loud.stdout
    assert parity("--verbosity", "warning", *RUN).stdout.count("\n") == 1
    bad = parity(*RUN, "--verbosity", "loud")
    assert bad.returncode == 2 and "levels are" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("shape", ["x:1x3x16x16", "x,1x3x16x16"])
def test_the_old_shape_syntax_is_read_with_a_deprecation_warning(shape):
    proc = parity("run", MODEL, "--onnxrt", "--input-shapes", shape)
    assert proc.returncode == 0, proc.stderr
    assert f"--input-shapes: '{shape}' is the deprecated shape syntax; write x:[1,3,16,16]" in proc.stderr
    assert "dynamic shape" not in proc.stderr  # the shape was used
