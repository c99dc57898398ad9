"""``parity run --save-report-html``: one self-contained page from a real onnxruntime run, names escaped, the
samples honest (``parity_reports.html_report``). The page in a real browser: plugins/reports/tests/test_html_report_browser.py."""

from __future__ import annotations

import json
import os
import re
import stat
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from core_models import save, tensor
from onnx import TensorProto, helper, numpy_helper
from parity_reports import html_report

HOSTILE = {
    "mul": '<b>mul</b> & "co"',
    "scaled": 'a"<script>alert(1)</script>',
    "add": "add</script><!--",
    "y": "y'\u2028<img src=x onerror=alert(2)>",
}


def hostile_model(path: Path, scale: float) -> Path:
    """y = x * scale + 0.5, every node and tensor named with markup."""
    n = HOSTILE
    nodes = [helper.make_node("Mul", ["x", "s"], [n["scaled"]], name=n["mul"]), helper.make_node("Add", [n["scaled"], "b"], [n["y"]], name=n["add"])]
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "s"), numpy_helper.from_array(np.array(0.5, np.float32), "b")]
    return save(helper.make_graph(nodes, "hostile", [tensor("x", TensorProto.FLOAT, [1, 64])], [tensor(n["y"], TensorProto.FLOAT, [1, 64])], inits), path)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def self_contained(page: str) -> list[tuple[str, dict[str, str | None]]]:
    """Nothing in the page makes a request: no http(s) address, no element with src, no href leaving the page, no
    link element, no CSS url() or @import. Returns the page's elements (tag, attributes)."""
    assert not re.search(r"https?:", page, re.I), re.search(r".{40}https?:.{40}", page, re.I)
    parser = _Tags()
    parser.feed(page)
    tags = parser.tags
    assert not [t for t, a in tags if "src" in a or t in ("link", "iframe", "img", "object", "embed")]
    assert all((a.get("href") or "#").startswith("#") for _, a in tags)
    assert "url(" not in page and "@import" not in page
    return tags


@pytest.fixture
def hostile_run(tmp_path, monkeypatch, main):
    monkeypatch.chdir(tmp_path)
    hostile_model(tmp_path / "good.onnx", 2.0)
    hostile_model(tmp_path / "bad.onnx", 2.01)
    mark = ("--onnx-outputs", "mark", "all")
    code, _, err = main("run", "good.onnx", "--onnxrt", *mark, "--save-inputs", "in.npz", "--save-outputs", "golden.npz")
    assert code == 0, err
    saved = ("--load-inputs", "in.npz", "--load-outputs", "golden.npz")
    code, out, err = main("run", "bad.onnx", "--onnxrt", *mark, *saved, "--report", "r.json", "--save-report-html", "r.html")
    return code, out, err, tmp_path


def test_layerwise_report_escapes_every_name(hostile_run):
    code, out, err, work = hostile_run
    assert code == 1, out + err  # the report does not change the verdict
    page = (work / "r.html").read_text()
    self_contained(page)
    first = json.loads((work / "r.json").read_text())["layerwise"][0]["first"]
    assert first == HOSTILE["scaled"]
    for name in HOSTILE.values():
        assert name not in page  # never raw: every one has a character HTML or a script would read
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the markup shows as text
    assert page.count("<script") == 2  # the JSON block and the page's own script, nothing a name brought
    data = re.search(r'<script type="application/json" id="parity-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and "\u2028" not in data
    tensors = json.loads(data)["layerwise"][0]["tensors"]
    assert [t["name"] for t in tensors] == [HOSTILE["scaled"], HOSTILE["y"]]  # the names come back exactly
    assert json.loads(data)["layerwise"][0]["first"] == first


def test_report_file_is_atomic_with_umask_mode(hostile_run):
    *_, work = hostile_run
    mode = stat.S_IMODE(os.stat(work / "r.html").st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
    assert not [p for p in work.iterdir() if p.name.endswith(".part") or p.name.startswith(".")]


def test_plain_run_has_a_panel_per_output_with_its_histogram(tmp_path, monkeypatch, main):
    """Without marking, every output gets a panel: its |error| histogram from the check and its sample."""
    monkeypatch.chdir(tmp_path)
    hostile_model(tmp_path / "m.onnx", 2.0)
    code, out, err = main("run", "m.onnx", "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--save-report-html", "r.html")
    assert code == 0, out + err
    page = (tmp_path / "r.html").read_text()
    self_contained(page)
    assert page.count('class="panel"') == 1 and "decade histogram of |error|" in page
    assert "Along the network" not in page  # no layerwise section without marked outputs
    assert 'class="badge pass">PASSED' in page


@pytest.mark.parametrize(
    "args, words",
    [
        (["--save-report-html", "m.onnx"], ["m.onnx", "--save-report-html"]),
        (["--save-model-explorer", "m.onnx"], ["m.onnx", "--save-model-explorer"]),
        (["--save-report-html", "same.out", "--save-model-explorer", "same.out"], ["same.out", "same file"]),
        (["--save-report-html", "sub"], ["sub", "is a directory"]),
        (["--save-report-html", "m.onnx/r.html"], ["m.onnx", "is a file"]),
    ],
)
def test_bad_report_paths_are_refused_before_any_work(tmp_path, monkeypatch, main, args, words):
    monkeypatch.chdir(tmp_path)
    hostile_model(tmp_path / "m.onnx", 2.0)
    (tmp_path / "sub").mkdir()
    before = (tmp_path / "m.onnx").read_bytes()
    code, out, err = main("run", "m.onnx", "--onnxrt", *args)
    lines = [line for line in err.splitlines() if line.startswith("parity: error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), lines[0]
    assert "PASSED" not in out and (tmp_path / "m.onnx").read_bytes() == before


def test_model_explorer_needs_an_onnx_model(tmp_path, monkeypatch, main):
    monkeypatch.chdir(tmp_path)
    hostile_model(tmp_path / "m.onnx", 2.0)
    assert main("run", "m.onnx", "--onnxrt", "--save-outputs", "golden.npz")[0] == 0
    code, _, err = main("run", "--load-outputs", "golden.npz", "golden.npz", "--save-model-explorer", "me.json")
    assert code == 2 and "--save-model-explorer: give the ONNX model that was run" in err and "Traceback" not in err
    assert not (tmp_path / "me.json").exists()


# --- the sample behind |error| against |reference| ------------------------------------------------------


def test_sample_keeps_the_extremes_and_counts_the_whole_tensor(monkeypatch):
    monkeypatch.setattr(html_report, "CHUNK", 1000)  # many chunks: the running top-k merges across them
    rng = np.random.default_rng(0)
    ref = rng.normal(size=10_000).astype(np.float32)
    ref[[17, 4321, 9999]] = [7e4, -1e5, 7e5]  # beyond fp16's 65504
    act = ref.copy()
    act[5000] += 3.0  # the largest error
    act[[17, 4321, 9999]] = [np.inf, -np.inf, np.nan]  # what fp16 makes of them
    with np.errstate(over="ignore"):
        act16 = act.astype(np.float16).astype(np.float32)
    act16[5000] = act[5000]
    s = html_report.sample_errors(act16, ref, points=64)
    assert s["count"] == 10_000 and s["over_fp16"] == 3 and s["nonfinite"] == 3
    assert len(s["ref"]) == len(s["err"]) <= 64
    pairs = list(zip(s["ref"], s["err"]))
    assert any(abs(r - abs(ref[5000])) < 1e-6 and abs(e - 3.0) < 1e-2 for r, e in pairs)  # the largest error is kept
    assert sum(1 for r, e in pairs if r > 65504 and not np.isfinite(e)) == 3  # the saturated elements are kept
    assert html_report.sample_errors(act16, ref.reshape(100, 100)) is None  # shapes differ: no sample
    # given the tolerances, the elements out of tolerance are kept however small their error: here tiny errors
    # on tiny references, which neither the largest errors nor a uniform draw would find
    act16[[10, 20, 30]] = ref[[10, 20, 30]] = [1e-6, -2e-6, 3e-6]
    act16[[10, 20, 30]] += 1e-4
    s = html_report.sample_errors(act16, ref, points=64, atol=1e-5, rtol=1e-3)
    assert sum(1 for r, e in zip(s["ref"], s["err"]) if r < 1e-5 and e > 5e-5) == 3


def test_scatter_marks_points_past_fp16_and_the_tolerance_bound():
    sample = {"ref": [1e-3, 1.0, 7e4, 2e5], "err": [1e-6, 0.5, float("inf"), 10.0], "count": 4, "over_fp16": 2, "nonfinite": 1}
    svg = html_report._scatter_svg(sample, 1e-3, 1e-3, "elemwise", "t")
    assert svg.count('class="pt sat"') == 2  # both |reference| > 65504, the infinite error among them
    assert "fp16 max 65504" in svg and 'class="tol"' in svg
    assert svg.count('class="pt bad"') == 1 and svg.count('class="pt ok"') == 1  # 0.5 > max(atol, rtol*1)


@pytest.mark.parametrize("kind", ["normal", "all zero", "three values", "mostly masked"])
@pytest.mark.parametrize("n", [10, 300, 5000, 100_000])
def test_top_k_selection_is_exact(kind, n):
    """The sampler's fast selection of the k largest gives argpartition's values, ties and all."""
    rng = np.random.default_rng(n)
    values = {
        "normal": np.abs(rng.normal(size=n)),
        "all zero": np.zeros(n),
        "three values": rng.integers(0, 3, n).astype(float),
        "mostly masked": np.where(rng.random(n) < 0.99, -1.0, rng.random(n)),
    }[kind]
    for k in (1, 8, 32):
        got = html_report._top(values, k)
        assert len(set(got.tolist())) == len(got)
        if n > 8 * k:
            assert np.array_equal(np.sort(values[got]), np.sort(values)[n - k :])


def test_model_explorer_says_nan_where_the_error_is_nan(tmp_path, monkeypatch, main):
    """Log of negative inputs: both runners give NaN; the node's value is "NaN", not the 0 of the finite errors."""
    import core_models

    monkeypatch.chdir(tmp_path)
    core_models.log_model(tmp_path / "log.onnx")
    code, _, err = main("run", "log.onnx", "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--val-range", "x:[-1,1]", "--save-model-explorer", "me.json")
    assert code == 1, err
    nan = {"value": "NaN", "bgColor": "#6a1b9a"}
    assert json.loads((tmp_path / "me.json").read_text())["results"] == {"[value] y": nan, "log": nan}


def test_report_and_heatmaps_watch_the_same_run(hostile_run, main):
    """--save-heatmaps and --save-report-html both see each compared pair (one on_compared for both)."""
    *_, work = hostile_run
    saved = ("--load-inputs", "in.npz", "--load-outputs", "golden.npz")
    code, out, err = main("run", "bad.onnx", "--onnxrt", *saved, "--save-heatmaps", "maps", "--save-report-html", "both.html")
    assert code == 1, out + err
    assert list((work / "maps").glob("*.png"))
    page = (work / "both.html").read_text()
    assert page.count('class="panel"') == 1 and "sampled (" in page  # the output's panel, with its sample
