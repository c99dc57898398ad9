"""Fixtures every test folder (core, plugins, contrib) shares: the real-model corpus."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tests"))

import corpus  # noqa: E402


@pytest.fixture(scope="session")
def corpus_model():
    """``corpus_model(name)`` -> path of a trained model from the corpus (tests/corpus), fetched once."""
    return corpus.model_path


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium from Debian's packages, unpacked into a cache without root (tests/browser.py); skipped
    only where apt-get itself is missing. A failed download or a library that cannot be found fails the test."""
    import browser

    if not browser.apt_available():
        pytest.skip("apt-get, dpkg and ldd are needed: headless Chromium comes from Debian's packages (apt-get download)")
    return browser.chromium()


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: runs on the real-model corpus (fetched from wheels)")
