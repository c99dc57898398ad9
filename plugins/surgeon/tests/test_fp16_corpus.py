"""``convert --fp-to-fp16`` and ``surgeon sanitize --fold-constants`` on real trained models: the written
model loads, and its outputs stay close to the fp32 model's."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

pytestmark = pytest.mark.corpus


def _feeds(name: str) -> dict[str, np.ndarray]:
    r = np.random.RandomState(0)
    if name.startswith("silero"):
        return {
            "input": r.uniform(-1, 1, (1, 512)).astype(np.float32),
            "state": r.uniform(-1, 1, (2, 1, 128)).astype(np.float32),
            "sr": np.array(16000, dtype=np.int64),
        }
    return {"x": (r.randn(1, 3, 64, 64) * 2).astype(np.float32)}


def _run(path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    typed = {i.name: feeds[i.name].astype(np.float16) if i.type == "tensor(float16)" else feeds[i.name] for i in session.get_inputs()}
    return [np.asarray(o, dtype=np.float64) for o in session.run(None, typed)]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel(), b.ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _valid(path) -> None:
    onnx.checker.check_model(str(path), full_check=True)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", ["silero_vad", "silero_vad_op15"])
def test_silero_fp16_loads_and_matches_fp32(parity_invoke, corpus_model, tmp_path, name):
    src, out = corpus_model(name), tmp_path / f"{name}_fp16.onnx"
    code, text, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", out)
    assert code == 0, err
    _valid(out)
    model = onnx.load(str(out))
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # fp32 IO by default
    # the weights inside the If bodies are fp16 too
    halves = [a.t for n in _all_nodes(model.graph) if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in halves)
    feeds = _feeds(name)
    want, got = _run(src, feeds), _run(out, feeds)
    np.testing.assert_allclose(got[0], want[0], atol=5e-3)  # `output`: one speech probability
    assert _cosine(got[1], want[1]) > 0.99  # `stateN`


def _bodies(node):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        yield from a.graphs


def _all_nodes(graph):
    for n in graph.node:
        yield n
        for b in _bodies(n):
            yield from _all_nodes(b)


@pytest.mark.parametrize("name", ["silero_vad", "silero_vad_op15"])
def test_silero_sanitize_fold_constants_loads(parity_invoke, corpus_model, tmp_path, name):
    src, out = corpus_model(name), tmp_path / f"{name}_folded.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", "--fold-constants", src, "-o", out)
    assert code == 0, err
    _valid(out)
    feeds = _feeds(name)
    for a, b in zip(_run(src, feeds), _run(out, feeds)):
        np.testing.assert_allclose(b, a, atol=1e-6)


def test_ppocr_det_out_of_range_constant_is_reported_and_kept_fp32(parity_invoke, corpus_model, tmp_path):
    src, out = corpus_model("ppocr_det"), tmp_path / "det16.onnx"
    code, text, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", out)
    assert code == 0, err
    line = next(x for x in text.splitlines() if "beyond +-65504" in x)
    assert "batch_norm_0.w_2" in line and len(line) < 200
    _valid(out)
    model = onnx.load(str(out))
    kept = [a.t for n in model.graph.node if n.op_type == "Constant" and n.output[0] == "batch_norm_0.w_2" for a in n.attribute]
    assert kept and kept[0].data_type == onnx.TensorProto.FLOAT
    feeds = _feeds("ppocr_det")
    assert _cosine(_run(out, feeds)[0], _run(src, feeds)[0]) > 0.99

    # the old behaviour on request: clamped, reported as clamped, and the output is destroyed
    clamped = tmp_path / "det16_clamped.onnx"
    code, text, err = parity_invoke("convert", "--fp-to-fp16", "--clamp-out-of-range", src, "-o", clamped)
    assert code == 0, err
    assert "clamped to +-65504" in text and "batch_norm_0.w_2" in text
    assert _cosine(_run(clamped, feeds)[0], _run(src, feeds)[0]) < 0.9


def test_fp32_io_by_default_and_fp16_io_on_request(parity_invoke, corpus_model, tmp_path):
    src = corpus_model("ppocr_det")
    kinds = {}
    for flag in ("--keep-io-types", "--fp16-io", "--no-keep-io-types", None):
        out = tmp_path / f"det_{flag}.onnx"
        code, _, err = parity_invoke("convert", "--fp-to-fp16", *([flag] if flag else []), src, "-o", out)
        assert code == 0, err
        m = onnx.load(str(out))
        kinds[flag] = (m.graph.input[0].type.tensor_type.elem_type, m.graph.output[0].type.tensor_type.elem_type)
    F, H = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16
    assert kinds[None] == kinds["--keep-io-types"] == (F, F)
    assert kinds["--fp16-io"] == kinds["--no-keep-io-types"] == (H, H)


def test_broken_result_exits_3_and_writes_nothing(parity_invoke, corpus_model, tmp_path, monkeypatch):
    """A model that fails validation is never written with exit 0."""
    from parity_surgeon import fp16

    real = fp16._Build.lower

    def corrupt(self, t, name=""):
        real(self, t, name)
        t.dims.append(3)  # a weight whose shape no longer matches its data

    monkeypatch.setattr(fp16._Build, "lower", corrupt)
    out = tmp_path / "broken.onnx"
    code, _, err = parity_invoke("convert", "--fp-to-fp16", corpus_model("silero_vad_op15"), "-o", out)
    assert code == 3 and "the fp16 model" in err
    assert not out.exists()
