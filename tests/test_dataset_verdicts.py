"""Data-set verdicts (issue 16): ``--check-average`` (Polygraphy's flag) and the data-set metrics of a run, on
a real model with several iterations: PP-OCR's direction classifier against its fp16 conversion, whose error
varies by orders of magnitude from one input to the next. Every number is checked against NumPy here."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import numpy as np
import pytest

from parity.results.model import RunResults

pytestmark = pytest.mark.corpus

SHAPE = ("--input-shapes", "x:[1,3,48,192]")
ITERATIONS = 8
TINY = np.finfo(np.float32).tiny


@pytest.fixture(scope="module")
def cls_runs(corpus_model, tmp_path_factory):
    """(folder, fp16 model, inputs, golden): ppocr_cls (fp32) run on 8 random inputs, and its fp16 conversion."""
    from parity.testing import invoke

    folder = tmp_path_factory.mktemp("cls")
    model16, inputs, golden = folder / "cls16.onnx", folder / "in.npz", folder / "golden.npz"
    model = corpus_model("ppocr_cls")
    assert invoke("convert", "--fp-to-fp16", model, "-o", model16).exit_code == 0
    result = invoke("run", model, "--onnxrt", *SHAPE, "--iterations", str(ITERATIONS), "--save-inputs", inputs, "--save-outputs", golden)
    assert result.exit_code == 0, result
    return folder, model16, inputs, golden


def errors(actual: RunResults, golden: RunResults) -> tuple[str, np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Per iteration, computed here: max abs error, max rel error, and both outputs (float64)."""
    ((_, a_iters),) = actual.items()
    ((_, b_iters),) = golden.items()
    (name,) = list(a_iters[0])
    a = [np.asarray(it[name], np.float64) for it in a_iters]
    b = [np.asarray(it[name], np.float64) for it in b_iters]
    max_abs = np.array([np.abs(x - y).max() for x, y in zip(a, b)])
    max_rel = np.array([(np.abs(x - y) / np.maximum(np.abs(y), TINY)).max() for x, y in zip(a, b)])
    return name, max_abs, max_rel, a, b


def run16(parity_invoke, cls_runs, *args):
    folder, model16, inputs, golden = cls_runs
    return parity_invoke("run", model16, "--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, *args)


def test_the_average_passes_where_an_iteration_fails_and_the_numbers_are_numpys(cls_runs, parity_invoke, tmp_path):
    folder, _, _, golden = cls_runs
    out16, report = tmp_path / "out16.npz", tmp_path / "report.json"
    code, _, err = run16(parity_invoke, cls_runs, "--check-error-stat", "max", "--atol", "1", "--save-outputs", out16)
    assert code == 0, err
    name, max_abs, max_rel, a, b = errors(RunResults.load(out16), RunResults.load(golden))
    assert max_abs.max() > 2 * max_abs.mean() > 0  # the data set this test needs: one input much worse than the average
    # an atol between the mean of the iterations' max errors and the worst one (rtol 0: the abs error decides)
    atol = float((max_abs.mean() + max_abs.max()) / 2)
    tolerances = ("--check-error-stat", "max", "--atol", f"{atol!r}", "--rtol", "0")

    code, out, _ = run16(parity_invoke, cls_runs, *tolerances)
    assert code == 1 and f"data set, {ITERATIONS} iteration(s)" in out  # per iteration: the worst input fails

    code, out, err = run16(parity_invoke, cls_runs, *tolerances, "--check-average", "--report", report)
    assert code == 0, out + err
    assert f"average of {ITERATIONS} iteration(s) (--check-average): PASSED" in out
    assert f"PASSED | {ITERATIONS} iteration(s), judged on their average (--check-average)" in out
    assert "(per iteration; --check-average judges the average)" in out
    data = json.loads(report.read_text())
    (pair,) = data["comparisons"]
    assert pair["aggregation"] == "average" and pair["passed"] and data["passed"] and data["exit_code"] == 0
    assert not all(it["passed"] for it in pair["iterations"])  # some iteration failed; the average decided
    (averaged,) = pair["average"]["outputs"]
    assert pair["average"]["iterations"] == ITERATIONS and averaged["passed"] and averaged["thresholds"]["atol"] == pytest.approx(atol)
    np.testing.assert_allclose(averaged["values"]["max_abs"], max_abs.mean(), rtol=1e-6)
    np.testing.assert_allclose(averaged["values"]["max_rel"], max_rel.mean(), rtol=1e-5)

    (entry,) = pair["dataset"]
    assert (entry["output"], entry["metric"], entry["iterations"]) == (name, "simple", ITERATIONS)
    assert entry["passed_iterations"] == int((max_abs <= atol).sum()) < ITERATIONS
    np.testing.assert_allclose(entry["mean"]["max_abs"], max_abs.mean(), rtol=1e-6)
    assert entry["worst"]["max_abs"]["iteration"] == int(max_abs.argmax())
    np.testing.assert_allclose(entry["worst"]["max_abs"]["value"], max_abs.max(), rtol=1e-6)
    np.testing.assert_allclose(entry["worst"]["max_rel"]["value"], max_rel.max(), rtol=1e-5)
    cosines = [float(x.ravel() @ y.ravel() / (np.linalg.norm(x) * np.linalg.norm(y))) for x, y in zip(a, b)]
    np.testing.assert_allclose(entry["mean"]["cosine"], np.mean(cosines), rtol=1e-9)
    assert entry["worst"]["cosine"]["iteration"] == int(np.argmin(cosines))  # the worst cosine is the lowest
    schema = json.loads(resources.files("parity").joinpath("schemas", "run-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)

    # a tolerance under the average fails the average, saying by how much
    below = ("--check-error-stat", "max", "--atol", f"{float(max_abs.mean() * 0.9)!r}", "--rtol", "0", "--check-average")
    code, out, _ = run16(parity_invoke, cls_runs, *below)
    assert code == 1 and f"average max error over {ITERATIONS} iterations abs={max_abs.mean():.4g} >" in out
    assert "(averaged over the iterations)" in out.splitlines()[-1]


def test_the_python_api_judges_the_average_too(cls_runs, tmp_path, parity_invoke):
    from parity import Comparator, CompareFunc

    folder, _, _, golden = cls_runs
    out16 = tmp_path / "out16.npz"
    assert run16(parity_invoke, cls_runs, "--atol", "1", "--save-outputs", out16)[0] == 0
    results = RunResults.load(out16)
    results.extend(RunResults.load(golden), prefix="golden:")
    _, max_abs, _, _, _ = errors(RunResults.load(out16), RunResults.load(golden))
    func = CompareFunc.simple(check_error_stat="max", atol=float((max_abs.mean() + max_abs.max()) / 2), rtol=0)
    assert not Comparator.compare_accuracy(results, func)
    accuracy = Comparator.compare_accuracy(results, func, check_average=True)
    assert accuracy and accuracy[0].aggregation == "average" and accuracy[0].average[0].passed
    np.testing.assert_allclose(accuracy[0].dataset[0].mean["max_abs"], max_abs.mean(), rtol=1e-6)


def test_top_k_agreement_over_the_data_set(cls_runs, parity_invoke, tmp_path):
    out16, report = tmp_path / "out16.npz", tmp_path / "report.json"
    code, out, err = run16(parity_invoke, cls_runs, "--compare-func", "indices", "--save-outputs", out16, "--report", report)
    _, _, _, a, b = errors(RunResults.load(out16), RunResults.load(cls_runs[3]))
    rows = [(x.reshape(-1, x.shape[-1]).argmax(-1) == y.reshape(-1, y.shape[-1]).argmax(-1)) for x, y in zip(a, b)]
    agreeing, total = int(sum(r.sum() for r in rows)), sum(r.size for r in rows)
    assert code == (0 if agreeing == total else 1), err
    (entry,) = json.loads(report.read_text())["comparisons"][0]["dataset"]
    assert entry["metric"] == "indices"
    assert entry["values"] == {"agreement": agreeing / total, "rows": total, "agreeing_rows": agreeing, "top_k": 1}
    assert f"top-1 agreement {agreeing / total:.4g} over {total} rows ({agreeing} agree)" in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "--check-average: the simple metric checks each element (--check-error-stat elemwise, the default)"),
        (("--check-error-stat", "y:max"), "--check-error-stat elemwise, the default"),
        (("--compare-func", "indices"), "--check-average: the indices metric has no averaged verdict"),
        (("--check-error-stat", "mean", "--fail-fast"), "cannot be combined with --fail-fast"),
    ],
)
def test_what_cannot_be_averaged_is_refused_before_any_work(cls_runs, parity_invoke, tmp_path, args, expected):
    code, _, err = run16(parity_invoke, cls_runs, "--check-average", *args, "--save-outputs", tmp_path / "o.npz", "--report", tmp_path / "r.json")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and expected in lines[0], err
    assert list(tmp_path.iterdir()) == []
