"""Making ``import tensorrt`` give the TensorRT model (NOT TensorRT) to Parity, in the test's process and in every
process it starts (a ``debug build --check`` command, a ``parity`` subprocess).

``install(monkeypatch, version)`` (and ``uninstall()`` after the test: ``trt_model.fixtures.trt_backend``) puts
``make(version)`` in ``sys.modules``, clears Parity's cached TensorRT objects,
and sets PYTHONPATH/``PARITY_TRT_MODEL_*`` so child processes import the shims in ``site/`` (and ``site_host_cuda/``:
cuda-python's runtime modelled by ``HostCudart``). With ``memory="cuda"`` (a GPU run) the real cuda-python is used
and the model's engines read and write real device memory (``CudaMemory``). ``version="tensorrt"`` installs
nothing: the real TensorRT, where it imports (the test is skipped elsewhere).
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REAL = "tensorrt"  # the backend name of the real TensorRT in parametrized tests
# Other plugins' caches of TensorRT objects, forgotten with this plugin's: their tests register them (the tactics
# plugin's conftest.py), so the model names no other plugin's private modules.
FORGET: list[Callable[[], None]] = []


def backends() -> list[str]:
    """Every modelled version, then the real TensorRT (tests skip it where it does not import)."""
    from trt_model.manifest import versions

    return [*versions(), REAL]


@functools.cache
def process_memory() -> Any:
    """This process's memory seam: one HostCudart shared by the cuda-python shim and the model, or real CUDA."""
    if os.environ.get("PARITY_TRT_MODEL_MEMORY") == "cuda":
        from cuda.bindings import runtime

        from trt_model.cuda_memory import CudaMemory

        return CudaMemory(runtime)
    from trt_model.host_cuda import HostCudart

    return HostCudart()


def _clear_caches() -> None:
    from parity_trt import _trt, cuda, engine

    for cached in (_trt.import_trt, _trt.get_logger, cuda.runtime, engine.get_runtime):
        getattr(cached, "cache_clear", lambda: None)()  # a test may have put a plain function in its place
    for clear in FORGET:
        clear()


def install(monkeypatch: Any, version: str, memory: str = "host") -> types.ModuleType:
    import pytest

    from trt_model import make

    if version == REAL:
        trt = pytest.importorskip("tensorrt")
        pytest.importorskip("cuda.bindings")
        _clear_caches()
        return trt
    monkeypatch.setenv("PARITY_TRT_MODEL_VERSION", version)
    monkeypatch.setenv("PARITY_TRT_MODEL_MEMORY", memory)
    monkeypatch.delenv("PARITY_TRT_LOG", raising=False)
    paths = [str(HERE / "site"), *([str(HERE / "site_host_cuda")] if memory == "host" else []), str(HERE.parent)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])]))
    process_memory.cache_clear()
    seam = process_memory()
    module = make(version, memory=seam)
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    if memory == "host":
        cuda = types.ModuleType("cuda", "a model of cuda-python for tests; not CUDA")
        bindings = types.ModuleType("cuda.bindings")
        cuda.bindings, bindings.runtime = bindings, seam  # type: ignore[attr-defined]
        for name, value in (("cuda", cuda), ("cuda.bindings", bindings), ("cuda.bindings.runtime", seam)):
            monkeypatch.setitem(sys.modules, name, value)
    _clear_caches()
    return module


def uninstall() -> None:
    """After the test (before monkeypatch restores ``sys.modules``): forget the model's cached objects."""
    _clear_caches()
    process_memory.cache_clear()
