"""Polygraphy's surgeon-side tools (issue 29) on trained models from the corpus: ``template onnx-gs``, ``plugin
list/match/replace``, ``inspect sparsity`` and ``template shard-hints`` on PaddleOCR's classifier and detector."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from parity.testing import invoke

pytestmark = pytest.mark.corpus

# a plugin folder whose pattern is one HardSigmoid node: PP-OCR's classifier has 9 of them (its SE blocks)
PATTERN = textwrap.dedent(
    """
    import onnx_graphsurgeon as gs

    def get_matching_subgraphs(graph):
        p = gs.GraphPattern()
        x = p.variable()
        p.set_output_tensors([p.add("hs", "HardSigmoid", inputs=[x])])
        return [{"inputs": [t.name for t in m.inputs], "outputs": [t.name for t in m.outputs], "attributes": {}} for m in p.match_all(graph)]

    def get_plugin_metadata():
        return {"name": "hardSigmoidPlugin", "op": "HardSigmoidPlugin"}
    """
)


def _outputs(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_template_onnx_gs_script_round_trips_a_trained_model(tmp_path, corpus_model):
    model = tmp_path / "ppocr_cls.onnx"
    shutil.copy(corpus_model("ppocr_cls"), model)
    script = tmp_path / "edit.py"
    assert invoke("template", "onnx-gs", model, "-o", script).exit_code == 0
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    updated = tmp_path / "ppocr_cls_updated.onnx"
    onnx.checker.check_model(onnx.load(str(updated)), full_check=True)
    feeds = {"x": np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)}
    for got, want in zip(_outputs(updated, feeds), _outputs(model, feeds)):
        np.testing.assert_array_equal(got, want)


def test_plugin_list_match_replace_on_a_trained_model(tmp_path, corpus_model):
    plugins = tmp_path / "plugins" / "hardSigmoidPlugin"
    plugins.mkdir(parents=True)
    (plugins / "pattern.py").write_text(PATTERN)
    model = corpus_model("ppocr_cls")
    listed = invoke("plugin", "list", model, "--plugin-dir", plugins.parent)
    assert listed.exit_code == 0 and "hardSigmoidPlugin: 9 match(es)" in listed.stdout, listed.stdout + listed.stderr
    config, out = tmp_path / "config.yaml", tmp_path / "replaced.onnx"
    assert invoke("plugin", "match", model, "--plugin-dir", plugins.parent, "-o", config).exit_code == 0
    replaced = invoke("plugin", "replace", model, "--plugin-dir", plugins.parent, "--config", config, "-o", out)
    assert replaced.exit_code == 0, replaced.stderr
    proto = onnx.load(str(out))
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("HardSigmoidPlugin") == 9 and "HardSigmoid" not in ops
    onnx.checker.check_model(proto, full_check=True)


def test_inspect_sparsity_on_a_trained_model_names_weights_held_by_constant_nodes(tmp_path, corpus_model):
    """PP-OCR keeps its weights in Constant nodes: 0 eligible (as Polygraphy finds), and each is named with the way
    to make it an initializer; after sanitize --fold-constants they are checked."""
    result = invoke("inspect", "sparsity", corpus_model("ppocr_cls"))
    assert result.exit_code == 0, result.stderr
    assert "0 weight(s) eligible" in result.stdout
    assert "54 weight(s) held by Constant nodes" in result.stdout and "--fold-constants" in result.stdout  # 53 Convs, 1 MatMul
    assert len(result.stdout.splitlines()) == 2  # one line names a few and counts them all
    folded = tmp_path / "folded.onnx"
    assert invoke("surgeon", "sanitize", corpus_model("ppocr_cls"), "--fold-constants", "-o", folded).exit_code == 0
    after = invoke("inspect", "sparsity", folded)
    assert after.exit_code == 0 and "held by Constant nodes" not in after.stdout
    assert int(after.stdout.split(": ")[1].split()[0]) > 0, after.stdout


def test_shard_hints_on_a_model_without_attention_say_so(tmp_path, corpus_model):
    """No attention layer in a CNN: the hints tool says so instead of writing empty hints silently."""
    out = tmp_path / "hints.json"
    result = invoke("template", "shard-hints", corpus_model("ppocr_cls"), "-o", out)
    assert result.exit_code in (0, 2, 3), result
    text = (result.stdout + result.stderr).lower()
    assert "attention" in text, text


def test_override_input_shapes_where_inference_cannot_redo_the_outputs(tmp_path, corpus_model):
    """PP-OCR's classifier ends in a Reshape of computed dims: ONNX's inference cannot redo its output's dims after
    the input shape changes, and the output used to be left without a shape, which the full checker refuses (exit 3,
    nothing written). Its rank is kept now: the model is written, checked, and runs at the new shape."""
    out = tmp_path / "static.onnx"
    result = invoke("surgeon", "sanitize", corpus_model("ppocr_cls"), "--override-input-shapes", "x:[1,3,48,192]", "-o", out)
    assert result.exit_code == 0, result
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto, full_check=True)
    assert [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 48, 192]
    (probs,) = _outputs(out, {"x": np.zeros((1, 3, 48, 192), np.float32)})
    assert probs.shape == (1, 2) and len(proto.graph.output[0].type.tensor_type.shape.dim) == 2


def test_sanitize_keeps_onnxruntimes_folding_warnings_off_the_terminal(corpus_model, tmp_path):
    """Folding silero-vad's If branches made onnxruntime print two coloured optimizer warnings of its own; the
    command's output is its report alone."""
    shutil.copy(corpus_model("silero_vad"), tmp_path / "vad.onnx")
    cmd = ["parity", "surgeon", "sanitize", "--fold-constants", "vad.onnx", "-o", "out.onnx"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "onnxruntime" not in done.stdout + done.stderr and "\x1b[" not in done.stdout + done.stderr, done.stderr
    assert "nodes: 5 -> 4" in done.stdout
    onnx.checker.check_model(str(tmp_path / "out.onnx"), full_check=True)
    ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
