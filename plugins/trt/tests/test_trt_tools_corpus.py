"""Polygraphy's TensorRT tools (issue 29) on trained models from the corpus, against the TensorRT model (NOT
TensorRT) of each modelled version: ``inspect capability`` and ``template trt-network`` on PaddleOCR's models."""

from __future__ import annotations

import runpy
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from parity.testing import invoke

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("name", ["ppocr_cls", "silero_vad"])
def test_capability_of_a_trained_model(trt_backend, tmp_path, corpus_model, name):
    """Whatever the parser supports, the answer is whole: fully supported and nothing written, or every node of the
    model in exactly one written subgraph, each a model that passes the full checker."""
    model = corpus_model(name)
    out = tmp_path / "parts"
    result = invoke("inspect", "capability", model, "--with-partitioning", "-o", out)
    assert result.exit_code == 0, result
    if "fully supported" in result.stdout:
        assert not out.exists()
        return
    parts = sorted(out.glob("*.onnx"))
    assert parts, result.stdout
    nodes = 0
    for part in parts:
        proto = onnx.load(str(part))
        onnx.checker.check_model(proto, full_check=True)
        nodes += len(proto.graph.node)
    assert nodes == len(onnx.load(str(model), load_external_data=False).graph.node)


def test_template_trt_network_of_a_trained_model(trt_backend, tmp_path, corpus_model):
    script = tmp_path / "net.py"
    assert invoke("template", "trt-network", corpus_model("ppocr_det"), "-o", script).exit_code == 0
    _builder, network, parser = runpy.run_path(str(script))["load_network"]()
    assert network.num_layers > 100 and network.num_inputs == 1 and network.num_outputs == 1


def test_plugin_autotune_on_a_trained_model_keeps_it_when_no_candidate_builds(trt_backend, tmp_path, corpus_model):
    """Nine HardSigmoid matches in PP-OCR's classifier, a plugin TensorRT has not registered: every candidate fails to
    build and is named in the report, and the model written is the original, unchanged in what it computes."""
    folder = tmp_path / "plugins" / "hardSigmoidPlugin"
    folder.mkdir(parents=True)
    (folder / "pattern.py").write_text(
        "import onnx_graphsurgeon as gs\n\n"
        "def get_matching_subgraphs(graph):\n"
        "    p = gs.GraphPattern()\n"
        "    x = p.variable()\n"
        "    p.set_output_tensors([p.add('hs', 'HardSigmoid', inputs=[x])])\n"
        "    return [{'inputs': [t.name for t in m.inputs], 'outputs': [t.name for t in m.outputs], 'attributes': {}} for m in p.match_all(graph)]\n\n"
        "def get_plugin_metadata():\n"
        "    return {'name': 'hardSigmoidPlugin', 'op': 'HardSigmoidPlugin'}\n"
    )
    dynamic, out, report = corpus_model("ppocr_cls"), tmp_path / "tuned.onnx", tmp_path / "report.txt"
    refused = invoke("plugin", "autotune", dynamic, "--plugin-dir", folder.parent, "-o", out)
    assert refused.exit_code == 2 and "--override-input-shapes x:[...]" in refused.stderr and not out.exists(), refused
    model = tmp_path / "static.onnx"  # the fix the refusal names
    assert invoke("surgeon", "sanitize", dynamic, "--override-input-shapes", "x:[1,3,48,192]", "-o", model).exit_code == 0
    result = invoke("plugin", "autotune", model, "--plugin-dir", folder.parent, "-o", out, "--report", report)
    assert result.exit_code == 0, result
    assert "best: the original model" in result.stdout
    text = report.read_text()
    assert "not built" in text and "HardSigmoidPlugin" in text
    ops = Counter(n.op_type for n in onnx.load(str(out)).graph.node)
    assert ops == Counter(n.op_type for n in onnx.load(str(model)).graph.node) and "HardSigmoidPlugin" not in ops
    x = {"x": np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)}
    run = lambda path: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)  # noqa: E731
    np.testing.assert_array_equal(run(out)[0], run(model)[0])
