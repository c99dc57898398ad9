"""parity_polygraphy.comparator: Polygraphy's Comparator, compare functions, results and data loader, run on real
ONNX models with onnxruntime."""

from __future__ import annotations

import io
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from parity_onnxrt.api import OnnxrtRunner, SessionFromOnnx
from parity_polygraphy.comparator import (
    AccuracyResult,
    Comparator,
    CompareFunc,
    DataLoader,
    IterationResult,
    OutputCompareResult,
    PostprocessFunc,
    RunResults,
)
from parity_polygraphy.exception import PolygraphyException

from parity import api as parity_api


def add_model(offset: float = 0.0, shape=(1, 4), op: str = "Add") -> bytes:
    """``y = x <op> c`` with c filled with ``offset``."""
    const = helper.make_tensor("c", TensorProto.FLOAT, list(shape), [offset] * int(np.prod(shape)))
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "c"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        [const],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def runner(model: bytes, name: str) -> OnnxrtRunner:
    return OnnxrtRunner(SessionFromOnnx(model), name=name)


def test_two_runners_agree_and_accuracy_result_counts_iterations():
    data = [{"x": np.full((1, 4), i, dtype=np.float32)} for i in range(3)]
    results = Comparator.run([runner(add_model(1.0), "a"), runner(add_model(1.0), "b")], data_loader=data)

    assert isinstance(results, RunResults) and list(results.keys()) == ["a", "b"]
    assert results[0][0] == "a" and len(results["a"]) == 3
    np.testing.assert_array_equal(results["b"][2]["y"], np.full((1, 4), 3.0, dtype=np.float32))
    assert results["a"][0].runner_name == "a" and results["a"][0].runtime > 0

    accuracy = Comparator.compare_accuracy(results)
    assert isinstance(accuracy, AccuracyResult) and bool(accuracy)
    assert accuracy.stats(("a", "b")) == (3, 0, 3) and accuracy.percentage() == 1.0
    verdict = accuracy[("a", "b")][0]["y"]
    assert isinstance(verdict, OutputCompareResult) and verdict.max_absdiff == 0.0


def test_a_real_difference_fails_at_default_tolerance_and_passes_a_wider_one():
    results = Comparator.run([runner(add_model(0.0), "ref"), runner(add_model(0.001), "shifted")])

    failed = Comparator.compare_accuracy(results)
    assert not failed and failed.stats() == (0, 1, 1) and failed.percentage() == 0.0
    out = failed[("ref", "shifted")][0]["y"]
    assert out.max_absdiff == pytest.approx(0.001, rel=1e-3)
    assert out.mean_absdiff == pytest.approx(0.001, rel=1e-3)
    assert bool(Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol=0.01)))
    # per-output tolerance, "" is the default for the rest
    assert bool(Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol={"": 0.0, "y": 0.01})))
    assert not Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol={"other": 1.0}))


def test_default_data_loader_feeds_every_runner_the_same_seeded_inputs():
    results = Comparator.run([runner(add_model(0.0), "a"), runner(add_model(0.0), "b")], warm_up=2)
    assert len(results["a"]) == 1  # warm-up runs are not results
    y = results["a"][0]["y"]
    assert y.dtype == np.float32 and ((y >= 0) & (y <= 1)).all()
    np.testing.assert_array_equal(y, results["b"][0]["y"])
    # the same draws Polygraphy's default loader makes (seed 1), so golden data stays comparable
    np.testing.assert_array_equal(y, np.random.RandomState(1).random_sample((1, 4)).astype(np.float32))


def test_save_inputs_and_results_round_trip_through_files_polygraphy_reads(tmp_path):
    from polygraphy.comparator import RunResults as PolygraphyRunResults
    from polygraphy.json import load_json

    inputs_path, outputs_path = tmp_path / "inputs.json", tmp_path / "outputs.json"
    loader = DataLoader(iterations=2, val_range=(5.0, 6.0))
    results = Comparator.run([runner(add_model(1.0), "a")], data_loader=loader, save_inputs_path=str(inputs_path))
    results.save(str(outputs_path))

    saved_inputs = load_json(str(inputs_path))
    assert len(saved_inputs) == 2 and 5.0 <= float(saved_inputs[1]["x"].min()) <= float(saved_inputs[1]["x"].max()) <= 6.0
    theirs = PolygraphyRunResults.load(str(outputs_path))
    np.testing.assert_array_equal(theirs["a"][1]["y"], results["a"][1]["y"])
    assert theirs["a"][1].runner_name == "a"

    ours = RunResults.load(str(outputs_path))
    assert list(ours.keys()) == ["a"] and ours == results
    assert isinstance(ours["a"][0], IterationResult)
    assert json.loads(outputs_path.read_text())["polygraphy_class"] == "RunResults"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs.json", "outputs.json"]  # no stray temporary files


def test_run_results_is_a_list_of_pairs_with_dict_helpers():
    results = RunResults()
    results.add([{"y": np.zeros(2)}, {"y": np.ones(2)}], runner_name="first")
    results.append(("second", [IterationResult({"y": np.ones(2)}, runner_name="second")]))
    results["first"] = [IterationResult({"y": np.full(2, 7.0)})]  # replaces in place
    results["third"] = []  # appends

    assert [name for name, _ in results] == ["first", "second", "third"]
    assert "second" in results and "missing" not in results
    assert results["first"][0].runner_name == "custom_runner"
    np.testing.assert_array_equal(results[0][1][0]["y"], [7.0, 7.0])
    with pytest.raises(IndexError):
        results[3]
    with pytest.raises(PolygraphyException, match="does not exist in this RunResults"):
        results["missing"]
    assert not isinstance(results, list)  # as Polygraphy's: JSON must see a RunResults, not a list

    from polygraphy.comparator import RunResults as PolygraphyRunResults

    text = results.to_json()
    theirs = PolygraphyRunResults.from_json(text)  # Polygraphy reads what we write...
    assert list(theirs.keys()) == ["first", "second", "third"]
    np.testing.assert_array_equal(theirs["first"][0]["y"], [7.0, 7.0])
    assert RunResults.from_json(theirs.to_json()) == results  # ...and we read what it writes
    buffer = io.StringIO()
    results.save(buffer)
    assert RunResults.load(io.StringIO(buffer.getvalue())) == results
    with pytest.raises(PolygraphyException, match="cannot be decoded into a RunResults"):
        RunResults.from_json("[1, 2]")
    parity_results = results.to_parity()
    assert isinstance(parity_results, parity_api.RunResults) and parity_results.runners() == ["first", "second", "third"]


def test_simple_compare_func_statistics_follow_polygraphy():
    def pair(a, b, dtype):
        return IterationResult({"out": np.array(a, dtype=dtype)}), IterationResult({"out": np.array(b, dtype=dtype)})

    # integers are compared as integers: a zero reference makes the relative error infinite
    result = CompareFunc.simple()(*pair([1], [0], np.uint8))["out"]
    assert (result.max_absdiff, result.max_reldiff) == (1.0, np.inf) and not result
    # a zero float reference is replaced by float64's epsilon
    result = CompareFunc.simple()(*pair([1], [0], np.float16))["out"]
    assert result.max_reldiff == pytest.approx(1 / np.finfo(np.float64).eps)
    # an outlier fails elemwise/max but not a mean or median check
    a, b = pair([100.0] + [0.0] * 99, [0.0] * 100, np.float32)
    assert not CompareFunc.simple(check_error_stat="max", atol=1)(a, b)["out"]
    assert CompareFunc.simple(check_error_stat="median", atol=1)(a, b)["out"]
    quantile = CompareFunc.simple(check_error_stat="quantile", error_quantile=0.5)(*pair([0, 1, 2, 3, 4], [2, 2, 2, 2, 2], np.uint8))["out"]
    assert (quantile.quantile_absdiff, quantile.quantile_reldiff) == (1.0, 0.5)
    with pytest.raises(PolygraphyException, match="Invalid choice"):
        CompareFunc.simple(check_error_stat="nope")(a, b)
    # NaN never passes; equal infinities pass only when asked
    assert not CompareFunc.simple()(*pair([np.nan], [0.1], np.float32))["out"]
    assert not CompareFunc.simple()(*pair([np.inf], [np.inf], np.float32))["out"]
    assert CompareFunc.simple(infinities_compare_equal=True)(*pair([np.inf], [np.inf], np.float32))["out"]
    # different shapes fail, unless shape checks are off and the values can be reshaped
    assert CompareFunc.simple()(IterationResult({"out": np.zeros((2, 2))}), IterationResult({"out": np.zeros(4)}))["out"] is False
    assert CompareFunc.simple(check_shapes=False)(IterationResult({"out": np.zeros((2, 2))}), IterationResult({"out": np.zeros(4)}))["out"]
    with pytest.raises(PolygraphyException, match="no common outputs"):
        CompareFunc.simple()(IterationResult({"a": np.zeros(1)}), IterationResult({}))


def test_indices_distance_and_quality_compare_funcs():
    def pair(a, b):
        return IterationResult({"out": np.array(a)}), IterationResult({"out": np.array(b)})

    assert not CompareFunc.indices()(*pair([1, 0, 2, 3], [0, 1, 2, 3]))["out"]
    assert CompareFunc.indices(index_tolerance=1)(*pair([1, 0, 2, 3], [0, 1, 2, 3]))["out"]
    assert CompareFunc.indices(index_tolerance={"out": 2})(*pair([0, 1, 2, 3, 4], [0, 3, 2, 1, 4]))["out"]

    close = pair([1.0, 2.0, 3.0], [1.0, 2.0, 3.001])
    distance = CompareFunc.distance_metrics(l2_tolerance=0.01)(*close)["out"]
    assert distance and distance.l2_norm == pytest.approx(0.001) and distance.cosine_similarity > 0.999
    assert not CompareFunc.distance_metrics()(*close)["out"]  # default l2 tolerance 1e-5
    quality = CompareFunc.quality_metrics()(*close)["out"]
    assert quality and quality.snr > 20 and quality.psnr > 30


def test_postprocess_top_k_on_real_outputs():
    data = [{"x": np.array([[3.0, 1.0, 4.0, 2.0]], dtype=np.float32)}]
    results = Comparator.run([runner(add_model(0.0), "a")], data_loader=data)
    processed = Comparator.postprocess(results, PostprocessFunc.top_k(k=2))
    np.testing.assert_array_equal(processed["a"][0]["y"], [[2, 0]])
    axis0 = PostprocessFunc.top_k(k={"": (1, 0)})(IterationResult({"v": np.array([[5, 6, 5], [6, 5, 6]], dtype=np.float32)}))
    np.testing.assert_array_equal(axis0["v"], [[1, 0, 1]])


def test_validate_finds_nan_and_inf_in_real_outputs():
    data = [{"x": np.array([[-1.0, 0.0, 1.0, 4.0]], dtype=np.float32)}]
    nan_results = Comparator.run([runner(add_model(0.5, op="Pow"), "pow")], data_loader=data)  # (-1) ** 0.5 is NaN
    assert not Comparator.validate(nan_results)
    assert Comparator.validate(nan_results, check_nan=False)
    inf_results = Comparator.run([runner(add_model(0.0, op="Div"), "div")], data_loader=data)  # x / 0: inf and NaN
    assert not Comparator.validate(inf_results, check_nan=False, check_inf=True)
    assert Comparator.validate(Comparator.run([runner(add_model(1.0), "ok")], data_loader=data), check_inf=True)


def test_use_subprocess_runs_the_runner_elsewhere_and_reports_its_failure():
    data = [{"x": np.ones((1, 4), dtype=np.float32)}]
    results = Comparator.run([runner(add_model(2.0), "sub")], data_loader=data, use_subprocess=True, subprocess_polling_interval=1)
    np.testing.assert_array_equal(results["sub"][0]["y"], np.full((1, 4), 3.0, dtype=np.float32))

    class NotARunner:
        name = "fake"

    with pytest.raises(PolygraphyException, match="fake"):
        Comparator.run([NotARunner()], data_loader=data, use_subprocess=True, subprocess_polling_interval=1)


def test_data_loader_draws_polygraphys_values():
    from polygraphy.common import TensorMetadata as PolygraphyMetadata
    from polygraphy.comparator import DataLoader as PolygraphyDataLoader

    for dtype in (np.float32, np.int32, np.int64, bool, np.uint8):
        theirs = PolygraphyDataLoader(input_metadata=PolygraphyMetadata().add("x", dtype=dtype, shape=(3, 5)), val_range=(0, 9), seed=7, iterations=2)
        ours = DataLoader(input_metadata={"x": (dtype, (3, 5))}, val_range=(0, 9), seed=7, iterations=2)
        for index in range(2):
            np.testing.assert_array_equal(ours[index]["x"], theirs[index]["x"])
            assert ours[index]["x"].dtype == theirs[index]["x"].dtype
    loader = DataLoader(input_metadata={"a": (np.float32, (2,)), "b": (np.float32, (2,))}, val_range={"": (6, 8), "b": (-3, -2)})
    feed = loader[0]
    assert ((feed["a"] >= 6) & (feed["a"] <= 8)).all() and ((feed["b"] >= -3) & (feed["b"] <= -2)).all()
    with pytest.raises(IndexError):
        loader[1]
    # a dynamic dim is 1 unless the caller's metadata fixes it (names may be wildcards)
    fixed = DataLoader(input_metadata={"in_*": (None, (4, 2))})
    fixed.input_metadata = {"in_x": (np.float32, (-1, 2)), "other": (np.float32, (-1, 2))}
    assert fixed[0]["in_x"].shape == (4, 2) and fixed[0]["other"].shape == (1, 2)


def test_a_polygraphy_script_with_its_own_runners_and_the_class_forms():
    """What a Polygraphy script does, with `polygraphy` replaced by `parity_polygraphy` in its imports."""
    from parity_polygraphy.backend.onnxrt import OnnxrtRunner as PolygraphyStyleRunner
    from parity_polygraphy.backend.onnxrt import SessionFromOnnx as PolygraphyStyleSession
    from parity_polygraphy.comparator import IndicesCompareFunc, SimpleCompareFunc, TopKPostprocessFunc

    runners = [PolygraphyStyleRunner(PolygraphyStyleSession(add_model(offset)), name=name) for offset, name in ((0.0, "a"), (0.002, "b"))]
    results = Comparator.run(runners, data_loader=DataLoader(iterations=2, seed=3))
    assert [len(its) for its in results.values()] == [2, 2]
    assert not np.array_equal(results["a"][0]["y"], results["a"][1]["y"])  # each iteration draws its own inputs
    assert not Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc())
    assert Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(atol=0.01))
    ranked = Comparator.postprocess(results, TopKPostprocessFunc(k=4))
    assert Comparator.compare_accuracy(ranked, compare_func=IndicesCompareFunc())  # a constant shift keeps the ranking
    np.testing.assert_array_equal(np.sort(ranked["a"][0]["y"], axis=-1), [[0, 1, 2, 3]])


def test_check_average_judges_the_mean_over_iterations():
    # iteration 0 differs by 0.1 everywhere, iteration 1 not at all: the mean error 0.05 passes atol=0.06
    results = RunResults()
    results.add([{"y": np.ones(4, dtype=np.float32) + 0.1}, {"y": np.ones(4, dtype=np.float32)}], runner_name="a")
    results.add([{"y": np.ones(4, dtype=np.float32)}, {"y": np.ones(4, dtype=np.float32)}], runner_name="b")
    compare = CompareFunc.simple(check_error_stat="max", atol=0.06)

    per_sample = Comparator.compare_accuracy(results, compare_func=compare)
    assert not per_sample and per_sample.stats() == (1, 1, 2)
    averaged = Comparator.compare_accuracy(results, compare_func=compare, check_average=True)
    assert averaged and averaged.stats() == (1, 1, 2)  # the per-iteration counts stay as they are
    assert averaged.average_results()["y"].max_absdiff == pytest.approx(0.05, rel=1e-3)
    assert not Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(check_error_stat="max", atol=0.04), check_average=True)

    with pytest.raises(PolygraphyException, match="elemwise"):
        Comparator.compare_accuracy(results, check_average=True)
    with pytest.raises(PolygraphyException, match="fail_fast"):
        Comparator.compare_accuracy(results, compare_func=compare, check_average=True, fail_fast=True)
    with pytest.raises(PolygraphyException, match="no comparable"):
        Comparator.compare_accuracy(results, compare_func=CompareFunc.indices(), check_average=True)


def test_run_saves_outputs_and_raw_input_blobs(tmp_path):
    from polygraphy.comparator import RunResults as PolygraphyRunResults

    data = [{"x": np.arange(4, dtype=np.float32).reshape(1, 4) + i} for i in range(2)]
    results = Comparator.run(
        [runner(add_model(1.0), "a")], data_loader=data, save_outputs_path=str(tmp_path / "out.json"), save_input_blob_path=str(tmp_path / "blobs")
    )
    np.testing.assert_array_equal(PolygraphyRunResults.load(str(tmp_path / "out.json"))["a"][1]["y"], results["a"][1]["y"])
    np.testing.assert_array_equal(np.fromfile(tmp_path / "blobs" / "0000000001" / "x.bin", dtype=np.float32), [1, 2, 3, 4])
    with pytest.raises(PolygraphyException, match="same path"):
        Comparator.run([runner(add_model(1.0), "a")], data_loader=data, save_inputs_path=str(tmp_path / "s.json"), save_outputs_path=str(tmp_path / "s.json"))
    with pytest.raises(PolygraphyException, match="streaming"):
        Comparator.run([runner(add_model(1.0), "a")], data_loader=data, streaming=True)


def test_run_results_split_into_iterations_and_concat_back():
    data = [{"x": np.full((1, 4), i, dtype=np.float32)} for i in range(3)]
    results = Comparator.run([runner(add_model(1.0), "a"), runner(add_model(2.0), "b")], data_loader=data)
    singles = list(results.split())
    assert len(singles) == 3 and all(list(single.keys()) == ["a", "b"] and len(single["a"]) == 1 for single in singles)
    np.testing.assert_array_equal(singles[2]["b"][0]["y"], np.full((1, 4), 4.0, dtype=np.float32))
    assert RunResults.concat(singles) == results


def test_loader_cache_casts_reshapes_and_trims_feeds_for_each_runner():
    # float64 values of the wrong shape, and an input the model does not have: each runner gets what it takes
    data = [{"x": np.arange(4, dtype=np.float64), "unused": np.zeros(2)}]
    results = Comparator.run([runner(add_model(1.0), "a")], data_loader=data)
    np.testing.assert_array_equal(results["a"][0]["y"], [[1.0, 2.0, 3.0, 4.0]])
    assert results["a"][0]["y"].dtype == np.float32
    # a feed that cannot be made to fit, from a generator (no random access to load it again from)
    with pytest.raises(PolygraphyException, match="Could not reload inputs"):
        Comparator.run([runner(add_model(1.0), "a")], data_loader=(feed for feed in [{"x": np.zeros(3, dtype=np.float32)}]))


def test_single_metric_compare_funcs_measure_what_polygraphy_measures():
    import polygraphy.comparator as polygraphy_comparator
    from parity_polygraphy.comparator import CosineSimilarityCompareFunc, L2CompareFunc, PsnrCompareFunc, SnrCompareFunc

    data = [{"x": np.array([[0.5, -1.0, 2.0, 3.0]], dtype=np.float32)}]
    results = Comparator.run([runner(add_model(0.0), "a"), runner(add_model(0.01), "b")], data_loader=data)
    a, b = results["a"][0], results["b"][0]
    theirs_a = polygraphy_comparator.IterationResult({"y": a["y"]})
    theirs_b = polygraphy_comparator.IterationResult({"y": b["y"]})
    for ours, theirs, field in (
        (L2CompareFunc(l2_threshold=0.05), polygraphy_comparator.L2CompareFunc(l2_threshold=0.05), "l2_norm"),
        (CosineSimilarityCompareFunc(), polygraphy_comparator.CosineSimilarityCompareFunc(), "cosine_similarity"),
        (PsnrCompareFunc(psnr_threshold=50.0), polygraphy_comparator.PsnrCompareFunc(psnr_threshold=50.0), "psnr"),
        (SnrCompareFunc(snr_threshold={"": 20.0, "y": 60.0}), polygraphy_comparator.SnrCompareFunc(snr_threshold={"": 20.0, "y": 60.0}), "snr"),
    ):
        mine, reference = ours(a, b)["y"], theirs(theirs_a, theirs_b)["y"]
        assert getattr(mine, field) == pytest.approx(getattr(reference, field), rel=1e-6)  # we accumulate in float64
        assert bool(mine) == bool(reference)
    assert not L2CompareFunc()(a, b)["y"]  # default 1e-5
    assert Comparator.compare_accuracy(results, compare_func=L2CompareFunc(l2_threshold=0.05), check_average=True)


def test_streaming_data_loader_replays_saved_inputs(tmp_path):
    from parity_polygraphy.comparator import StreamingDataLoader

    first = Comparator.run([runner(add_model(1.0), "a")], data_loader=DataLoader(iterations=3), save_inputs_path=str(tmp_path / "inputs.json"))
    replayed = Comparator.run([runner(add_model(1.0), "a")], data_loader=StreamingDataLoader(str(tmp_path / "inputs.json")))
    for mine, theirs in zip(first["a"], replayed["a"]):
        np.testing.assert_array_equal(mine["y"], theirs["y"])
    assert len(replayed["a"]) == 3
    # a folder of per-iteration files, in index order
    folder = tmp_path / "each"
    folder.mkdir()
    for index, feed in enumerate(StreamingDataLoader(tmp_path / "inputs.json")):
        parity_api.save_inputs([feed], folder / f"{index:010d}.json")
    for saved, one_by_one in zip(StreamingDataLoader(tmp_path / "inputs.json"), StreamingDataLoader([folder]), strict=True):
        np.testing.assert_array_equal(saved["x"], one_by_one["x"])
    with pytest.raises(PolygraphyException, match="directory"):
        list(StreamingDataLoader(folder, allow_dirs=False))
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(PolygraphyException, match="broken.json"):
        list(StreamingDataLoader(tmp_path / "broken.json"))


def test_several_compare_funcs_give_one_accuracy_result_each():
    from parity_polygraphy.comparator import AccuracyResults, L2CompareFunc

    results = Comparator.run([runner(add_model(0.0), "a"), runner(add_model(0.001), "b")])
    both = Comparator.compare_accuracy(results, compare_func=[CompareFunc.simple(atol=0.01), L2CompareFunc(l2_threshold=1e-6)])
    assert isinstance(both, AccuracyResults) and len(both) == 2
    assert bool(both[0]) and not both[1] and not both
    assert both.output_names() == ["y"]
