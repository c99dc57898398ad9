"""The reports plugin's tests: ``main`` runs ``parity`` in-process as the core's tests do (tests/conftest.py); the
root conftest puts tests/ on the path (core_models, browser) and gives ``corpus_model`` and ``chromium``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the browser test imports its neighbours


@pytest.fixture(autouse=True)
def _fresh_plugins():
    """Each test sees plugins loaded anew (some tests change the environment's plugin controls)."""
    from parity import plugins
    from parity.cli.common import SETTINGS

    plugins.reset()
    SETTINGS.update(verbose=False, quiet=False, warnings=True)
    yield
    plugins.reset()


@pytest.fixture
def main(capsys):
    """``parity.cli.main`` in-process: returns (exit code, stdout, stderr)."""
    from parity.cli import main as parity_main

    def call(*args: str):
        code = parity_main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return call
