"""parity_polygraphy.backend.trt's SaveEngine/save_engine, run against Parity's behavioural model of TensorRT
(plugins/trt/tests/trt_model, NOT TensorRT) for each modelled version: the engine written loads back and runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests
from parity_polygraphy.backend.trt import (  # noqa: E402
    EngineFromBytes,
    EngineFromNetwork,
    NetworkFromOnnxBytes,
    SaveEngine,
    TrtRunner,
    save_engine,
)
from trt_model.fixtures import trt_backend  # noqa: E402, F401 - each modelled TensorRT version, then the real one


def _relu_bytes() -> bytes:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def test_save_engine_writes_an_engine_that_loads_and_runs(trt_backend, tmp_path):  # noqa: F811 - the fixture, by name
    trt = trt_backend
    path = tmp_path / "sub" / "model.engine"
    engine = save_engine(EngineFromNetwork(NetworkFromOnnxBytes(_relu_bytes()))(), path=str(path))
    assert isinstance(engine, trt.ICudaEngine)
    assert os.listdir(path.parent) == ["model.engine"]  # written atomically: no temp file left
    x = np.array([[-1, 2, -3], [4, -5, 6]], dtype=np.float32)
    with TrtRunner(EngineFromBytes(path.read_bytes())) as runner:
        np.testing.assert_array_equal(runner.infer({"x": x})["y"], np.maximum(x, 0))


def test_save_engine_loader_calls_an_engine_loader(trt_backend, tmp_path):  # noqa: F811 - the fixture, by name
    path = tmp_path / "model.engine"
    loader = SaveEngine(EngineFromNetwork(NetworkFromOnnxBytes(_relu_bytes())), path=str(path))
    assert not path.exists()  # nothing happens until the loader is called
    engine = loader()
    assert path.read_bytes() == bytes(engine.serialize())
