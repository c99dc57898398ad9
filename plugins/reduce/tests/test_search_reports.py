"""``debug precision --save-report-html / --save-model-explorer`` and ``debug reduce --save-report-html``: the fp32
node set, the search history (one point per check, as ``--report`` lists them) and Model Explorer's node data."""

from __future__ import annotations

import json
import sys

import onnx
import pytest
from parity_reports.api import adapter_node_ids

from parity.testing import invoke

PY = sys.executable


@pytest.mark.corpus
def test_precision_reports_on_ppocr_det(corpus_model, tmp_path):
    """Raw pixel inputs [0, 255] on PP-OCRv4 det; the check: the output's mean error under 2.8e-3 (fp16 gives
    3.1e-3, every node fp32 2.5e-3: the weights stay fp16-rounded)."""
    src = corpus_model("ppocr_det")
    pixels = ("--input-shapes", "x:[1,3,64,64]", "--val-range", "x:[0,255]")
    assert invoke("run", src, "--onnxrt", *pixels, "--save-inputs", "in.npz", "--save-outputs", "golden.npz").exit_code == 0
    check = ("--check", "parity", "run", "parity_debug.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz")
    tol = ("--check-error-stat", "mean", "--atol", "2.8e-3", "--rtol", "0")
    outputs = ("--report", "r.json", "--save-report-html", "p.html", "--save-model-explorer", "p.json")
    result = invoke("debug", "precision", src, "-o", "mixed.onnx", *outputs, *check, *tol)
    assert result.exit_code == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    fp32 = report["result"]["fp32_nodes"]
    assert fp32
    page = (tmp_path / "p.html").read_text()
    assert "http:" not in page and "https:" not in page
    assert f"{len(fp32)} of {report['result']['candidates']} candidate nodes must stay fp32" in page
    assert all(f'<td class="name">{n}</td>' in page for n in fp32)
    history = page.split('id="search"', 1)[1]
    assert history.count("<circle") == len(report["checks"])  # every check, in order
    verdicts = [c["verdict"] for c in report["checks"]]
    assert history.count('class="pt ok"') == verdicts.count("good") and history.count('class="pt bad"') == verdicts.count("bad")
    data = json.loads((tmp_path / "p.json").read_text())
    mixed = onnx.load(str(tmp_path / "mixed.onnx"))  # the node data is for the -o model, which has every candidate
    ids = dict(zip([n.name for n in mixed.graph.node], adapter_node_ids(mixed)))
    kept = {ids[n] for n in fp32}
    assert {k for k, v in data["results"].items() if v == {"value": 1, "bgColor": "#ef5350"}} == kept
    assert all(v == {"value": 0, "bgColor": "#90caf9"} for k, v in data["results"].items() if k not in kept)
    assert len(data["results"]) == report["result"]["candidates"]  # every candidate, by the adapter's id


def test_reduce_report_shows_the_minimal_nodes_and_history(files):
    check = ("--check", PY, "check.py", "parity_debug.onnx", "n20", "n40")
    code, _, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--report", "r.json", "--save-report-html", "r.html", *check)
    assert code == 0, err
    report = json.loads((files / "r.json").read_text())
    page = (files / "r.html").read_text()
    assert "2 of 60 nodes still fail the check" in page and '<td class="name">n20</td>' in page and '<td class="name">n40</td>' in page
    assert page.split('id="search"', 1)[1].count("<circle") == len(report["checks"])
    assert "result: 2" in page and "all candidates: 60" in page


def test_search_reports_refuse_the_input_model(files):
    before = (files / "chain.onnx").read_bytes()
    code, _, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--save-report-html", "chain.onnx", "--check", PY, "check.py", "parity_debug.onnx", "n20")
    assert code == 2 and "--save-report-html" in err and "chain.onnx" in err and "Traceback" not in err
    code, _, err = invoke("debug", "precision", "chain.onnx", "-o", "m.onnx", "--save-model-explorer", "chain.onnx", "--check", "true")
    assert code == 2 and "--save-model-explorer" in err and "chain.onnx" in err and "Traceback" not in err
    assert (files / "chain.onnx").read_bytes() == before
