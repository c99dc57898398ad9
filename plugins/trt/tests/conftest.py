"""Fixtures: small ONNX models (parity.testing's relu_add: dynamic ``[N, 3]`` or static ``[2, 3]``), and ``trt_backend``
(trt_model.fixtures: the TensorRT model of each manifest version, NOT TensorRT, then the real tensorrt where it imports).
``parity_invoke`` and the model builders come from parity.testing, as for any plugin."""

from __future__ import annotations

from pathlib import Path

import pytest
from trt_model.fixtures import trt_backend  # noqa: F401 - a fixture for every test here

from parity.testing import relu_add


@pytest.fixture
def onnx_model(tmp_path: Path) -> Path:
    return relu_add(tmp_path / "model.onnx")


@pytest.fixture
def static_model(tmp_path: Path) -> Path:
    return relu_add(tmp_path / "static.onnx", (2, 3))
