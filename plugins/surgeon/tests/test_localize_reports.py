"""``debug localize --save-report-html / --save-model-explorer`` on a real onnxruntime run: an fp16 model whose
activations pass 65504 (models.overflow), localized against its fp32 original."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import models
import onnx
import pytest
from parity_reports.api import adapter_node_ids


@pytest.fixture
def fp16_pair(tmp_path: Path, parity_invoke) -> tuple[Path, Path]:
    src = models.overflow(tmp_path / "ovf.onnx")
    half = tmp_path / "ovf16.onnx"
    assert parity_invoke("convert", "--fp-to-fp16", src, "-o", half)[0] == 0
    return half, src


def test_localize_writes_the_html_report_and_model_explorer_data(fp16_pair, parity_invoke, tmp_path):
    half, src = fp16_pair
    html, explorer, report = tmp_path / "loc.html", tmp_path / "loc.json", tmp_path / "report.json"
    code, text, err = parity_invoke(
        "debug", "localize", half, "--onnxrt", "--reference-model", src, "--tolerance-preset", "fp16",
        "--report", report, "--save-report-html", html, "--save-model-explorer", explorer,
    )  # fmt: skip
    assert code == 1, text + err
    page = html.read_text()
    assert "https:" not in page and "http:" not in page
    assert 'First divergence: tensor <b class="name">s2</b>, produced by node <b class="name">scale2</b> (Mul)' in page
    assert "parity debug localize" in page and f"--reference-model {src}" in page  # the command as typed
    assert "introduces" in page and 'id="isolation"' in page  # the suspect run alone on the reference's inputs
    assert "fp16 max 65504" in page and "(fp16 saturates)" in page  # s2's reference passes fp16's largest value
    assert 'class="pt sat"' in page
    data = json.loads(explorer.read_text())
    ids = dict(zip([n.name for n in onnx.load(str(half)).graph.node], adapter_node_ids(half)))
    divergence = json.loads(report.read_text())["divergence"]
    assert divergence["first"] == "s2"  # --report unchanged beside them
    rows = {t["name"]: t for t in divergence["tensors"]}
    assert rows["s2"]["max_abs"] is not None  # the largest finite error; but fp16 made some of s2 infinite:
    assert data["results"][ids["scale2"]] == {"value": "inf", "bgColor": "#6a1b9a"}  # said so, purple: the first divergence
    assert data["results"][ids["scale1"]]["bgColor"] not in ("#6a1b9a", "#d32f2f")  # passed


@pytest.mark.parametrize("option", ["--report", "--save-report-html", "--save-model-explorer", "--extract-to"])
@pytest.mark.parametrize("target", ["model", "reference"])
def test_localize_refuses_to_write_onto_its_models(fp16_pair, parity_invoke, option, target):
    half, src = fp16_pair
    victim = half if target == "model" else src
    before = hashlib.sha256(victim.read_bytes()).hexdigest()
    code, text, err = parity_invoke("debug", "localize", half, "--onnxrt", "--reference-model", src, option, victim)
    lines = [line for line in err.splitlines() if line.startswith("parity: error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert option in lines[0] and str(victim) in lines[0]
    assert "Compared" not in text and hashlib.sha256(victim.read_bytes()).hexdigest() == before


def test_localize_validate_has_no_comparison_to_draw(fp16_pair, parity_invoke, tmp_path):
    half, _ = fp16_pair
    code, _, err = parity_invoke("debug", "localize", half, "--onnxrt", "--validate", "--save-report-html", tmp_path / "v.html")
    assert code == 2 and "--save-report-html draws a comparison of two runners; --validate compares none" in err
    assert not (tmp_path / "v.html").exists()
