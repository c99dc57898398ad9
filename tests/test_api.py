"""The Python API mirrors the CLI: loaders, immediate functions, runners, Comparator, files."""

from __future__ import annotations

import core_models as models
import numpy as np
import pytest

import parity
from parity import Comparator, DataLoader, RunResults
from parity.errors import UsageError


def test_runner_context_manager_and_infer(affine_model):
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    runner = OnnxrtRunner(SessionFromOnnx(str(affine_model)))
    with runner:
        assert runner.is_active
        out = runner.infer({"x": np.array([[0, 1, 2, 3]], np.float32)})
        assert np.allclose(out["y"], [[0.5, 2.5, 4.5, 6.5]])
        assert runner.last_inference_time > 0
        assert str(runner.get_input_metadata()["x"]) == "float32[1,4]"
    assert not runner.is_active


def test_infer_rejects_bad_feeds(affine_model):
    from parity_onnxrt import OnnxrtRunner, session_from_onnx

    with OnnxrtRunner(session_from_onnx(str(affine_model))) as runner:
        with pytest.raises(UsageError, match=r"no data for input 'x' \(expected float32\[1,4\]\); the data has 'y' instead"):
            runner.infer({"y": np.zeros((1, 4), np.float32)})  # the missing input is the cause: named first
        with pytest.raises(UsageError, match="no input 'y'"):
            runner.infer({"x": np.zeros((1, 4), np.float32), "y": np.zeros((1, 4), np.float32)})
        with pytest.raises(UsageError, match="dtype int32"):
            runner.infer({"x": np.zeros((1, 4), np.int32)})


def test_loaders_compose_lazily(tmp_path):
    from parity_onnxrt import ModifyOnnxOutputs, OnnxFromPath, OnnxrtRunner, SessionFromOnnx

    path = models.chain(tmp_path / "chain.onnx")
    loader = SessionFromOnnx(ModifyOnnxOutputs(OnnxFromPath(str(path)), outputs=["mark", "all"]))
    with OnnxrtRunner(loader) as runner:
        outputs = runner.infer({"x": np.ones((1, 4), np.float32)})
    assert {"t0", "t1", "t5", "y"} <= set(outputs)


def test_comparator_run_and_compare(tiny_cnn, tmp_path):
    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    runners = [OnnxrtRunner(SessionFromOnnx(str(tiny_cnn)), name="a"), OnnxrtRunner(SessionFromOnnx(str(tiny_cnn), graph_optimization_level="disable"), name="b")]
    results = Comparator.run(runners, data_loader=DataLoader(iterations=2, input_shapes={"x": (1, 3, 16, 16)}))
    assert results.runners() == ["a", "b"] and len(results["a"]) == 2
    accuracy = Comparator.compare_accuracy(results)
    assert accuracy and accuracy.pair("a", "b").passed
    assert Comparator.compare_accuracy(results, compare_func="indices")
    results.save(tmp_path / "r.npz")
    assert RunResults.load(tmp_path / "r.npz").runners() == ["a", "b"]


def test_compare_accuracy_detects_difference():
    from parity.compare.simple import SimpleCompare
    from parity.results import IterationResult

    results = RunResults([
        ("a", [IterationResult({"y": np.array([1.0, 2.0, 3.0])})]),
        ("b", [IterationResult({"y": np.array([1.0, 2.1, 3.0])})]),
    ])  # fmt: skip
    accuracy = Comparator.compare_accuracy(results)
    assert not accuracy
    check = accuracy[0].iterations[0].checks[0]
    assert check.name == "y" and check.values["max_abs"] == pytest.approx(0.1)
    assert Comparator.compare_accuracy(results, compare_func=SimpleCompare(atol=0.11))
    # registered metrics by name, with options named as on the CLI
    assert Comparator.compare_accuracy(results, compare_func=("simple", {"atol": 0.11}))
    assert not Comparator.compare_accuracy(results, compare_func=[("simple", {"atol": 0.11}), ("simple", {"atol": 0.01, "rtol": 0})])


def test_input_lists_save_and_load(tmp_path):
    feeds = [{"x": np.full((1, 4), i, np.float32)} for i in range(3)]
    parity.save_inputs(feeds, tmp_path / "in.npz")
    loaded = parity.load_inputs(tmp_path / "in.npz")
    assert [int(f["x"][0, 0]) for f in loaded] == [0, 1, 2]


def test_data_loader_is_random_access_and_reproducible(affine_model):
    from parity.onnx_models import read_inputs

    loader = DataLoader(read_inputs(str(affine_model)), seed=5, iterations=3)
    first = [f["x"].copy() for f in loader]
    assert np.array_equal(loader[2]["x"], first[2])
    assert not np.array_equal(first[0], first[1])
