"""Polygraphy's TensorRT tools (issue 29) on trained models from the corpus, against the TensorRT model (NOT
TensorRT) of each modelled version: ``inspect capability`` and ``template trt-network`` on PaddleOCR's models."""

from __future__ import annotations

import runpy

import onnx
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
