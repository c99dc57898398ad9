"""The first NaN/Inf with one runner and no reference (``parity run --onnx-outputs mark all --validate``): the first
node in topological order whose output holds NaN or Inf, its op type and a summary of its inputs; and the SQNR the
``simple`` metric reports. ``parity debug localize --validate`` gives the same answer (plugins/surgeon/tests)."""

from __future__ import annotations

import json
import math

import core_models
import jsonschema
import numpy as np
import pytest

CULPRIT = {"log": "Log", "sqrt": "Sqrt", "div": "Div"}


def _schema(name: str) -> dict:
    from importlib import resources

    return json.loads(resources.files("parity").joinpath("schemas", f"{name}.schema.json").read_text())


@pytest.mark.parametrize("how", sorted(CULPRIT))
def test_mark_all_validate_names_the_node_that_makes_the_first_nan(main, tmp_path, how):
    model = core_models.nan_midway(tmp_path / f"{how}.onnx", how)
    report = tmp_path / "r.json"
    code, out, err = main("run", model, "--onnxrt", "--onnx-outputs", "mark", "all", "--validate", "--report", report)
    assert code == 1, out + err
    assert f"First NaN/Inf: 'bad', produced by node 'culprit' ({CULPRIT[how]})" in out
    data = json.loads(report.read_text())
    jsonschema.Draft202012Validator(_schema("run-report")).validate(data)
    (found,) = data["nonfinite"]
    assert (found["runner"], found["first"], found["node"], found["op_type"]) == ("onnxrt-0", "bad", "culprit", CULPRIT[how])
    rows = found["tensors"]
    first = next(r for r in rows if r["name"] == "bad")
    assert all(r["passed"] for r in rows if r["position"] < first["position"]) and first["nan"] > 0
    assert found["output"]["nan"] == first["nan"] and found["output"]["first_nonfinite"] is not None
    inputs = {s["name"]: s for s in found["inputs"]}
    assert all(s["nan"] == 0 and s["inf"] == 0 for s in inputs.values())  # its inputs were finite: the node made it
    if how == "div":
        assert set(inputs) == {"zero"} and inputs["zero"]["min"] == inputs["zero"]["max"] == 0.0 and found["at_first"] == {"zero": 0.0}
    else:
        c = inputs["c"]
        assert c["min"] < 0 <= c["max"] and c["source"] == "computed" and len(c["extremes"]) == 3
        assert found["at_first"]["c"] < 0  # the element that went NaN read a negative value
        assert abs(c["extremes"][0]["value"]) == max(abs(c["min"]), abs(c["max"]))


def test_each_runner_gets_its_own_first_nan_and_a_clean_model_passes(main, tmp_path):
    model = core_models.nan_midway(tmp_path / "log.onnx", "log")
    report = tmp_path / "r.json"
    code, out, _ = main("run", model, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--onnx-outputs", "mark", "all", "--validate", "--report", report)
    assert code == 1
    assert [(r["runner"], r["node"]) for r in json.loads(report.read_text())["nonfinite"]] == [("onnxrt-0", "culprit"), ("onnxrt-1", "culprit")]
    clean = core_models.nan_midway(tmp_path / "none.onnx", "none")
    code, out, _ = main("run", clean, "--onnxrt", "--onnx-outputs", "mark", "all", "--validate", "--report", report)
    assert code == 0 and "validation passed" in out and "First NaN/Inf" not in out
    data = json.loads(report.read_text())
    assert data["nonfinite"] == [] and data["validation"] == []
    jsonschema.Draft202012Validator(_schema("run-report")).validate(data)
    # a plain --validate run (no marked tensors) reports the outputs only, as before
    code, out, _ = main("run", model, "--onnxrt", "--validate", "--report", report)
    assert code == 1 and "First NaN/Inf" not in out and "nonfinite" not in json.loads(report.read_text())


def test_tensor_stats_extremes_first_nonfinite_and_broadcast_values():
    from parity.compare import stats
    from parity.compare.nonfinite import tensor_stats, value_at

    n = stats.CHUNK + 10  # the extremes and the first NaN sit in the second chunk
    x = np.linspace(-1, 1, n, dtype=np.float32).reshape(1, -1)
    x[0, stats.CHUNK + 3] = -50.0
    x[0, stats.CHUNK + 5] = np.nan
    x[0, 7] = 40.0
    x[0, 8] = np.inf
    s = tensor_stats("x", x)
    assert (s.nan, s.inf, s.min, s.max) == (1, 1, -50.0, 40.0)
    assert s.extremes[:2] == [([0, stats.CHUNK + 3], -50.0), ([0, 7], 40.0)] and len(s.extremes) == 3
    assert s.first_nonfinite == [0, 8]
    assert value_at(np.arange(4.0).reshape(4, 1), [2, 5], [4, 8]) == 2.0  # broadcast along the second axis
    assert value_at(np.float32(3), [1, 1], [4, 8]) == 3.0
    assert value_at(np.zeros((3, 3)), [1, 1], [4, 8]) is None  # does not broadcast: no value
    empty = tensor_stats("e", np.full((2,), np.nan, np.float32))
    assert empty.min is None and empty.extremes == [] and empty.first_nonfinite == [0]


def test_simple_metric_sqnr_is_onnxruntimes_formula():
    from parity.compare.simple import SimpleCompare

    rng = np.random.default_rng(0)
    ref = rng.standard_normal((3, 1000)).astype(np.float32)
    act = (ref + 0.01 * rng.standard_normal(ref.shape)).astype(np.float32)
    got = SimpleCompare()("t", act, ref).values["sqnr_db"]
    want = 20 * math.log10(np.linalg.norm(ref.astype(np.float64)) / np.linalg.norm(ref.astype(np.float64) - act))
    assert got == pytest.approx(want, abs=1e-9)
    exact = SimpleCompare()("t", ref, ref).values["sqnr_db"]
    assert exact == pytest.approx(20 * math.log10(np.linalg.norm(ref.astype(np.float64)) / np.finfo(np.float64).eps))
    act[0, 0] = np.nan
    assert SimpleCompare()("t", act, ref).values["sqnr_db"] is None
