"""The HTML report in a real browser: headless Chromium (Debian's packages, the ``chromium`` fixture) loads the
reports of real runs offline and shows what they should.

* ``parity run``: PP-OCRv4 det against its fp16 conversion (``parity convert --fp-to-fp16``), layerwise
  (``--onnx-outputs mark all``), on inputs in a raw pixel range [0, 255], where activations pass fp16's 65504.
* ``parity debug precision``: the same model and inputs; the check is the mean error of the output.

Screenshots go to ``$PARITY_SCREENSHOTS`` (else the test's temporary folder); the test prints where.
docs/images/ holds copies of them (docs/html-report.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from browser import geometry
from test_html_report import HOSTILE, self_contained
from test_html_report_geometry import chart, inside, x_to_position

pytestmark = pytest.mark.corpus


def only(page: Path, section: str, hide: str = "") -> Path:
    """A copy of ``page`` showing one section without the elements ``hide`` selects (for a screenshot of it; the
    report itself is unchanged)."""
    hidden = f"{hide}{{display:none!important}}" if hide else ""
    style = f"<style>header,nav,section{{display:none!important}}#{section}{{display:block!important}}{hidden}</style></head>"
    copy = page.with_name(f"{page.stem}_{section}{'_part' if hide else ''}.html")
    copy.write_text(page.read_text().replace("</head>", style, 1))
    return copy


def shots_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PARITY_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def first_row(dom: str) -> str:
    """The table row the page's script marked as the first divergence."""
    rows = re.findall(r'<tr data-t="\d+" class="first fail"[^>]*>(.*?)</tr>', dom, re.S)
    assert len(rows) == 1, rows
    return rows[0]


def test_run_and_precision_reports_render_in_chromium(chromium, corpus_model, main, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shots = shots_dir(tmp_path)
    src = corpus_model("ppocr_det")
    code, _, err = main("convert", "--fp-to-fp16", src, "-o", "det16.onnx")
    assert code == 0, err
    pixels = ("--input-shapes", "x:[1,3,64,64]", "--val-range", "x:[0,255]")
    mark = ("--onnx-outputs", "mark", "all")
    code, _, err = main("run", src, "--onnxrt", *pixels, *mark, "--save-inputs", "in.npz", "--save-outputs", "golden.npz")
    assert code == 0, err
    code, out, err = main(
        "run", "det16.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--tolerance-preset", "fp16", *mark,
        "--report", "run.json", "--save-report-html", "run.html",
    )  # fmt: skip
    assert code == 1, out + err
    (layerwise,) = json.loads(Path("run.json").read_text())["layerwise"]
    first = layerwise["first"]
    node = next(t["node"] for t in layerwise["tensors"] if t["name"] == first)
    tags = self_contained(Path("run.html").read_text())
    assert sum(1 for t, _ in tags if t == "svg") >= 5

    dom = chromium.dump_dom(Path("run.html"))
    assert 'data-rendered="1"' in dom  # the page's script ran to its end
    assert "parity run det16.onnx --onnxrt" in dom  # the command as typed, not the test runner's
    row = first_row(dom)  # built by the script from the embedded data
    assert f">{first}<" in row and f">{node} (Conv)<" in row
    assert dom.count('<tr data-t="') == len(layerwise["tensors"])
    assert re.search(r'class="count" data-pair="0">\d+ of \d+ shown<', dom)
    position = next(t["position"] for t in layerwise["tensors"] if t["name"] == first)
    assert f"first divergence: #{position} {first}" in dom  # the label on the chart along the network, with the table's #
    assert dom.count('class="pt first"') == 2  # marked on both charts (max abs, max rel)
    assert "fp16 max 65504" in dom and 'class="pt sat"' in dom  # the saturation line, and points past it
    assert "(fp16 saturates)" in dom  # a panel counts the elements beyond 65504

    # as drawn (issue 26): fp16's relative errors reach 1e37 where the reference is near zero, yet the rtol line is
    # inside the plot, well above the band of zeros; the marker sits at the table's position; charts span the page
    found = geometry(chromium, Path("run.html"), width=1300)
    assert int(found["first_row"][0]) == position
    for c in (chart(found, "max |error| (absolute)"), chart(found, "max relative error")):
        (tol,) = c["tol"]
        assert inside(tol, c["plot"]) and tol["y"] < c["plot"]["y"] + c["plot"]["h"] - 25, (c["label"], tol, c["plot"])
        (marker,) = [p for p in c["points"] if "first" in p["cls"]]
        assert abs(x_to_position(c, marker["x"]) - position) < 1.0
        assert c["box"]["w"] >= 0.97 * (found["main"]["w"] - 48)
    assert any(t["text"].startswith(">1e") for t in chart(found, "max relative error")["ticks"])  # 1e37 is beyond the scale

    chromium.screenshot(Path("run.html"), shots / "run-layerwise.png", 1300, 1100)
    chromium.screenshot(only(Path("run.html"), "layerwise-0", hide=".network,.verdict,.caption:first-of-type"), shots / "run-scatter-table.png", 980, 840)
    chromium.screenshot(only(Path("run.html"), "outputs"), shots / "run-panels.png", 980, 760)

    # debug precision on the same model and inputs: the output's mean error must stay under 2.8e-3 (the fp16
    # model's is 3.1e-3; with every node in fp32, 2.5e-3)
    check = ("--check", "parity", "run", "parity_debug.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz")
    tol = ("--check-error-stat", "mean", "--atol", "2.8e-3", "--rtol", "0")
    code, out, err = main("debug", "precision", src, "-o", "mixed.onnx", "--report", "precision.json", "--save-report-html", "precision.html", *check, *tol)
    assert code == 0, out + err
    report = json.loads(Path("precision.json").read_text())
    fp32 = report["result"]["fp32_nodes"]
    assert fp32  # something must stay fp32
    self_contained(Path("precision.html").read_text())
    dom = chromium.dump_dom(Path("precision.html"))
    assert 'data-rendered="1"' in dom
    for name in fp32:
        assert f'<td class="name">{name}</td>' in dom
    history = dom.split('id="search"', 1)[1]
    assert history.count("<circle") == len(report["checks"])  # one point per check, in order
    assert f"result: {len(fp32)}" in history and f"all candidates: {report['result']['candidates']}" in history
    chromium.screenshot(Path("precision.html"), shots / "precision.png", 1000, 900)

    with capsys.disabled():
        print(f"\nscreenshots of the reports: {shots}")
    for png in shots.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_hostile_names_stay_text_in_chromium(chromium, tmp_path, monkeypatch, main):
    """Names with markup (tests/test_html_report.py's model) are text in the rendered page, in the table the
    script built too: no element came from a name."""
    from test_html_report import hostile_model

    monkeypatch.chdir(tmp_path)
    hostile_model(tmp_path / "good.onnx", 2.0)
    hostile_model(tmp_path / "bad.onnx", 2.01)
    mark = ("--onnx-outputs", "mark", "all")
    assert main("run", "good.onnx", "--onnxrt", *mark, "--save-inputs", "in.npz", "--save-outputs", "golden.npz")[0] == 0
    assert main("run", "bad.onnx", "--onnxrt", *mark, "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--save-report-html", "r.html")[0] == 1
    dom = chromium.dump_dom(Path("r.html"))
    assert 'data-rendered="1"' in dom
    assert "<img" not in dom and "<b>mul</b>" not in dom and dom.count("<script") == 2
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in first_row(dom)
    assert HOSTILE["add"].replace("<", "&lt;").replace(">", "&gt;") in dom
