"""Fixtures: small ONNX models built by the tests (ir_version 10 so onnxruntime loads them), and ``trt_backend``
(trt_model.fixtures: the TensorRT model of each manifest version, NOT TensorRT, then the real tensorrt where it imports)."""

from __future__ import annotations

from pathlib import Path

import pytest
from trt_model.fixtures import trt_backend  # noqa: F401 - a fixture for every test here
from trt_test_models import make_model


@pytest.fixture
def onnx_model(tmp_path: Path) -> Path:
    return make_model(tmp_path / "model.onnx")


@pytest.fixture
def static_model(tmp_path: Path) -> Path:
    return make_model(tmp_path / "static.onnx", dynamic=False)
