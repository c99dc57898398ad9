"""``parity inspect model`` on trained models: If/Loop/Scan subgraphs are opened (nested, indented) and Constant
values shown (small ones in full, large ones as dtype, shape and statistics), as Polygraphy's
``inspect model --show layers attrs weights`` does."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.corpus


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def find(lines: list[str], pattern: str) -> int:
    """Index of the first line matching ``pattern``."""
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


def test_silero_vad_nested_ifs_are_opened_and_indented(main, corpus_model):
    code, out, err = main("inspect", "model", corpus_model("silero_vad"), "--show", "layers")
    assert code == 0, err
    lines = out.splitlines()
    assert "50 subgraph(s) of If/Loop/Scan" in lines[2]
    top = find(lines, r"^    \[2\] If_0 \(If\)")
    then = find(lines, r"then_branch: subgraph 'If_0_then_branch' \(113 nodes\)")
    assert then > top and indent(lines[then]) > indent(lines[top])
    # an If inside the branch, an If inside that one, and a node of the innermost graph, each deeper than its parent
    rnn_if = find(lines, r"\] If_0_then_branch__Inline_0__/decoder/If_1 \(If\)")
    inner_if = next(i for i in range(rnn_if, len(lines)) if re.search(r"\] If_0_then_branch__Inline_0__/decoder/rnn/If_4 \(If\)", lines[i]))
    innermost = next(i for i in range(inner_if, len(lines)) if "If_0_then_branch__Inline_0__/decoder/rnn/Squeeze_2 (Squeeze)" in lines[i])
    assert indent(lines[then]) < indent(lines[rnn_if]) < indent(lines[inner_if]) < indent(lines[innermost])
    assert sum(" (LSTM): " in line for line in lines) == 4  # two per branch of If_0, each inside a nested If


def test_silero_vad_attrs_show_constant_values(main, corpus_model):
    code, out, err = main("inspect", "model", corpus_model("silero_vad"), "--show", "layers", "attrs")
    assert code == 0, err
    lines = out.splitlines()
    first = find(lines, r"\[0\] Constant_0 \(Constant\)")
    assert lines[first + 1].strip() == "value = int64[] = 16000"  # the sample rate it branches on, in full
    weight = find(lines, r"encoder\.0\.reparam_conv\.weight'\]$")
    assert re.fullmatch(r"\s+value = float32\[128,65,3\] \| mean \S+ std \S+ min \S+ max \S+", lines[weight + 1])


def test_silero_vad_weights_list_constants_inside_subgraphs(main, corpus_model):
    code, out, err = main("inspect", "model", corpus_model("silero_vad"), "--show", "weights")
    assert code == 0, err
    assert "  initializers: none" in out  # every weight of this model is a Constant node inside an If
    section = out.split("  constants (Constant nodes):\n")[1].splitlines()
    assert len(section) == 341
    assert "    Constant_0_output: int64[] = 16000" in section
    assert any(line.startswith("    If_0.then_branch: If_0_then_branch__Inline_0__decoder.rnn.weight_ih: float32[512,128] | mean") for line in section)


def test_ppocr_det_constant_weights(main, corpus_model):
    code, out, err = main("inspect", "model", corpus_model("ppocr_det"), "--show", "weights")
    assert code == 0, err
    assert "342 Constant node(s)" in out.splitlines()[2]
    section = out.split("  constants (Constant nodes):\n")[1].splitlines()
    assert len(section) == 342
    big = [line for line in section if re.search(r": float32\[\d+(,\d+){3}\] \| mean \S+ std \S+ min \S+ max \S+$", line)]
    small = [line for line in section if re.search(r": float32\[16\] = \[[^]]+\]$", line)]
    assert big and small
    assert all(len(line) < 400 for line in section)  # large tensors never print their values


def test_ppocr_det_layers_attrs_show_constant_values_not_just_shapes(main, corpus_model):
    code, out, err = main("inspect", "model", corpus_model("ppocr_det"), "--show", "layers", "attrs")
    assert code == 0, err
    values = [line.strip() for line in out.splitlines() if line.strip().startswith("value = ")]
    assert len(values) == 342
    assert not any(v.startswith("value = tensor[") for v in values)
    assert "value = float32[4] = [1, 1, 2, 2]" in values  # the Resize scales, in full
    assert "value = float32[] = 6" in values  # hard-swish's 6, in full


def test_loop_and_scan_bodies_are_opened(main, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", f, [1], [1.0])), helper.make_node("Add", ["acc", "one"], ["acc_out"])],
        "loop_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", f, [1])],
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", f, [1])],
    )  # fmt: skip
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["s", "e"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["e_out"])],
        "scan_body",
        [helper.make_tensor_value_info("s", f, [1]), helper.make_tensor_value_info("e", f, [1])],
        [helper.make_tensor_value_info("s_out", f, [1]), helper.make_tensor_value_info("e_out", f, [1])],
    )
    nodes = [
        helper.make_node("Loop", ["n", "c", "x"], ["y"], name="loop", body=body),
        helper.make_node("Scan", ["y", "xs"], ["z", "zs"], name="scan", body=scan_body, num_scan_inputs=1),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("n", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", f, [1]), helper.make_tensor_value_info("xs", f, [3, 1])],
        [helper.make_tensor_value_info("z", f, [1]), helper.make_tensor_value_info("zs", f, [3, 1])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "loop.onnx"))
    code, out, err = main("inspect", "model", tmp_path / "loop.onnx", "--show", "layers", "attrs", "weights")
    assert code == 0, err
    assert "body: subgraph 'loop_body' (2 nodes) | inputs: i, cond, acc | outputs: cond, acc_out" in out
    assert "body: subgraph 'scan_body' (2 nodes)" in out
    assert "            [1] <unnamed> (Add): ['acc', 'one'] -> ['acc_out']" in out
    assert "value = float32[1] = [1]" in out and "num_scan_inputs = 1" in out
    assert "    loop.body: one: float32[1] = [1]" in out
