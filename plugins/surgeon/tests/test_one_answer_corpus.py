"""One question, one answer: on trained models, ``parity run --onnx-outputs mark all``, ``parity debug localize``
(batches) and ``parity debug localize --mode bisect`` name the same first divergent node and exit alike.

The first divergence is defined once (``parity.compare.divergence.first_divergent``): the first tensor in the
model's topological order whose comparison fails, ``Constant`` outputs included.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.corpus


def _three_answers(parity_invoke, tmp_path, model, run_args, localize_args):
    """(exit code, first divergent tensor, its node) from mark all, batches and bisect, on the same inputs."""
    answers = {}
    report = tmp_path / "run.json"
    code, text, err = parity_invoke("run", model, *run_args, "--onnx-outputs", "mark", "all", "--report", report)
    assert code in (0, 1), text + err
    (layerwise,) = json.loads(report.read_text())["layerwise"]
    first = layerwise["first"]
    node = next((t["node"] for t in layerwise["tensors"] if t["name"] == first), None)
    answers["mark all"] = (code, first, node)
    for mode in ("batches", "bisect"):
        report = tmp_path / f"{mode}.json"
        code, text, err = parity_invoke("debug", "localize", model, *localize_args, "--mode", mode, "--report", report)
        assert code in (0, 1), text + err
        data = json.loads(report.read_text())
        div = data["divergence"]
        first = div["first"]
        node = next((t["node"] for t in div["tensors"] if t["name"] == first), None)
        answers[mode] = (code, first, node)
        if first is None:
            continue
        # every tensor before the first divergence that the search compared passed; the suspect's verdict
        # says "introduces" exactly when the node alone, on the reference's inputs, fails the tolerance
        assert all(t["passed"] for t in div["tensors"] if t["position"] < next(u["position"] for u in div["tensors"] if u["name"] == first))
        (suspect,) = [v for v in data["isolation"] if v["tensor"] == first]
        if suspect["own"] is not None and suspect["verdict"] in ("introduces", "propagates", "ok"):
            assert (suspect["verdict"] == "introduces") == (not suspect["own"]["passed"]), suspect
    return answers


def test_ppocr_det_fp16_one_answer(corpus_model, parity_invoke, tmp_path):
    """fp16 conversion vs the fp32 original: the golden outputs come from the fp32 model, the same inputs."""
    fp32 = corpus_model("ppocr_det")
    fp16 = tmp_path / "det16.onnx"
    code, text, err = parity_invoke("convert", "--fp-to-fp16", "--keep-io-types", fp32, "-o", fp16)
    assert code == 0, text + err
    inputs, golden = tmp_path / "in.npz", tmp_path / "golden.npz"
    shapes = ("--input-shapes", "x:[1,3,64,64]")
    code, text, err = parity_invoke("run", fp32, "--onnxrt", *shapes, "--onnx-outputs", "mark", "all", "--save-inputs", inputs, "--save-outputs", golden)
    assert code == 0, text + err
    tol = ("--tolerance-preset", "fp16")
    answers = _three_answers(
        parity_invoke, tmp_path, fp16,
        ("--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, *tol),
        ("--onnxrt", "--reference-model", fp32, "--load-inputs", inputs, *tol),
    )  # fmt: skip
    assert answers["mark all"][0] == 1, answers  # the fp16 output is off
    assert answers["batches"] == answers["mark all"] and answers["bisect"] == answers["mark all"], answers


def test_ppocr_rec_two_configs_one_answer(corpus_model, parity_invoke, tmp_path):
    """Two onnxruntime configurations: internal tensors differ while the softmax output matches; bisect must
    not call that PASSED after checking the output alone."""
    model = corpus_model("ppocr_rec")
    inputs = tmp_path / "in.npz"
    shapes = ("--input-shapes", "x:[1,3,48,64]")
    assert parity_invoke("run", model, "--onnxrt", *shapes, "--save-inputs", inputs)[0] == 0
    runners = ("--onnxrt", "--onnxrt=graph-optimization-level=disable", "--load-inputs", inputs)
    answers = _three_answers(parity_invoke, tmp_path, model, runners, runners)
    assert answers["batches"] == answers["mark all"] and answers["bisect"] == answers["mark all"], answers
    assert answers["mark all"][0] == 1 and answers["mark all"][1] is not None, answers
