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
def _fresh_plugins():
    """Each test sees plugins loaded anew (some tests add one-off plugins or env controls)."""
    from parity import plugins
    from parity.cli.common import SETTINGS

    plugins.reset()
    SETTINGS.update(verbose=False, quiet=False, warnings=True)
    yield
    plugins.reset()


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
def main(capsys):
    """``parity.cli.main`` in-process: returns (exit code, stdout, stderr)."""
    from parity.cli import main as parity_main

    def call(*args: str):
        code = parity_main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return call
