from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    """Every test runs in its own directory (debug commands write parity_debug.onnx and state files there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    from parity.cli.common import SETTINGS

    saved = dict(SETTINGS)
    yield tmp_path
    SETTINGS.update(saved)
    os.environ.pop("PARITY_DEBUG_ITERATION", None)
