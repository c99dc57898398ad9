from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))

import core_models  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_plugins(parity_fresh_plugins):
    """Each test sees plugins loaded anew (some tests add one-off plugins or env controls): parity.testing's fixture."""


@pytest.fixture
def affine_model(tmp_path: Path) -> Path:
    return core_models.affine(tmp_path / "affine.onnx")


@pytest.fixture
def tiny_cnn() -> Path:
    return ROOT / "examples" / "models" / "tiny_cnn.onnx"


def run_parity(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """The installed ``parity`` console script, in a fresh process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(["parity", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout)


@pytest.fixture
def parity_cli():
    return run_parity


@pytest.fixture
def main(parity_main):
    """``parity.cli.main`` in-process: returns (exit code, stdout, stderr), parity.testing's ``parity_main``."""
    return parity_main
