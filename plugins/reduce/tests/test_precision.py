"""``parity debug precision``: the minimal fp32 node set, with onnxruntime as the backend."""

from __future__ import annotations

import json

import onnx
from parity_reduce import PrecisionSearch
from parity_reduce.precision import MixedPrecision
from parity_reduce.testing import fp16_sensitive

from parity.testing import invoke

PLANTED = ["shift_a", "unshift_a", "shift_b", "unshift_b"]


def _fp32_nodes(candidate) -> set[str]:
    """Nodes of a candidate whose outputs are float32 (kept fp32)."""
    inferred = onnx.shape_inference.infer_shapes(candidate)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    return {n.name for n in candidate.graph.node if n.op_type != "Cast" and types.get(n.output[0]) == onnx.TensorProto.FLOAT}


def test_cli_agrees_with_convert(tmp_path):
    """The 1e5 weight is beyond fp16: convert keeps its readers fp32, so precision starts from there and
    finds that no further node must stay fp32; its result is convert's model."""
    onnx.save(fp16_sensitive(), "model.onnx")
    assert invoke("run", "model.onnx", "--onnxrt", "--save-inputs", "in.npz", "--save-outputs", "golden.npz").exit_code == 0
    check = ["--check", "parity", "run", "parity_debug.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--atol", "1e-2", "--rtol", "1e-2"]
    assert invoke("debug", "precision", "model.onnx", "-o", "mixed.onnx", "--save-nodes", "nodes.json", *check).exit_code == 0
    assert json.loads((tmp_path / "nodes.json").read_text())["fp32_nodes"] == []
    assert invoke("convert", "--fp-to-fp16", "model.onnx", "-o", "conv.onnx").exit_code == 0
    mixed, conv = onnx.load("mixed.onnx"), onnx.load("conv.onnx")
    onnx.checker.check_model(mixed, full_check=True)
    assert [(n.op_type, list(n.input)) for n in mixed.graph.node] == [(n.op_type, list(n.input)) for n in conv.graph.node]
    assert {"shift_a", "unshift_a", "shift_b", "unshift_b"} <= _fp32_nodes(mixed)
    assert invoke("run", "mixed.onnx", "--onnxrt", "--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--atol", "1e-2", "--rtol", "1e-2").exit_code == 0


def test_python_api_finds_a_set_of_distant_nodes():
    model = fp16_sensitive()

    def passes(candidate):  # a check that needs exactly the planted nodes in fp32
        return set(PLANTED) <= _fp32_nodes(candidate)

    assert not passes(MixedPrecision(model, keep_out_of_range=False).build(set()))  # clamped: everything in fp16
    result = PrecisionSearch(model, passes, keep_out_of_range=False).run()
    assert sorted(result.fp32_nodes) == sorted(PLANTED)  # a set of distant nodes, not a prefix or suffix
    assert passes(result.model)
    bisect = PrecisionSearch(model, passes, mode="bisect", keep_out_of_range=False).run()
    assert len(bisect.fp32_nodes) > len(result.fp32_nodes)  # Polygraphy-style search keeps a whole range


def test_check_that_fails_in_fp32_is_reported(tmp_path):
    onnx.save(fp16_sensitive(), "model.onnx")
    code, _, err = invoke("debug", "precision", "model.onnx", "-o", "m.onnx", "--check", "false")
    assert code == 1
    assert "even with every node in fp32" in err


def test_direction_keeps_the_smallest_prefix_or_suffix_fp32():
    """Polygraphy's --direction: the first (forward) or last (reverse) k candidates fp32, the smallest k that passes,
    by bisect or linear; both modes agree, and the answer is exactly the span that reaches the planted nodes."""
    model = fp16_sensitive()
    names = MixedPrecision(model, keep_out_of_range=False).names

    def passes(candidate):
        return set(PLANTED) <= _fp32_nodes(candidate)

    first, last = min(names.index(n) for n in PLANTED), max(names.index(n) for n in PLANTED)
    expected = {"forward": names[: last + 1], "reverse": names[first:]}
    for direction, span in expected.items():
        for mode in ("bisect", "linear"):
            result = PrecisionSearch(model, passes, mode=mode, direction=direction, keep_out_of_range=False).run()
            assert sorted(result.fp32_nodes) == sorted(span), (direction, mode)
            assert passes(result.model)


def test_cli_direction_and_polygraphy_flags(tmp_path):
    onnx.save(fp16_sensitive(), "model.onnx")
    ok = invoke("debug", "precision", "model.onnx", "-o", "m.onnx", "--dir", "reverse", "--fp16", "--save-nodes", "n.json", "--check", "true")
    assert ok.exit_code == 0, ok.stderr
    assert json.loads((tmp_path / "n.json").read_text())["fp32_nodes"] == []  # the fp16 model passes: nothing to keep
    # --int8/--tf32 are TensorRT builder flags: each candidate is built into an engine (plugins/trt/tests/test_precision_trt_flags.py)
    for args in (["--direction", "forward", "--mode", "ddmin"], ["--fp16", "-p", "bfloat16"]):
        code, _, err = invoke("debug", "precision", "model.onnx", "-o", "m2.onnx", *args, "--check", "true")
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
