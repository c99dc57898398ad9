"""pytest fixtures for tests that drive Parity's TensorRT flows against the TensorRT model (NOT TensorRT) and, where
it imports, the real TensorRT. Import them into a conftest: ``from trt_model.fixtures import trt_backend  # noqa``."""

from __future__ import annotations

import os
import types
from collections.abc import Iterator

import pytest

from trt_model.install import backends, install, uninstall


@pytest.fixture(params=backends())
def trt_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """``tensorrt`` as Parity sees it: each modelled version in turn, then the real TensorRT (skipped without it).
    ``PARITY_TRT_MODEL_MEMORY=cuda`` (on a GPU) makes the model's engines use real device memory through cuda-python."""
    yield install(monkeypatch, request.param, memory=os.environ.get("PARITY_TRT_MODEL_MEMORY", "host"))
    uninstall()
