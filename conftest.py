"""Fixtures every test folder (core, plugins, contrib) shares: the real-model corpus."""

from __future__ import annotations

import os
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
def llm_decoder(tmp_path_factory):
    """``llm_decoder(**options)`` -> path of a small LLM-like decoder whose weights are in one external data file
    (bench/llm_decoder.py: ``layers``, ``hidden``, ``heads``, ``vocab``, ``seq``, ``overflow_block``...), built
    once per set of options. Treat it as read-only: copy it before a test changes it."""
    sys.path.insert(0, str(Path(__file__).parent / "bench"))
    from llm_decoder import build_decoder

    built: dict[tuple, Path] = {}

    def make(**options) -> Path:
        key = tuple(sorted(options.items()))
        if key not in built:
            folder = tmp_path_factory.mktemp("llm")
            built[key] = Path(build_decoder(folder / "decoder.onnx", **options)["path"])
        return built[key]

    return make


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium from Debian's packages, unpacked into a cache without root (tests/browser.py); skipped
    only where apt-get itself is missing. A failed download or a library that cannot be found fails the test."""
    import browser

    if not browser.apt_available():
        pytest.skip("apt-get, dpkg and ldd are needed: headless Chromium comes from Debian's packages (apt-get download)")
    return browser.chromium()


def pytest_configure(config):
    # The suite starts thousands of `parity` processes; where the environment forbids writing bytecode (some
    # sandboxes set PYTHONDONTWRITEBYTECODE), each of them compiled Parity's editable sources anew (~0.15 s a
    # process). Workers and their children inherit this (xdist starts them after configure).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    config.addinivalue_line("markers", "corpus: runs on the real-model corpus (fetched from wheels)")
    config.addinivalue_line("markers", "big: runs commands on a model past protobuf's 2 GiB limit (minutes; deselect with -m 'not big')")
