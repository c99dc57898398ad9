"""``parity debug localize MODEL --onnxrt --validate``: the first node whose output holds NaN or Inf, with one runner
and no reference, in the memory budget's batches (or by bisection); the same answer ``parity run --onnx-outputs
mark all --validate`` gives (one definition: ``parity.api.first_nonfinite``)."""

from __future__ import annotations

import json
from importlib import resources

import core_models
import jsonschema
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

CULPRIT = {"log": "Log", "sqrt": "Sqrt", "div": "Div"}


def _validate(data: dict, package: str, name: str) -> None:
    schema = json.loads(resources.files(package).joinpath("schemas", f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)


def _run_answer(parity_invoke, tmp_path, model, *args):
    report = tmp_path / "run.json"
    code, text, err = parity_invoke("run", model, "--onnxrt", *args, "--onnx-outputs", "mark", "all", "--validate", "--report", report)
    assert code in (0, 1), text + err
    data = json.loads(report.read_text())
    _validate(data, "parity", "run-report")
    found = data["nonfinite"][0] if data["nonfinite"] else {"first": None, "node": None, "inputs": []}
    return code, found


def _localize_answer(parity_invoke, tmp_path, model, *args):
    report = tmp_path / "loc.json"
    code, text, err = parity_invoke("debug", "localize", model, "--onnxrt", "--validate", *args, "--report", report)
    assert code in (0, 1), text + err
    data = json.loads(report.read_text())
    _validate(data, "parity_surgeon", "localize")
    assert data["validated"] is True and data["divergence"]["tensors"] == [] and data["isolation"] == []
    (found,) = data["nonfinite"]
    return code, found, text


@pytest.mark.parametrize("how", sorted(CULPRIT))
def test_localize_validate_names_the_culprit_like_mark_all(parity_invoke, tmp_path, how):
    model = core_models.nan_midway(tmp_path / f"{how}.onnx", how)
    run_code, run_found = _run_answer(parity_invoke, tmp_path, model)
    assert (run_code, run_found["node"]) == (1, "culprit")
    for args in ((), ("--mode", "bisect"), ("--memory-budget", "1")):  # bisection; one tensor per batch
        code, found, text = _localize_answer(parity_invoke, tmp_path, model, *args)
        assert (code, found["first"], found["node"], found["op_type"]) == (1, "bad", "culprit", CULPRIT[how]), args
        assert f"First NaN/Inf: 'bad', produced by node 'culprit' ({CULPRIT[how]})" in text
        assert f"FAILED | first NaN/Inf at 'bad' ({CULPRIT[how]})" in text
        # the same summaries of the node's inputs, whichever path computed them
        assert [(s["name"], s["min"], s["max"], s["nan"], s["inf"]) for s in found["inputs"]] == [
            (s["name"], s["min"], s["max"], s["nan"], s["inf"]) for s in run_found["inputs"]
        ], args
        assert found["at_first"] == run_found["at_first"]


def test_localize_validate_clean_model_exit_0_and_usage_errors(parity_invoke, tmp_path):
    clean = core_models.nan_midway(tmp_path / "none.onnx", "none")
    code, found, text = _localize_answer(parity_invoke, tmp_path, clean)
    assert code == 0 and found["first"] is None and len(found["tensors"]) == 5 and "PASSED | no NaN or Inf in 5 tensor(s)" in text
    model = core_models.nan_midway(tmp_path / "log.onnx", "log")
    code, _, err = parity_invoke("debug", "localize", model, "--onnxrt", "--onnxrt", "--validate")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--validate" in err and "one runner" in err
    code, _, err = parity_invoke("debug", "localize", model, "--onnxrt", "--reference-model", clean, "--validate")
    assert code == 2 and "--reference-model" in err


def test_localize_validate_python_api(tmp_path):
    from parity_surgeon import localize

    model = core_models.nan_midway(tmp_path / "sqrt.onnx", "sqrt")
    result = localize(str(model), ["onnxrt"], validate=True, memory_budget=1)
    assert result.first.node == "culprit" and result.nonfinite.inputs[0].name == "c"
    assert result.pair_runs == 3  # a, c, bad (one per batch); c's values come from the segment that computed bad, which was fed c


# --- real models ---------------------------------------------------------------------------------------------


def _three(parity_invoke, tmp_path, model, budget, *data_args):
    """(exit code, tensor, node) from mark all, localize batches with a budget just above the model's baseline
    (several batches), and localize bisect."""
    code, found = _run_answer(parity_invoke, tmp_path, model, *data_args)
    answers = {"mark all": (code, found["first"], found["node"])}
    for name, args in (("batches", ("--memory-budget", budget)), ("bisect", ("--mode", "bisect"))):
        code, found, _ = _localize_answer(parity_invoke, tmp_path, model, *data_args, *args)
        answers[name] = (code, found["first"], found["node"])
        if found["first"] is not None:
            computed = [s for s in found["inputs"] if s["source"] != "constant"]
            assert computed and all(s["nan"] == 0 and s["inf"] == 0 for s in computed), found["inputs"]
            assert found["output"]["nan"] + found["output"]["inf"] > 0
    return answers


@pytest.mark.corpus
def test_ppocr_det_with_an_overflowing_weight(corpus_model, parity_invoke, tmp_path):
    """One Conv's weights set to 3e38 in the middle of the model: that Conv makes the first Inf; the
    untouched model has none (exit 0 everywhere)."""
    src = corpus_model("ppocr_det")
    model = onnx.load(src)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    target = convs[len(convs) // 2]
    (weight,) = [n for n in model.graph.node if n.op_type == "Constant" and n.output[0] == target.input[1]]
    value = numpy_helper.to_array(weight.attribute[0].t)
    weight.attribute[0].t.CopyFrom(numpy_helper.from_array(np.full_like(value, 3e38), target.input[1]))
    edited = tmp_path / "det_inf.onnx"
    onnx.save(model, edited)
    shapes = ("--input-shapes", "x:[1,3,64,64]")
    answers = _three(parity_invoke, tmp_path, edited, "205M", *shapes)  # 4 batches to reach it
    assert set(answers.values()) == {(1, target.output[0], target.name)}, answers
    assert set(_three(parity_invoke, tmp_path, src, "205M", *shapes).values()) == {(0, None, None)}


@pytest.mark.corpus
def test_ppocr_det_fp16_with_inputs_scaled_past_its_range(corpus_model, parity_invoke, tmp_path):
    """The fp16 conversion fed inputs up to 60000 (within fp16) overflows inside: run and localize agree."""
    half = tmp_path / "det16.onnx"
    code, text, err = parity_invoke("convert", "--fp-to-fp16", "--keep-io-types", corpus_model("ppocr_det"), "-o", half)
    assert code == 0, text + err
    answers = _three(parity_invoke, tmp_path, half, "203M", "--input-shapes", "x:[1,3,64,64]", "--val-range", "x:[0,60000]")
    assert len(set(answers.values())) == 1 and answers["mark all"][0] == 1 and answers["mark all"][2], answers
