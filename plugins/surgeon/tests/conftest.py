from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import models  # noqa: E402


@pytest.fixture()
def mlp(tmp_path: Path) -> Path:
    return models.mlp(tmp_path / "mlp.onnx")


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    """The MLP with fc2's weight shifted by 0.05: it differs from ``mlp`` in node fc2 only."""
    return models.mlp(tmp_path / "mlp_planted.onnx", planted=0.05)


@pytest.fixture()
def cli():
    """``parity ...`` in-process through the installed entry points; returns (exit code, stdout, stderr)."""
    from parity import plugins
    from parity.cli import main

    def run(capsys, *args: str) -> tuple[int, str, str]:
        plugins.reset()
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
