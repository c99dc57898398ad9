"""parity-metrics as users meet it: the CLI on real runs (onnxruntime vs saved golden outputs) and the Python API."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from parity_metrics import PSNR, SNR, Cosine, RelativeL2, TopKAgreement

from parity.testing import CliResult, invoke

TINY_CNN = Path(__file__).resolve().parents[3] / "examples" / "models" / "tiny_cnn.onnx"
METRICS = ("cosine", "rel-l2", "snr-db", "psnr-db", "topk-agree")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Golden outputs of the shipped CNN, and a copy whose classifier weights are scaled by 1.02."""
    tmp = tmp_path_factory.mktemp("metrics")
    model = onnx.load(TINY_CNN)
    for init in model.graph.initializer:
        if init.name == "fc.w":
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.float32(1.02), "fc.w"))
    onnx.save(model, tmp / "drift.onnx")
    golden, inputs = tmp / "golden.npz", tmp / "inputs.npz"
    result = invoke("run", str(TINY_CNN), "--onnxrt", "--input-shapes", "x:[8,3,16,16]", "--save-inputs", str(inputs), "--save-outputs", str(golden))
    assert result.exit_code == 0, result.stderr
    return {"drift": str(tmp / "drift.onnx"), "golden": str(golden), "inputs": str(inputs), "tmp": tmp}


def compare_drift(runs, *args: str) -> tuple[CliResult, list[dict]]:
    report = runs["tmp"] / "report.json"
    report.unlink(missing_ok=True)
    result = invoke("run", runs["drift"], "--onnxrt", "--load-inputs", runs["inputs"], "--load-outputs", runs["golden"], "--report", str(report), *args)
    checks = json.loads(report.read_text())["comparisons"][0]["iterations"][0]["outputs"] if report.exists() else []
    return result, checks


def expected(runs) -> tuple[np.ndarray, np.ndarray]:
    from parity_onnxrt.api import OnnxrtRunner, SessionFromOnnx

    from parity import load_inputs, load_results

    golden = load_results(runs["golden"])
    reference = golden[0][0]["probs"].astype(np.float64)
    with OnnxrtRunner(SessionFromOnnx(runs["drift"])) as runner:
        actual = runner.infer(load_inputs(runs["inputs"])[0])["probs"].astype(np.float64)
    return actual, reference


def test_listed_with_options():
    result = invoke("plugins", "--json")
    row = next(r for r in json.loads(result.stdout) if r["distribution"] == "parity-metrics")
    assert row["status"] == "loaded" and sorted(row["registered"]["comparators"]) == sorted(METRICS)
    help_text = invoke("run", "--help").stdout
    for option in ("--cosine-min", "--rel-l2-max", "--snr-min", "--psnr-min", "--psnr-peak", "--topk-agree-k", "--topk-agree-min"):
        assert option in help_text


def test_values_match_their_definitions(runs):
    limits = ("--cosine-min", "0", "--rel-l2-max", "1", "--snr-min", "0", "--psnr-min", "0", "--topk-agree-min", "0")
    result, checks = compare_drift(runs, "--compare-func", *METRICS, *limits)
    assert result.exit_code == 0, result.stdout + result.stderr
    got = {c["metric"]: c["values"] for c in checks}
    a, b = expected(runs)
    assert got["cosine"]["similarity"] == pytest.approx(a.ravel() @ b.ravel() / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-9)
    assert got["rel-l2"]["error"] == pytest.approx(np.linalg.norm(a - b) / np.linalg.norm(b), rel=1e-6)
    noise = np.mean((a - b) ** 2)
    assert got["snr-db"]["db"] == pytest.approx(10 * math.log10(np.mean(b**2) / noise), rel=1e-6)
    assert got["psnr-db"]["db"] == pytest.approx(10 * math.log10(np.abs(b).max() ** 2 / noise), rel=1e-6)
    assert got["topk-agree"]["agreement"] == pytest.approx(np.mean(a.argmax(-1) == b.argmax(-1)))
    assert got["topk-agree"]["rows"] == 8


def test_thresholds_decide_the_verdict(runs):
    a, b = expected(runs)
    rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    assert 1e-4 < rel < 0.5, "the drifted model must drift measurably"
    result, _ = compare_drift(runs, "--compare-func", "rel-l2", "--rel-l2-max", f"{rel * 2:g}")
    assert result.exit_code == 0 and "rel-l2 error=" in result.stdout
    result, checks = compare_drift(runs, "--compare-func", "rel-l2", "--rel-l2-max", f"{rel / 2:g}")
    assert result.exit_code == 1, result.stdout
    assert "is not <= --rel-l2-max" in result.stdout and checks[0]["thresholds"] == {"max": pytest.approx(rel / 2, rel=1e-5)}
    # per-output thresholds, like --atol: the named output's value wins over the default
    result, checks = compare_drift(runs, "--compare-func", "rel-l2", "--rel-l2-max", f"{rel / 2:g}", f"probs:{rel * 2:g}")
    assert result.exit_code == 0 and checks[0]["thresholds"]["max"] == pytest.approx(rel * 2, rel=1e-5)


def test_several_metrics_must_all_pass(runs):
    result, checks = compare_drift(runs, "--compare-func", "cosine", "snr-db", "--cosine-min", "0.5", "--snr-min", "300")
    assert result.exit_code == 1
    assert [(c["metric"], c["passed"]) for c in checks] == [("cosine", True), ("snr-db", False)]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--compare-func", "cosine", "--cosine-min", "1.5"), "--cosine-min must be in [-1, 1]"),
        (("--compare-func", "snr-db", "--snr-min", "loud"), "--snr-min: cannot read 'loud'"),
        (("--compare-func", "topk-agree", "--topk-agree-k", "0"), "--topk-agree-k must be >= 1"),
        (("--compare-func", "psnr-db", "--psnr-peak", "-1"), "--psnr-peak must be > 0"),
        (("--compare-func", "cosin"), "unknown comparison function 'cosin'"),
    ],
)
def test_bad_thresholds_are_one_line_usage_errors(runs, args, needle):
    result, _ = compare_drift(runs, *args)
    assert result.exit_code == 2, result.stdout + result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_python_api_by_name_and_by_object(runs):
    from parity_onnx_reference import EvaluatorFromOnnx, OnnxReferenceRunner

    from parity import Comparator, load_inputs, load_results
    from parity.results.model import RunResults

    results = Comparator.run([OnnxReferenceRunner(EvaluatorFromOnnx(runs["drift"]))], data_loader=load_inputs(runs["inputs"]))
    golden = load_results(runs["golden"])
    both = RunResults([*results.items(), *golden.items()])
    assert Comparator.compare_accuracy(both, compare_func="cosine")  # default threshold 0.999
    strict = Comparator.compare_accuracy(both, compare_func=[Cosine(min=0.999), SNR(min_db=500)])
    assert not strict
    checks = strict[0].iterations[0].checks
    assert [c.passed for c in checks] == [True, False] and checks[1].thresholds == {"min": 500}


def test_metric_edge_cases():
    zeros, ones = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    assert Cosine()("y", zeros, zeros).values["similarity"] == 1.0
    assert not Cosine()("y", zeros, ones).passed
    assert Cosine()("y", -ones, ones).values["similarity"] == -1.0
    assert RelativeL2()("y", zeros, zeros).passed and RelativeL2()("y", ones, zeros).values["error"] == math.inf
    assert SNR()("y", ones, ones).values["db"] == math.inf
    assert PSNR(peak=1.0)("y", ones + 0.1, ones).values["db"] == pytest.approx(20.0)
    nan = ones.copy()
    nan[0, 0] = np.nan
    check = Cosine()("y", nan, ones)
    assert not check.passed and "NaN/Inf: 1 in actual, 0 in reference" in check.message
    assert "shape [2, 3] != reference [3, 2]" in RelativeL2()("y", ones, ones.reshape(3, 2)).message
    logits = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.3, 0.3, 0.4]], np.float32)
    swapped = logits[:, [0, 2, 1]]  # rows 0 and 1 keep or lose their top class
    assert TopKAgreement(k=1, min=0.5)("y", swapped, logits).values["agreement"] == pytest.approx(np.mean(swapped.argmax(-1) == logits.argmax(-1)))
    assert TopKAgreement(k=3)("y", swapped, logits).passed  # the same set of 3 classes in every row
    per_output = Cosine(min={"": 0.999, "y": -1.0})
    assert per_output("y", -ones, ones).passed and not per_output("z", -ones, ones).passed
    with pytest.raises(ValueError, match="topk-agree-min"):
        TopKAgreement(min=1.5)


def test_check_average_averages_the_measured_value():
    """--check-average with a contrib metric: the similarity averaged over the iterations is judged once, and the
    data-set summary's worst similarity is the lowest."""
    from parity import Comparator
    from parity.api import IterationResult, RunResults

    reference = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    actuals = [reference, np.array([[1.0, 0.2], [0.0, 1.0], [1.0, 1.0]], np.float32), np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], np.float32)]
    results = RunResults([("a", [IterationResult({"y": x}) for x in actuals]), ("b", [IterationResult({"y": reference})] * 3)])
    sims = [float(x.ravel() @ reference.ravel() / (np.linalg.norm(x) * np.linalg.norm(reference))) for x in actuals]
    limit = (min(sims) + np.mean(sims)) / 2  # the worst iteration fails, the average passes
    assert not Comparator.compare_accuracy(results, Cosine(limit))
    (pair,) = Comparator.compare_accuracy(results, Cosine(limit), check_average=True)
    assert pair.passed and pair.average[0].values["similarity"] == pytest.approx(np.mean(sims))
    assert pair.dataset[0].worst["similarity"] == {"value": pytest.approx(min(sims)), "iteration": 2}
    (pair,) = Comparator.compare_accuracy(results, Cosine(float(np.mean(sims)) + 1e-3), check_average=True)
    assert not pair.passed and "average similarity" in pair.average[0].message
