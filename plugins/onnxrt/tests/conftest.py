"""``build``: the onnxrt tests' own models (ort_models). ``parity_invoke`` comes from parity.testing, as for any plugin."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import ort_models  # noqa: E402


@pytest.fixture()
def build(tmp_path: Path):
    """``build("relu_add")`` -> path of that ort_models model, saved under tmp_path."""

    def make(name: str, filename: str | None = None) -> Path:
        return getattr(ort_models, name)(tmp_path / (filename or f"{name}.onnx"))

    return make
