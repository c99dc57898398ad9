"""Polygraphy's picture flags (issue 16): ``--save-heatmaps`` / ``--show-heatmaps`` and ``--save-error-metrics-plot``
/ ``--show-error-metrics-plot``, drawn with matplotlib (the optional extra ``parity[plots]``)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
pytest.importorskip("matplotlib.image")  # imread: the heatmaps are no longer drawn by matplotlib, which imported it

ROOT = Path(__file__).resolve().parents[3]  # the repository
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"  # x [N,3,16,16] -> conv, relu [N,8,16,16] -> pool [N,8,1,1] -> flat, logits, probs [N,10]
TWO = ("--onnxrt", "--onnxrt=graph-optimization-level=disable")
SHAPES = ("--input-shapes", "x:[2,3,16,16]")
FLAGS = {"--save-heatmaps": ("maps",), "--show-heatmaps": (), "--save-error-metrics-plot": ("plots",), "--show-error-metrics-plot": ()}


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    assert data[-8:-4] == b"IEND", f"{path}: truncated"
    return struct.unpack(">II", data[16:24])


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("parity: error: ") and "Traceback" not in err, err
    return lines[0]


def test_heatmaps_of_every_image_like_tensor_and_iteration(parity_invoke, tmp_path):
    maps = tmp_path / "maps"
    code, out, err = parity_invoke("run", TINY, *TWO, *SHAPES, "--onnx-outputs", "mark", "all", "--iterations", "2", "--save-heatmaps", maps)
    assert code == 0, err
    names = sorted(p.name for p in maps.iterdir())
    # conv/relu are NCHW (16 planes tiled), pool NCHW 1x1, flat/logits/probs 2-D: 6 tensors x 2 iterations
    assert names == sorted(f"onnxrt-0_vs_onnxrt-1_{t}_iter{i}.png" for t in ("conv", "relu", "pool", "flat", "logits", "probs") for i in (0, 1))
    assert f"wrote 12 PNG file(s) to {maps}" in out
    for path in maps.iterdir():
        width, height = png_size(path)
        assert width == 1250 and 270 <= height <= 1020, (path.name, width, height)  # two 5.5in panels at 100 dpi
        assert path.stat().st_mode & 0o777 == 0o666 & ~current_umask()
    pixels = matplotlib.image.imread(maps / "onnxrt-0_vs_onnxrt-1_relu_iter0.png")
    assert pixels.ndim == 3 and pixels.std() > 0.01  # a picture, not a blank page
    assert not [p for p in maps.iterdir() if p.name.startswith(".")]  # no temporary left behind


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_outputs_that_are_not_images_are_named_in_a_warning(parity_invoke, tmp_path, build_relu_1d):
    code, _, err = parity_invoke("run", build_relu_1d, *TWO, "--save-heatmaps", tmp_path / "maps")
    assert code == 0
    assert "no heatmap for y: only 2-D and 4-D (NCHW) outputs are drawn (y: 1-D [4]); no heatmap was drawn" in err
    assert not (tmp_path / "maps").exists()  # nothing to write: no folder made


@pytest.fixture()
def build_relu_1d(tmp_path):
    from onnx import TensorProto, helper

    from parity.testing import save_model

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in "xy")
    return save_model(tmp_path / "relu1d.onnx", [helper.make_node("Relu", ["x"], ["y"])], [x], [y])


def test_error_metrics_over_the_iterations(parity_invoke, tmp_path):
    plots, report = tmp_path / "plots", tmp_path / "r.json"
    code, out, err = parity_invoke(
        "run", TINY, *TWO, *SHAPES, "--iterations", "3", "--compare-func", "simple", "indices", "--save-error-metrics-plot", plots, "--report", report
    )
    assert code == 0, err
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["onnxrt-0_vs_onnxrt-1_probs_indices_error_metrics.png", "onnxrt-0_vs_onnxrt-1_probs_simple_error_metrics.png"]
    assert png_size(plots / names[1]) == (1200, 420) and png_size(plots / names[0]) == (650, 420)


def test_golden_runs_are_drawn_too(parity_invoke, tmp_path):
    golden = tmp_path / "golden.npz"
    assert parity_invoke("run", TINY, "--onnxrt", *SHAPES, "--iterations", "2", "--save-outputs", golden)[0] == 0
    code, out, err = parity_invoke("run", "--load-outputs", golden, golden, "--save-heatmaps", tmp_path / "maps", "--save-error-metrics-plot", tmp_path / "m")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "maps").iterdir()) == [f"golden.npz_onnxrt-0_vs_golden.npz_onnxrt-0~1_probs_iter{i}.png" for i in (0, 1)]
    assert len(list((tmp_path / "m").iterdir())) == 1


@pytest.mark.parametrize("flag", sorted(FLAGS))
def test_without_matplotlib_one_line_names_the_extra(parity_invoke, tmp_path, monkeypatch, flag):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed: import raises ImportError
    args = [tmp_path / a for a in FLAGS[flag]]
    code, _, err = parity_invoke("run", TINY, "--onnxrt", *SHAPES, flag, *args, "--save-outputs", tmp_path / "o.npz")
    assert code == 2, err
    assert one_error_line(err) == f'parity: error: {flag} draws with matplotlib, which is not installed: pip install "parity[plots]"'
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_a_file_is_refused_before_any_work(parity_invoke, tmp_path):
    (tmp_path / "maps").write_text("mine")
    code, _, err = parity_invoke("run", TINY, "--onnxrt", *SHAPES, "--save-heatmaps", tmp_path / "maps", "--save-outputs", tmp_path / "o.npz")
    assert code == 2 and f"--save-heatmaps: {tmp_path / 'maps'} is not a folder" in one_error_line(err)
    assert (tmp_path / "maps").read_text() == "mine" and not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("flag", ["--show-heatmaps", "--show-error-metrics-plot"])
def test_showing_without_a_display_is_refused(parity_invoke, tmp_path, monkeypatch, flag):
    monkeypatch.setattr("parity_reports.plots.display_available", lambda: False)
    code, _, err = parity_invoke("run", TINY, "--onnxrt", *SHAPES, flag)
    save = flag.replace("--show-", "--save-")
    assert code == 2 and one_error_line(err).endswith(f"{flag}: no display to show figures on ($DISPLAY is not set); write them to files with {save} DIR")
    monkeypatch.setattr("parity_reports.plots.display_available", lambda: True)
    monkeypatch.setattr(matplotlib, "get_backend", lambda: "agg")
    code, _, err = parity_invoke("run", TINY, "--onnxrt", *SHAPES, flag)
    assert code == 2 and "matplotlib's backend 'agg' cannot show figures" in one_error_line(err)


def test_showing_shows_each_figure_and_writes_nothing(parity_invoke, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    plt.switch_backend("agg")
    shown = []
    monkeypatch.setattr("parity_reports.plots.display_available", lambda: True)
    monkeypatch.setattr(matplotlib, "get_backend", lambda: "tkagg")  # as on a desktop
    monkeypatch.setattr(plt, "show", lambda: shown.append(list(plt.get_fignums())))
    monkeypatch.chdir(tmp_path)
    code, _, err = parity_invoke("run", TINY, *TWO, *SHAPES, "--iterations", "2", "--show-heatmaps", "--show-error-metrics-plot")
    assert code == 0, err
    assert len(shown) == 1 and len(shown[0]) == 2 + 1  # probs: 2 heatmaps, 1 error-metrics plot, shown together
    assert plt.get_fignums() == [] and list(tmp_path.iterdir()) == []


def test_python_api(tmp_path):
    from parity import RunRequest, run_comparison

    request = RunRequest(str(TINY), [("onnxrt", {}), ("onnxrt", {})], input_shapes=["x:[2,3,16,16]"], plugin_options={"reports": {"save_heatmaps": str(tmp_path)}})
    outcome = run_comparison(request)
    assert outcome.passed and [p.name for p in tmp_path.iterdir()] == ["onnxrt-0_vs_onnxrt-1_probs_iter0.png"]


def test_a_plain_run_and_help_never_import_matplotlib():
    probe = (
        "import sys, io, contextlib\n"
        "from parity.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', {str(TINY)!r}, '--onnxrt', '--input-shapes', 'x:[2,3,16,16]', '--iterations', '2']) == 0\n"
        "    main(['run', '--help'])\n"
        "assert 'matplotlib' not in sys.modules and 'parity_reports.plots' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0,), proc.stderr


def test_heatmap_planes_are_tiled_and_names_made_safe():
    from parity_reports.plots import _mosaic, _safe

    error = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    mosaic = _mosaic(error)
    assert mosaic.shape == (2 * 4 + 1, 3 * 5 + 2)  # one row per batch item, a NaN gap between planes
    np.testing.assert_array_equal(mosaic[5:9, 6:11], error[1, 1])
    assert np.isnan(mosaic[4]).all() and np.isnan(mosaic[:, 5]).all()
    assert _safe("/backbone/conv1/Conv_output_0") == "backbone_conv1_Conv_output_0" and _safe("golden.npz:onnxrt-0") == "golden.npz_onnxrt-0"


def test_heatmaps_of_a_real_detector_against_its_fp16_conversion(corpus_model, parity_invoke, tmp_path):
    """PP-OCRv4's text detector (a corpus model) against its fp16 conversion: its probability map [1,1,H,W] is drawn,
    and the error the picture shows is the one the comparison measured (fp16 rounding: small, not zero)."""
    det, det16, maps = corpus_model("ppocr_det"), tmp_path / "det16.onnx", tmp_path / "maps"
    assert parity_invoke("convert", "--fp-to-fp16", det, "-o", det16)[0] == 0
    shapes = ("--input-shapes", "x:[1,3,64,64]")
    code, _, err = parity_invoke("run", det, "--onnxrt", *shapes, "--save-inputs", tmp_path / "in.npz", "--save-outputs", tmp_path / "golden.npz")
    assert code == 0, err
    code, out, err = parity_invoke(
        "run",
        det16,
        "--onnxrt",
        "--load-inputs",
        tmp_path / "in.npz",
        "--load-outputs",
        tmp_path / "golden.npz",
        "--tolerance-preset",
        "fp16",
        "--save-heatmaps",
        maps,
        "--save-error-metrics-plot",
        tmp_path / "metrics",
    )
    assert code in (0, 1), err
    [picture] = sorted(maps.iterdir())
    assert picture.name.endswith("_iter0.png") and "golden.npz" in picture.name
    width, height = png_size(picture)
    assert width == 1250 and height >= 270
    pixels = matplotlib.image.imread(picture)
    assert pixels.std() > 0.01  # the error map is drawn, not a blank page
    assert sorted(p.suffix for p in (tmp_path / "metrics").iterdir()) == [".png"]


def scale_model(path: Path, factor: float) -> Path:
    """y = x * factor, x and y [1, 2, 8, 8]: two of them with different factors disagree everywhere."""
    from onnx import TensorProto, helper, numpy_helper

    from parity.testing import save_model

    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 8, 8]) for n in "xy")
    k = numpy_helper.from_array(np.array(factor, dtype=np.float32), "k")
    return save_model(path, [helper.make_node("Mul", ["x", "k"], ["y"])], [x], [y], [k])


def test_failing_comparisons_are_drawn_too(parity_invoke, tmp_path):
    """Issue 26: a failing comparison drew no error-metrics plot and warned "nothing was compared" (the
    comparison result is falsy when a pair failed, and that read as "no pair")."""
    good, bad = scale_model(tmp_path / "good.onnx", 2.0), scale_model(tmp_path / "bad.onnx", 2.01)
    golden, inputs = tmp_path / "golden.npz", tmp_path / "in.npz"
    assert parity_invoke("run", good, "--onnxrt", "--iterations", "2", "--save-inputs", inputs, "--save-outputs", golden)[0] == 0
    plots, maps = tmp_path / "plots", tmp_path / "maps"
    code, out, err = parity_invoke("run", bad, "--onnxrt", "--load-inputs", inputs, "--load-outputs", golden, "--save-error-metrics-plot", plots, "--save-heatmaps", maps)
    assert code == 1, out + err
    assert "nothing was compared" not in err
    [plot] = list(plots.iterdir())
    assert plot.name.endswith("_y_simple_error_metrics.png") and png_size(plot) == (1200, 420)
    assert len(list(maps.iterdir())) == 2  # one heatmap per iteration
    assert f"wrote 1 PNG file(s) to {plots}" in out


def test_heatmaps_report_progress_tensor_by_tensor(tmp_path):
    """A layerwise iteration's heatmaps are drawn one tensor after the other: the reporter hears of each."""
    from parity_reports.plots import ErrorPictures

    class Reporter:
        def __init__(self) -> None:
            self.calls: list[tuple[str, int, int | None, str]] = []

        def warning(self, message: str) -> None:
            raise AssertionError(message)

        def progress(self, task: str, done: int, total: int | None, status: str) -> None:
            self.calls.append((task, done, total, status))

    class Pair:
        actual, reference = "fp16", "fp32"

    reporter = Reporter()
    pictures = ErrorPictures.from_options({"save_heatmaps": tmp_path}, reporter.warning, reporter.progress)  # as parity run builds it
    rng = np.random.default_rng(0)
    ref = {f"t{k}": rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for k in range(3)}
    pictures.on_compared(0, Pair(), {k: v.astype(np.float16).astype(np.float32) for k, v in ref.items()}, ref)
    assert reporter.calls == [("heatmaps", 0, 3, "t0"), ("heatmaps", 1, 3, "t1"), ("heatmaps", 2, 3, "t2"), ("heatmaps", 3, 3, "")]
    assert len(pictures.written) == 3


def test_heatmap_colours_follow_the_error(tmp_path):
    """The numpy renderer maps the error through viridis: the largest error is viridis' top colour, a zero its
    bottom one, a NaN error grey; the relative panel is on a log scale when it spans decades."""
    from parity_reports.plots import _lut, render_heatmap
    from PIL import Image

    absolute = np.zeros((10, 10))
    absolute[0, 0], absolute[9, 9] = 1.0, np.nan
    relative = np.full((10, 10), 1e-6)
    relative[0, 0] = 1.0
    image = np.asarray(render_heatmap((absolute, relative), "title\nshape [10, 10]"))
    assert image.shape[1] == 1250
    colours = {tuple(c) for c in image.reshape(-1, 3)}
    lut = _lut()
    assert tuple(lut[255]) in colours and tuple(lut[0]) in colours and tuple(lut[256]) in colours
    path = tmp_path / "h.png"
    Image.fromarray(image).save(path)
    assert png_size(path)[0] == 1250
