"""The ``simple`` metric over several threads: one question, one answer, whatever the thread count or mode.

The tensors are cut into fixed chunks (``simple.SCAN_CHUNK``) whose partial results are combined in chunk order,
so 1 thread and 4 threads must give the same bits; ``statistics="shown"`` (what ``parity run`` prints) must give
the same numbers as ``"all"`` for every value it computes; small tensors (a layerwise run's) never use the pool.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from parity.compare import simple
from parity.compare.simple import SimpleCompare
from parity.errors import UsageError

SIZE = 5 * simple.SCAN_CHUNK + 1234  # several chunks and a short last one: the parallel path


def _bits(check) -> str:
    """Everything a check holds, NaN included, as text: equal text, equal bits (repr round-trips floats)."""
    return json.dumps([check.passed, check.message, check.values, check.thresholds, check.details], default=repr, sort_keys=True)


def _planted(dtype=np.float32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(SIZE) * 4).astype(dtype)
    b = (a.astype(np.float64) * (1 + 1e-4 * rng.standard_normal(SIZE))).astype(dtype)
    idx = rng.choice(SIZE, 60, replace=False)
    a[idx[:10]] = np.nan
    b[idx[5:15]] = np.nan  # 5 places NaN on both sides
    a[idx[20:25]] = np.inf
    b[idx[20:23]] = np.inf  # equal infinities
    b[idx[30:35]] = -np.inf
    b[idx[40:50]] = 0  # zero reference: relative error of absd / tiny
    a[2 * simple.SCAN_CHUNK : 3 * simple.SCAN_CHUNK] += 1e-3  # one chunk fails the default tolerances
    return a, b


OPTIONS = [
    {},
    {"atol": 1e-3, "rtol": 1e-3, "nans_equal": True, "infinities_equal": True},
    {"check_error_stat": "mean", "atol": 1e-2},
    {"check_error_stat": "median"},
    {"check_error_stat": "quantile", "error_quantile": 0.9},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
@pytest.mark.parametrize("statistics", simple.STATISTICS)
def test_one_thread_and_four_give_the_same_bits_with_nan_and_inf(options, statistics):
    a, b = _planted()
    one = SimpleCompare(threads=1, statistics=statistics, **options)("y", a, b)
    four = SimpleCompare(threads=4, statistics=statistics, **options)("y", a, b)
    assert one.values["nan_actual"] == 10 and one.values["mismatches"] > 0
    assert _bits(one) == _bits(four)


@pytest.mark.parametrize("kernel", [True, False], ids=["onnxruntime", "numpy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_all_finite_inputs_give_the_same_bits_on_any_thread_count(dtype, kernel, monkeypatch):
    monkeypatch.setattr(simple, "USE_ONNXRUNTIME", kernel)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(SIZE).astype(dtype)
    b = (a.astype(np.float64) + 1e-3 * rng.standard_normal(SIZE)).astype(dtype)
    checks = [SimpleCompare(threads=t)("y", a, b) for t in (1, 2, 3, 4, 7)]
    assert len({_bits(c) for c in checks}) == 1
    assert checks[0].values["max_abs"] == pytest.approx(float(np.abs(a.astype(np.float64) - b).max()), rel=1e-7)
    assert checks[0].values["mean_abs"] == pytest.approx(float(np.abs(a.astype(np.float64) - b).mean()), rel=1e-9)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_shown_statistics_are_the_same_numbers_as_all(options):
    """The CLI's lighter mode leaves out medians (and a passing output's details), never changes a value."""
    a, b = _planted(seed=2)
    full = SimpleCompare(threads=3, **options)("y", a, b)
    for statistics in ("shown", "report"):
        light = SimpleCompare(threads=3, statistics=statistics, **options)("y", a, b)
        assert light.passed == full.passed and light.message == full.message
        for key, value in light.values.items():
            assert repr(value) == repr(full.values[key]), key
        assert ("median_abs" in light.values) == (statistics == "report" or options.get("check_error_stat") == "median")
        assert not light.passed and json.dumps(light.details, default=repr) == json.dumps(full.details, default=repr)  # a failure shows its details


def test_a_passing_output_skips_details_and_medians_when_only_shown():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(SIZE, dtype=np.float32)
    check = SimpleCompare(statistics="shown", threads=2)("y", a, a.copy())
    assert check.passed and check.details == {} and "median_abs" not in check.values
    assert check.values["max_abs"] == 0 and check.values["cosine"] == pytest.approx(1.0)
    assert SimpleCompare()("y", a, a.copy()).details["abs_histogram"] == [("0", SIZE)]


def test_small_tensors_run_inline(monkeypatch):
    """A layerwise run compares thousands of small tensors: no thread hand-off for them."""

    def no_pool(threads):
        raise AssertionError("small tensors must not use the thread pool")

    monkeypatch.setattr(simple, "_pool", no_pool)
    assert SimpleCompare(threads=8)("y", np.zeros(4096, np.float32), np.ones(4096, np.float32)).values["max_abs"] == 1
    with pytest.raises(AssertionError, match="thread pool"):
        SimpleCompare(threads=8)("y", np.zeros(SIZE, np.float32), np.ones(SIZE, np.float32))


def test_thread_count_setting(monkeypatch):
    monkeypatch.setenv("PARITY_COMPARE_THREADS", "3")
    assert simple.compare_threads() == 3
    assert simple.compare_threads(5) == 5
    monkeypatch.setenv("PARITY_COMPARE_THREADS", "many")
    with pytest.raises(UsageError, match="PARITY_COMPARE_THREADS"):
        simple.compare_threads()
    with pytest.raises(UsageError, match="PARITY_COMPARE_THREADS"):  # when the metric is made: before any work
        SimpleCompare()
    monkeypatch.delenv("PARITY_COMPARE_THREADS")
    assert simple.compare_threads() == len(__import__("os").sched_getaffinity(0))
    with pytest.raises(ValueError, match="statistics"):
        SimpleCompare(statistics="some")


@pytest.mark.corpus
def test_real_model_outputs_give_the_same_bits_on_any_thread_count(corpus_model, monkeypatch):
    """PP-OCRv4 det at 3x512x512 (a 262144-element probability map, several chunks), onnxruntime with and without
    graph optimizations: the same values, details and verdict for 1 thread and 4."""
    import onnxruntime as ort

    path = str(corpus_model("ppocr_det"))
    x = np.random.default_rng(5).random((1, 3, 512, 512), dtype=np.float32)
    outputs = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        outputs.append(session.run(None, {"x": x})[0])
    assert outputs[0].size >= 2 * simple.SCAN_CHUNK
    monkeypatch.setattr(simple, "PARALLEL_FROM", 0)
    for options in ({}, {"atol": 0.0, "rtol": 0.0}, {"check_error_stat": "median"}):
        checks = [SimpleCompare(threads=t, **options)("y", *outputs) for t in (1, 4)]
        assert _bits(checks[0]) == _bits(checks[1])
        assert math.isfinite(checks[0].values["max_abs"])


@pytest.mark.parametrize("seed", [0, 1])
def test_onnxruntime_kernel_and_numpy_agree(seed, monkeypatch):
    """float32 chunks are reduced by an onnxruntime graph where onnxruntime is installed, by numpy elsewhere: the
    same maxima, counts and verdicts, sums equal to float64 rounding."""
    pytest.importorskip("onnxruntime")
    a, b = _planted(seed=seed)
    if seed:
        a, b = a[np.isfinite(a) & np.isfinite(b)], b[np.isfinite(a) & np.isfinite(b)]
    checks = []
    for kernel in (True, False):
        monkeypatch.setattr(simple, "USE_ONNXRUNTIME", kernel)
        checks.append(SimpleCompare(threads=2)("y", a, b))
    ort, numpy = checks
    assert ort.passed == numpy.passed and ort.message == numpy.message
    for key, value in numpy.values.items():
        if key in ("mean_abs", "mean_rel", "cosine", "sqnr_db") and value is not None:
            assert ort.values[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert repr(ort.values[key]) == repr(value), key


def test_kernel_model_is_the_documented_graph():
    """simple.KERNEL_MODEL is stored serialized (importing onnx would cost a run 200 ms): it is this graph, and it
    passes onnx's full check."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Cast", ["a"], ["x"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["b"], ["y"], to=TensorProto.DOUBLE),
        helper.make_node("Sub", ["x", "y"], ["s"]),
        helper.make_node("Abs", ["s"], ["d"]),
        helper.make_node("Abs", ["y"], ["ay"]),
        helper.make_node("Max", ["ay", "tiny"], ["den"]),
        helper.make_node("Div", ["d", "den"], ["r"]),
    ]
    for out, op, inputs in (("max_abs", "ReduceMax", "d"), ("sum_abs", "ReduceSum", "d"), ("max_rel", "ReduceMax", "r"), ("sum_rel", "ReduceSum", "r")):
        nodes.append(helper.make_node(op, [inputs], [out], keepdims=0))
    nodes += [helper.make_node("Mul", ["x", "y"], ["xy_m"]), helper.make_node("ReduceSum", ["xy_m"], ["xy"], keepdims=0)]
    nodes += [helper.make_node("ReduceSumSquare", [v], [out], keepdims=0) for out, v in (("xx", "x"), ("yy", "y"), ("dd", "d"))]
    graph = helper.make_graph(
        nodes,
        "parity_compare_chunk",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n"]) for name in ("a", "b")],
        [helper.make_tensor_value_info(name, TensorProto.DOUBLE, []) for name in simple.KERNEL_OUTPUTS],
        [helper.make_tensor("tiny", TensorProto.DOUBLE, [], [float(np.finfo(np.float32).tiny)])],
    )
    stored = onnx.load_from_string(simple.KERNEL_MODEL)
    assert stored.graph == graph
    assert stored.ir_version == 8 and [(o.domain, o.version) for o in stored.opset_import] == [("", 17)]
    onnx.checker.check_model(stored, full_check=True)
