"""``debug precision`` and ``convert --fp-to-fp16`` share one conversion, on a real model (PP-OCRv4 det,
whose BatchNorm variance of 1e7-9.8e7 sits in a Constant)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from parity_reduce import PrecisionSearch

from parity.testing import invoke

pytestmark = pytest.mark.corpus


def _out(model, x: np.ndarray) -> np.ndarray:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return np.asarray(ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0], np.float64).ravel()


def test_precision_agrees_with_convert_on_ppocr_det(corpus_model, tmp_path, monkeypatch):
    src = corpus_model("ppocr_det")
    x = (np.random.RandomState(0).randn(1, 3, 64, 64) * 2).astype(np.float32)
    ref = _out(src, x)

    def passes(candidate) -> bool:
        y = _out(candidate, x)
        return float(y @ ref / (np.linalg.norm(y) * np.linalg.norm(ref))) > 0.99

    monkeypatch.chdir(tmp_path)
    assert invoke("convert", "--fp-to-fp16", str(src), "-o", "conv.onnx").exit_code == 0
    conv = onnx.load("conv.onnx")
    assert passes(conv)  # convert's model passes the check ...
    result = PrecisionSearch(str(src), passes).run()
    assert result.fp32_nodes == []  # ... and precision agrees: nothing more must stay fp32
    assert [(n.op_type, list(n.input)) for n in result.model.graph.node] == [(n.op_type, list(n.input)) for n in conv.graph.node]
    # clamping (convert --clamp-out-of-range) destroys the output in both
    clamped = PrecisionSearch(str(src), passes, keep_out_of_range=False)
    assert not passes(clamped.mixed.build(set()))
    assert invoke("convert", "--fp-to-fp16", "--clamp-out-of-range", str(src), "-o", "clamped.onnx").exit_code == 0
    assert not passes(onnx.load("clamped.onnx"))


def _options(*command: str) -> set[str]:
    text = invoke(*command, "--help").stdout
    return {w.strip(",;.[]()") for w in text.split() if w.startswith("--")}


def test_precision_takes_reduce_data_options_and_saves_inputs(corpus_model, tmp_path, monkeypatch):
    from parity.cli import options as opts

    data = {o for p in opts.data_options() for o in p.opts if o.startswith("--")}
    assert data and data <= _options("debug", "reduce")
    assert data | {"--model-input-shapes"} <= _options("debug", "precision")
    # the data options make the inputs the check reads, as in debug reduce
    monkeypatch.chdir(tmp_path)
    src = corpus_model("silero_vad_op15")
    args = ["--model-input-shapes", "input:[1,512]", "state:[2,1,128]", "--val-range", "sr:[16000,16000]", "input:[-1,1]", "state:[-1,1]"]
    code, _, err = invoke("debug", "precision", str(src), "-o", "mixed.onnx", *args, "--save-inputs", "in.npz", "--check", "true")
    assert code == 0, err
    saved = np.load("in.npz")
    assert saved.files
    onnx.checker.check_model("mixed.onnx", full_check=True)
