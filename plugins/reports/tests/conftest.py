"""The reports plugin's tests: ``main`` runs ``parity`` in-process and plugins are loaded anew for each test, as in
the core's tests (tests/conftest.py), both from parity.testing's fixtures, as a third party's plugin would have
them; the root conftest puts tests/ on the path (core_models, browser) and gives ``corpus_model`` and ``chromium``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the browser test imports its neighbours


@pytest.fixture(autouse=True)
def _fresh_plugins(parity_fresh_plugins):
    """Each test sees plugins loaded anew (some tests change the environment's plugin controls)."""


@pytest.fixture
def main(parity_main):
    """``parity.cli.main`` in-process: returns (exit code, stdout, stderr)."""
    return parity_main
