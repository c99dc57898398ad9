"""Polygraphy's comparison functions on ``parity run`` (``--compare l2 cosine_similarity distance_metrics
quality_metrics perceptual_metrics`` and their threshold flags), ``--save-accuracy-results`` and ``parity check
accuracy``: onnxruntime's outputs of a model built here against golden outputs the test perturbs, each metric's
value checked against NumPy's computation, and the exit codes 0 (passed), 1 (failed), 2 (refused)."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from parity import IterationResult, RunResults, save_inputs, save_results
from parity.api import UsageError
from parity.testing import invoke

SHAPE = (1, 3, 8, 8)


def _model(path) -> None:
    """y = 2x, z = Relu(x - 0.5): two outputs, so per-output thresholds can differ."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, SHAPE)
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    nodes = [helper.make_node("Mul", ["x", "two"], ["y"]), helper.make_node("Sub", ["x", "half"], ["d"]), helper.make_node("Relu", ["d"], ["z"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y, z], [two, half]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """The model, two iterations of inputs, and golden outputs: y off by ~1e-3 noise, z off by ~1e-1."""
    tmp = tmp_path_factory.mktemp("compare_funcs")
    _model(tmp / "m.onnx")
    rng = np.random.default_rng(7)
    feeds = [{"x": rng.uniform(0, 1, SHAPE).astype(np.float32)} for _ in range(2)]
    actual = [{"y": 2 * f["x"], "z": np.maximum(f["x"] - 0.5, 0)} for f in feeds]
    golden = [{"y": a["y"] + rng.normal(0, 1e-3, SHAPE).astype(np.float32), "z": a["z"] + rng.normal(0, 1e-1, SHAPE).astype(np.float32)} for a in actual]
    save_inputs(feeds, tmp / "in.npz")
    save_results(RunResults([("golden", [IterationResult(g, runner_name="golden") for g in golden])]), tmp / "golden.npz")
    return {"tmp": tmp, "model": str(tmp / "m.onnx"), "inputs": str(tmp / "in.npz"), "golden": str(tmp / "golden.npz"), "actual": actual, "reference": golden}


def text(result) -> str:
    return result.stdout + result.stderr


def run(case, *args: str):
    return invoke("run", case["model"], "--onnxrt", "--load-inputs", case["inputs"], "--load-outputs", case["golden"], *args)


def expected(case, it: int, out: str) -> dict[str, float]:
    """Polygraphy's definitions in NumPy: out0 is the first runner's output (onnxruntime), out1 the golden one."""
    a = case["actual"][it][out].astype(np.float64)
    b = case["reference"][it][out].astype(np.float64)
    mse = np.mean((a - b) ** 2)
    return {
        "l2_norm": float(np.sqrt(np.sum((a - b) ** 2))),
        "cosine_similarity": float(np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b))),
        "psnr": float(20 * np.log10(a.max()) - 10 * np.log10(mse)),
        "snr": float(10 * np.log10(np.mean(a**2) / mse)),
    }


def saved(path) -> dict[str, list]:
    """``{field: [per iteration {output: value}]}`` of a saved accuracy results file."""
    data = json.loads(path.read_text())
    assert data["polygraphy_class"] == "AccuracyResults"
    out: dict[str, list] = {}
    for result in data["lst"]:
        (pair, iterations), = result["lst"]
        for it in iterations:
            for name, record in it.items():
                field = next(k for k in record if k not in ("thresholds", "polygraphy_class", "passed"))
                out.setdefault(field, [{} for _ in iterations])[iterations.index(it)][name] = record[field]
    return out


def test_metric_values_match_numpy_and_are_saved(case):
    path = case["tmp"] / "acc.json"
    result = run(case, "--compare", "distance_metrics", "quality_metrics", "--l2-threshold", "100", "--cosine-similarity-threshold", "0",
                 "--psnr-threshold", "0", "--snr-threshold", "0", "--save-accuracy-results", str(path))  # fmt: skip
    assert result.exit_code == 0, text(result)
    values = saved(path)
    assert sorted(values) == ["cosine_similarity", "l2_norm", "psnr", "snr"]  # an alias saves each of its functions
    for it in range(2):
        for out in ("y", "z"):
            want = expected(case, it, out)
            for field, value in want.items():
                assert values[field][it][out] == pytest.approx(value, rel=1e-5), (field, it, out)


@pytest.mark.parametrize(
    ("metric", "flag", "field", "passes"),
    [
        ("l2", "--l2-threshold", "l2_norm", lambda value: value * 1.01),
        ("l2", "--l2-tolerance", "l2_norm", lambda value: value * 1.01),
        ("cosine_similarity", "--cosine-similarity-threshold", "cosine_similarity", lambda value: value - 1e-6),
        ("quality_metrics", "--snr-threshold", "snr", lambda value: value - 0.01),
        ("quality_metrics", "--psnr-tolerance", "psnr", lambda value: value - 0.01),
    ],
)
def test_threshold_decides_exit_code(case, metric, flag, field, passes):
    """The worst output of the worst iteration sits just inside the threshold (exit 0) or just outside (exit 1)."""
    values = [expected(case, it, out)[field] for it in range(2) for out in ("y", "z")]
    worst = min(values) if field != "l2_norm" else max(values)
    other = ["--psnr-threshold", "-1000"] if flag.startswith("--snr") else ["--snr-threshold", "-1000"] if metric == "quality_metrics" else []
    good = run(case, "--compare", metric, flag, repr(passes(worst)), *other)
    assert good.exit_code == 0, text(good)
    bad_limit = worst * 0.99 if field == "l2_norm" else worst + (1e-6 if field == "cosine_similarity" else 0.01)
    bad = run(case, "--compare", metric, flag, repr(bad_limit), *other)
    assert bad.exit_code == 1, text(bad)
    assert "mismatched outputs" in text(bad)


def test_per_output_threshold(case):
    """z is noisier than y: a default threshold y passes and a z: entry that lets z pass too."""
    l2 = {out: max(expected(case, it, out)["l2_norm"] for it in range(2)) for out in ("y", "z")}
    assert run(case, "--compare", "l2", "--l2-threshold", repr(l2["y"] * 1.01)).exit_code == 1
    result = run(case, "--compare", "l2", "--l2-threshold", repr(l2["y"] * 1.01), f"z:{l2['z'] * 1.01!r}")
    assert result.exit_code == 0, text(result)
    typo = run(case, "--compare", "l2", "--l2-threshold", "1", "zz:2")
    assert typo.exit_code == 2 and "zz" in text(typo)


def test_check_average(case):
    """--check-average judges the mean of the iterations: a threshold between the mean and the worst passes."""
    values = [max(expected(case, it, out)["l2_norm"] for out in ("y", "z")) for it in range(2)]
    mean_z = sum(expected(case, it, "z")["l2_norm"] for it in range(2)) / 2
    limit = (mean_z + max(values)) / 2
    assert mean_z < limit < max(values)
    assert run(case, "--compare", "l2", "--l2-threshold", repr(limit)).exit_code == 1
    result = run(case, "--compare", "l2", "--l2-threshold", repr(limit), "--check-average")
    assert result.exit_code == 0, text(result)


def test_threshold_flag_of_an_unchosen_metric_is_refused(case):
    result = run(case, "--l2-threshold", "1")
    assert result.exit_code == 2
    assert "--l2-threshold" in text(result) and "l2" in text(result)
    assert run(case, "--compare", "quality_metrics", "--l2-threshold", "1").exit_code == 2


def test_perceptual_metrics_without_lpips_is_refused_in_one_line(case):
    pytest.importorskip("torch")
    try:
        import lpips  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("lpips is installed: the refusal is for machines without it")
    result = run(case, "--compare", "perceptual_metrics", "--lpips-threshold", "0.2")
    assert result.exit_code == 2
    lines = [line for line in text(result).splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install torch lpips" in lines[0] and "Traceback" not in text(result)


def test_lpips_image_preparation():
    """Polygraphy's layout handling before LPIPS: HWC -> NCHW, 0..255 -> [-1, 1], one channel -> three."""
    from parity_polygraphy.cli_metrics import as_lpips_image

    hwc = np.full((4, 5, 1), 255, dtype=np.uint8)
    out = as_lpips_image(hwc)
    assert out.shape == (1, 3, 4, 5) and np.allclose(out, 1.0)
    nchw = np.zeros((2, 3, 4, 4), dtype=np.float32)
    assert as_lpips_image(nchw).shape == (2, 3, 4, 4) and np.allclose(as_lpips_image(nchw), -1.0)


def test_no_shape_check_reshapes_like_polygraphy():
    """check_shapes=False: the reference is reshaped (same size) or its axes permuted before measuring."""
    from parity_polygraphy.cli_metrics import make

    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    strict, loose = make("l2", {}), make("l2", {"no_shape_check": True})
    assert not strict("y", a, a.T).passed and "shape" in strict("y", a, a.T).message
    check = loose("y", a, a.reshape(4, 3))
    assert check.passed and check.values["l2_norm"] == 0.0


def test_nan_fails_cosine_similarity():
    """A NaN in an output gives a NaN similarity that fails; before, the clamp into [-1, 1] made it 1.0 (a pass)."""
    from parity_polygraphy.cli_metrics import make
    from parity_polygraphy.comparator.compare import _cosine

    a, b = np.array([1.0, np.nan, 2.0]), np.array([1.0, 1.0, 2.0])
    assert math.isnan(_cosine(a, b))
    assert not make("cosine_similarity", {})("y", a, b).passed


# --- check accuracy ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def accuracy(case):
    path = case["tmp"] / "saved.json"
    result = run(case, "--compare", "l2", "quality_metrics", "simple", "--check-error-stat", "max", "--atol", "1", "--psnr-threshold", "0", "--snr-threshold", "0",
                 "--l2-threshold", "100", "--save-accuracy-results", str(path))  # fmt: skip
    assert result.exit_code == 0, text(result)
    return path


def test_check_accuracy_rechecks_saved_metrics(case, accuracy):
    worst = max(expected(case, it, out)["l2_norm"] for it in range(2) for out in ("y", "z"))
    good = invoke("check", "accuracy", str(accuracy), "--compare", "l2", "--l2-threshold", repr(worst * 1.01))
    assert good.exit_code == 0, text(good)
    assert "Passed: 2/2 iterations" in text(good)
    bad = invoke("check", "accuracy", str(accuracy), "--compare", "l2", "--l2-threshold", repr(worst * 0.99))
    assert bad.exit_code == 1 and "Passed: 1/2 iterations" in text(bad)  # the worst output is in one iteration
    snr = min(expected(case, it, out)["snr"] for it in range(2) for out in ("y", "z"))
    assert invoke("check", "accuracy", str(accuracy), "--compare", "quality_metrics", "--snr-threshold", repr(snr - 0.01), "--psnr-threshold", "0").exit_code == 0
    assert invoke("check", "accuracy", str(accuracy), "--compare", "quality_metrics", "--snr-threshold", repr(snr + 0.01), "--psnr-threshold", "0").exit_code == 1


def test_check_accuracy_simple_statistic_and_average(case, accuracy):
    max_abs = [max(float(np.max(np.abs(case["actual"][it][o] - case["reference"][it][o]))) for o in ("z",)) for it in range(2)]
    between = sum(max_abs) / 2 * 1.001  # above the average, below the worse iteration
    assert min(max_abs) < between < max(max_abs)
    args = ("check", "accuracy", str(accuracy), "--compare", "simple", "--check-error-stat", "max", "--rtol", "-1", "--atol", "y:1", repr(between))
    assert invoke(*args).exit_code == 1
    result = invoke(*args, "--check-average")
    assert result.exit_code == 0, text(result)
    assert "Passed: 2/2 outputs" in text(result)


def test_check_accuracy_save_writes_new_thresholds(case, accuracy):
    out = case["tmp"] / "rechecked.json"
    result = invoke("check", "accuracy", str(accuracy), "--compare", "l2", "--l2-threshold", "7", "--save-accuracy-results", str(out))
    assert result.exit_code == 0, text(result)
    data = json.loads(out.read_text())
    assert len(data["lst"]) == 1  # only the re-checked comparison
    record = data["lst"][0]["lst"][0][1][0]["y"]
    assert record["thresholds"] == {"threshold": 7.0, "polygraphy_class": "L2Threshold"}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--compare", "simple"), "elemwise"),
        (("--compare", "cosine_similarity"), "holds no cosine_similarity results"),
        (("--compare", "indices"), "cannot be re-checked"),
        (("--compare", "l2", "--no-shape-check"), "--no-shape-check"),
        (("--compare", "l2", "--l2-threshold", "big"), "--l2-threshold"),
    ],
)
def test_check_accuracy_refusals(accuracy, args, words):
    result = invoke("check", "accuracy", str(accuracy), *args)
    assert result.exit_code == 2
    assert words in text(result) and "Traceback" not in text(result)


def test_check_accuracy_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"lst\": 3}")
    result = invoke("check", "accuracy", str(bad), "--compare", "l2")
    assert result.exit_code == 2 and str(bad) in text(result) and "not an accuracy results file" in text(result)
    missing = invoke("check", "accuracy", str(tmp_path / "none.json"))
    assert missing.exit_code == 2 and "no such file" in text(missing)


def test_polygraphy_reads_parity_results_and_parity_reads_polygraphy(case, accuracy, tmp_path):
    """The file is Polygraphy's format both ways: its AccuracyResults loads ours and re-checks it; ours reads its."""
    comparator = pytest.importorskip("polygraphy.comparator")
    from polygraphy.comparator.compare import L2Threshold

    loaded = comparator.AccuracyResults.load(str(accuracy))
    worst = max(expected(case, it, out)["l2_norm"] for it in range(2) for out in ("y", "z"))
    assert bool(loaded.reevaluate([L2Threshold(worst * 1.01)])) is True
    loaded = comparator.AccuracyResults.load(str(accuracy))
    assert bool(loaded.reevaluate([L2Threshold(worst * 0.99)])) is False
    theirs = tmp_path / "theirs.json"
    comparator.AccuracyResults.load(str(accuracy)).save(str(theirs))
    assert invoke("check", "accuracy", str(theirs), "--compare", "l2", "--l2-threshold", repr(worst * 1.01)).exit_code == 0
    assert invoke("check", "accuracy", str(theirs), "--compare", "l2", "--l2-threshold", repr(worst * 0.99)).exit_code == 1


def test_python_api_builds_the_same_metrics():
    """Parity's CompareFunc.<name>(...) builds the registered metric with Polygraphy's keyword arguments."""
    from parity import CompareFunc

    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.5])
    l2 = CompareFunc.l2(l2_threshold=0.6)("y", a, b)
    assert l2.passed and l2.values["l2_norm"] == pytest.approx(0.5)
    both = CompareFunc.distance_metrics(l2_tolerance=0.4, cosine_similarity_threshold=0.9)("y", a, b)
    assert not both.passed and "L2 Norm" in both.message and "Cosine" not in both.message


CORPUS_DET = Path("/root/.cache/parity-corpus/models/ppocr_det.onnx")


@pytest.mark.skipif(not CORPUS_DET.is_file(), reason="corpus model ppocr_det.onnx is not downloaded")
def test_corpus_text_detector_quality_metrics(tmp_path):
    """A real model (PaddleOCR's text detector, an image-like probability map): onnxruntime with and without graph
    optimizations; the saved PSNR/SNR/L2/cosine equal NumPy's on the saved outputs, and check accuracy re-checks them."""
    from parity import load_results

    acc, outs = tmp_path / "acc.json", tmp_path / "outs.npz"
    # on random images the map is ~1e-8 everywhere: the two sessions' tiny differences give a low cosine and SNR
    lenient = ("--l2-threshold", "1", "--cosine-similarity-threshold", "0", "--psnr-threshold", "0", "--snr-threshold", "-100")
    result = invoke("run", str(CORPUS_DET), "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--input-shapes", "x:[1,3,64,64]", "--iterations", "2",
                    "--compare", "quality_metrics", "distance_metrics", *lenient, "--save-outputs", str(outs), "--save-accuracy-results", str(acc))  # fmt: skip
    assert result.exit_code == 0, text(result)
    runs = load_results(outs)
    (_, first), (_, second) = list(runs)
    values = saved(acc)
    worst_psnr = math.inf
    for it in range(2):
        name = next(iter(first[it]))
        a, b = first[it][name].astype(np.float64), second[it][name].astype(np.float64)
        mse = np.mean((a - b) ** 2)
        psnr = math.inf if mse == 0 else 20 * np.log10(a.max()) - 10 * np.log10(mse)
        assert values["psnr"][it][name] == pytest.approx(psnr, rel=1e-6)
        assert values["l2_norm"][it][name] == pytest.approx(float(np.sqrt(np.sum((a - b) ** 2))), rel=1e-6, abs=1e-12)
        cosine = float(np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b)))
        assert values["cosine_similarity"][it][name] == pytest.approx(cosine, rel=1e-6)
        worst_psnr = min(worst_psnr, values["psnr"][it][name])
    if math.isfinite(worst_psnr):
        assert invoke("check", "accuracy", str(acc), "--compare", "quality_metrics", "--psnr-threshold", repr(worst_psnr + 1), "--snr-threshold", "0").exit_code == 1
    ok = invoke("check", "accuracy", str(acc), "--compare", "quality_metrics", "--psnr-threshold", repr(worst_psnr - 1), "--snr-threshold", "-100")
    assert ok.exit_code == 0, text(ok)


def test_save_accuracy_results_never_overwrites_an_input(case, tmp_path):
    before = Path(case["model"]).read_bytes()
    result = run(case, "--compare", "l2", "--l2-threshold", "100", "--save-accuracy-results", case["model"])
    assert result.exit_code == 2 and "--save-accuracy-results" in text(result)
    assert Path(case["model"]).read_bytes() == before
    folder = run(case, "--compare", "l2", "--l2-threshold", "100", "--save-accuracy-results", str(tmp_path))
    assert folder.exit_code == 2 and "Traceback" not in text(folder)
    failed = tmp_path / "failed.json"
    assert run(case, "--compare", "l2", "--save-accuracy-results", str(failed)).exit_code == 1
    assert saved(failed)["l2_norm"]  # a failing run's results are saved too: they are what check accuracy re-checks


def test_perceptual_metrics_plumbing_with_a_stand_in_network(monkeypatch):
    """perceptual_metrics on torch with a stand-in for the lpips package (its real network downloads weights): the
    images reach the network as Polygraphy prepares them, its score is checked against --lpips-threshold, and a
    network that cannot load is one line, never a pass."""
    pytest.importorskip("torch")

    seen = []

    class Net:
        def __init__(self, net="alex", version="0.1", verbose=True):
            assert (net, version) == ("alex", "0.1")

        def eval(self):
            return self

        def __call__(self, img0, img1):
            seen.append((tuple(img0.shape), float(img0.min()), float(img0.max())))
            return (img0 - img1).abs().mean(dim=(1, 2, 3), keepdim=True)

    monkeypatch.setitem(sys.modules, "lpips", types.SimpleNamespace(LPIPS=Net))
    from parity_polygraphy.cli_metrics import as_lpips_image, make_perceptual

    a = np.full((8, 8, 3), 255, dtype=np.uint8)
    b = a.copy()
    b[:4] = 0
    want = float(np.mean(np.abs(as_lpips_image(a) - as_lpips_image(b))))
    check = make_perceptual({"lpips_threshold": ("0.5",)})("img", a, b)
    assert seen[0] == ((1, 3, 8, 8), 1.0, 1.0)  # HWC 0..255 -> NCHW in [-1, 1]
    assert check.values["lpips"] == pytest.approx(want) and not check.passed  # 1.0 > 0.5
    assert make_perceptual({"lpips_threshold": (repr(want),)})("img", a, b).passed

    def broken(**kwargs):
        raise OSError("no network")

    monkeypatch.setitem(sys.modules, "lpips", types.SimpleNamespace(LPIPS=broken))
    with pytest.raises(UsageError, match="LPIPS network could not be loaded .*no network"):
        make_perceptual({})("img", a, b)


@pytest.mark.parametrize("metric", ["psnr", "snr"])
def test_psnr_and_snr_alone_are_polygraphys(case, metric):
    """--compare psnr/snr is Polygraphy's metric with its threshold flag (parity-metrics' own are psnr-db/snr-db)."""
    values = [expected(case, it, out)[metric] for it in range(2) for out in ("y", "z")]
    flag = f"--{metric}-threshold"
    assert run(case, "--compare", metric, flag, repr(min(values) - 0.01)).exit_code == 0
    assert run(case, "--compare", metric, flag, repr(max(values) + 1.0)).exit_code == 1
