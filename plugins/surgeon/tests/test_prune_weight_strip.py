"""``parity surgeon prune``, ``weight-strip`` and ``weight-reconstruct`` on models these tests build."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from parity_surgeon import sparsity, weights


def _model(path: Path, nodes: list, inputs: list, outputs: list, inits: list, opset: int = 17, doc: str = "") -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset)], doc_string=doc)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _bf16(name: str, dims: list) -> onnx.TensorProto:
    tensor = TensorProto(name=name, data_type=TensorProto.BFLOAT16)
    tensor.dims.extend(dims)
    return tensor


def _vi(name: str, shape: list, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _net(path: Path, seed: int = 0) -> Path:
    """x[2,16] -> MatMul(w[16,8]) -> Gemm(transB, g[4,8], bias[4]) -> Gather(table[1024,4] rows by idx) ... and a
    Conv branch: c[1,8,5,5] -> Conv(k[4,8,3,3], kb[4]) -> Transpose(t[12,8]) feeding MatMul input B."""
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    inits = [
        numpy_helper.from_array(f(16, 8), "w"),
        numpy_helper.from_array(f(4, 8), "g"),
        numpy_helper.from_array(f(4), "bias"),
        numpy_helper.from_array(f(10, 4), "small_table"),  # Gather below 1024 elements: kept
        numpy_helper.from_array(np.array([1, 3], np.int64), "idx"),
        numpy_helper.from_array(f(4, 8, 3, 3), "k"),
        numpy_helper.from_array(f(4), "kb"),
        numpy_helper.from_array(f(8, 12), "t"),
        numpy_helper.from_array(np.ones(4, np.float32), "addend"),  # an Add's: no weight reader, kept
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Gemm", ["h", "g", "bias"], ["y"], transB=1),
        helper.make_node("Add", ["y", "addend"], ["y2"]),
        helper.make_node("Gather", ["small_table", "idx"], ["rows"]),
        helper.make_node("Conv", ["c", "k", "kb"], ["conv"]),
        helper.make_node("Transpose", ["t"], ["tt"], perm=[1, 0]),
        helper.make_node("MatMul", ["m", "tt"], ["mm"]),
    ]
    ins = [_vi("x", [2, 16]), _vi("c", [1, 8, 5, 5]), _vi("m", [3, 12])]
    outs = [_vi("y2", [2, 4]), _vi("rows", [2, 4]), _vi("conv", [1, 4, 3, 3]), _vi("mm", [3, 8])]
    return _model(path, nodes, ins, outs, inits)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _inits(path: Path) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in onnx.load(str(path)).graph.initializer}


def _groups_zeros(array: np.ndarray, axis: int) -> np.ndarray:
    """Zeros per group of 4 along ``axis``."""
    moved = np.moveaxis(array, axis, -1)
    return np.count_nonzero(moved.reshape(*moved.shape[:-1], -1, 4) == 0, axis=-1)


def _ok(invoke, command: str, src: Path, out: Path, *more: object) -> str:
    """Run ``parity surgeon COMMAND SRC -o OUT ...``, which must pass; its stdout."""
    code, text, err = invoke("surgeon", command, src, "-o", out, *more)
    assert code == 0, err
    return text


def test_prune_zeroes_two_smallest_of_each_group_along_the_reduction_axis(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    before = _digest(src)
    out = tmp_path / "pruned.onnx"
    text = _ok(parity_invoke, "prune", src, out)
    assert "pruned 4 weight(s)" in text  # w, g, k, t; bias/kb/small_table/addend are not reduced over
    old, new = _inits(src), _inits(out)
    for name, axis in {"w": 0, "g": 1, "k": 1, "t": 1}.items():  # MatMul B: 0; Gemm transB: 1; Conv: 1; t: perm[0]
        pruned = numpy_helper.to_array(new[name])
        assert (_groups_zeros(pruned, axis) == 2).all(), name
        orig = numpy_helper.to_array(old[name])
        kept = pruned != 0
        np.testing.assert_array_equal(pruned[kept], orig[kept])  # only zeros were written
        # the zeroed ones are the smallest magnitudes of their group
        moved_o, moved_k = np.moveaxis(np.abs(orig), axis, -1), np.moveaxis(kept, axis, -1)
        go, gk = moved_o.reshape(-1, 4), moved_k.reshape(-1, 4)
        assert all(go[i][~gk[i]].max() <= go[i][gk[i]].min() for i in range(len(go)))
    for name in ("bias", "kb", "small_table", "addend"):
        assert numpy_helper.to_array(new[name]).tolist() == numpy_helper.to_array(old[name]).tolist()
    ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert _digest(src) == before


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_prune_half_types_including_bfloat16_in_int32_data(parity_invoke, tmp_path, dtype):
    values = np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)
    if dtype == TensorProto.FLOAT16:
        w = numpy_helper.from_array(values.astype(np.float16), "w")
    else:  # bfloat16 kept one value per int32_data entry, as some exporters write it
        bits = (values.view(np.uint32) >> 16).astype(np.int32)
        w = _bf16("w", [8, 4])
        w.int32_data.extend(bits.reshape(-1).tolist())
    src = _model(tmp_path / "half.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 8], dtype)], [_vi("y", [2, 4], dtype)], [w])
    out = tmp_path / "pruned.onnx"
    code, text, err = parity_invoke("surgeon", "prune", src, "-o", out)
    assert code == 0, err
    tensor = _inits(out)["w"]
    flat = sparsity.values(tensor)
    assert sparsity.is_sparse(flat, tensor.dims, 0, tensor.data_type)
    assert not sparsity.is_sparse(sparsity.values(_inits(src)["w"]), [8, 4], 0, dtype)


def test_prune_skips_axis_not_a_multiple_of_4_and_says_why_with_verbose(parity_invoke, tmp_path):
    w = numpy_helper.from_array(np.ones((6, 4), np.float32), "w")
    src = _model(tmp_path / "m.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 6])], [_vi("y", [2, 4])], [w])
    code, text, err = parity_invoke("surgeon", "prune", src, "-o", tmp_path / "p.onnx", "-v")
    assert code == 0
    assert "pruned 0 weight(s)" in text and "w: axis 0 of [6, 4] is not a multiple of 4" in err


def test_weight_strip_marks_weights_and_keeps_the_rest(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    before = _digest(src)
    out = tmp_path / "weightless.onnx"
    text = _ok(parity_invoke, "weight-strip", src, out)
    model = onnx.load(str(out))
    inits = {t.name: t for t in model.graph.initializer}
    stripped = {n for n, t in inits.items() if t.doc_string.startswith("TRT_WEIGHTLESS")}
    # MatMul/Gemm/Conv inputs, and the Transpose's input feeding a MatMul; Gather's table is under 1024 elements
    assert stripped == {"w", "g", "bias", "k", "kb", "t"}
    for name in stripped:
        tensor = inits[name]
        assert tensor.doc_string == "TRT_WEIGHTLESS/" and not tensor.raw_data and not tensor.float_data
        assert list(tensor.dims) == list(_inits(src)[name].dims)
    assert not inits["small_table"].doc_string and numpy_helper.to_array(inits["small_table"]).shape == (10, 4)
    assert model.doc_string == "TRT_WEIGHTLESS"
    assert "stripped 6 weight(s), 0 of them 2:4 sparse" in text
    assert _digest(src) == before


def test_weight_strip_marks_sparse_weights_and_honours_the_exclude_list(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    pruned = tmp_path / "pruned.onnx"
    assert parity_invoke("surgeon", "prune", src, "-o", pruned)[0] == 0
    keep = tmp_path / "keep.txt"
    keep.write_text("k\nnot_there\n")
    out = tmp_path / "weightless.onnx"
    code, text, err = parity_invoke("surgeon", "weight-strip", pruned, "-o", out, "--exclude-list", keep)
    assert code == 0, err
    inits = _inits(out)
    assert {n: t.doc_string for n, t in inits.items() if t.doc_string} == {
        "w": "TRT_WEIGHTLESS/SPARSE_2_4", "g": "TRT_WEIGHTLESS/SPARSE_2_4", "t": "TRT_WEIGHTLESS/SPARSE_2_4",
        "bias": "TRT_WEIGHTLESS/", "kb": "TRT_WEIGHTLESS/",
    }  # fmt: skip
    assert numpy_helper.to_array(inits["k"]).shape == (4, 8, 3, 3)  # excluded: kept with its values
    assert "not_there" in err and "k," not in err


def test_weight_strip_qdq_strips_the_quantized_input_only(parity_invoke, tmp_path):
    inits = [
        numpy_helper.from_array(np.random.default_rng(2).standard_normal((1, 8, 5, 5)).astype(np.float32), "data"),
        numpy_helper.from_array(np.array(0.1, np.float32), "scale"),
        numpy_helper.from_array(np.array(0, np.uint8), "zp"),
        numpy_helper.from_array(np.ones((4, 8, 3, 3), np.float32), "k"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["data", "scale", "zp"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["dq"]),
        helper.make_node("Conv", ["dq", "k"], ["y"]),
    ]
    src = _model(tmp_path / "qdq.onnx", nodes, [], [_vi("y", [1, 4, 3, 3])], inits)
    out = tmp_path / "weightless.onnx"
    assert parity_invoke("surgeon", "weight-strip", src, "-o", out)[0] == 0
    assert {n for n, t in _inits(out).items() if t.doc_string} == {"data", "k"}


def test_weight_reconstruct_fills_and_prunes_then_the_model_runs(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    pruned, stripped = tmp_path / "pruned.onnx", tmp_path / "weightless.onnx"
    assert parity_invoke("surgeon", "prune", src, "-o", pruned)[0] == 0
    assert parity_invoke("surgeon", "weight-strip", pruned, "-o", stripped)[0] == 0
    before = _digest(stripped)
    outs = [tmp_path / "r1.onnx", tmp_path / "r2.onnx", tmp_path / "r3.onnx"]
    for out, seed in zip(outs, ["7", "7", "8"]):
        code, text, err = parity_invoke("surgeon", "weight-reconstruct", stripped, "-o", out, "--seed", seed)
        assert code == 0, err
    assert "reconstructed 6 weight(s) with random values, 4 pruned to 2:4 sparsity" in text
    model = onnx.load(str(outs[0]))
    inits = {t.name: t for t in model.graph.initializer}
    assert not any(t.doc_string for t in inits.values()) and "TRT_WEIGHTLESS" not in model.doc_string
    assert sparsity.sparse_weights(model) == {"w", "g", "k", "t"}
    dense = tmp_path / "dense.onnx"  # stripped from the unpruned model: nothing marked SPARSE_2_4, nothing pruned
    assert parity_invoke("surgeon", "weight-strip", src, "-o", tmp_path / "w2.onnx")[0] == 0
    assert parity_invoke("surgeon", "weight-reconstruct", tmp_path / "w2.onnx", "-o", dense)[0] == 0
    assert sparsity.sparse_weights(onnx.load(str(dense))) == set()
    assert numpy_helper.to_array(inits["bias"]).shape == (4,) and numpy_helper.to_array(inits["bias"]).any()
    assert _inits(outs[0])["w"].raw_data == _inits(outs[1])["w"].raw_data != _inits(outs[2])["w"].raw_data  # --seed
    feed = {"x": np.ones((2, 16), np.float32), "c": np.ones((1, 8, 5, 5), np.float32), "m": np.ones((3, 12), np.float32)}
    ort.InferenceSession(str(outs[0]), providers=["CPUExecutionProvider"]).run(None, feed)
    assert _digest(stripped) == before


def test_weight_reconstruct_bfloat16(tmp_path):
    w = _bf16("w", [8, 4])
    w.doc_string = "TRT_WEIGHTLESS/SPARSE_2_4"
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [_vi("x", [2, 8], 16)], [_vi("y", [2, 4], 16)], [w])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    result, report = weights.reconstruct_weights(model, seed=0)
    tensor = result.graph.initializer[0]
    assert len(tensor.raw_data) == 64 and report.pruned == ["w"]
    assert sparsity.is_sparse(sparsity.values(tensor), [8, 4], 0, TensorProto.BFLOAT16)
    onnx.checker.check_model(result, full_check=True)
    assert model.graph.initializer[0].raw_data == b""  # the model given is not modified


def test_refusals_are_one_line(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    code, _, err = parity_invoke("surgeon", "weight-reconstruct", src, "-o", tmp_path / "r.onnx")
    assert code == 2 and "not a weight-stripped model" in err and len(err.strip().splitlines()) == 1
    code, _, err = parity_invoke("surgeon", "weight-strip", src, "-o", tmp_path / "w.onnx", "--exclude-list", tmp_path / "missing.txt")
    assert code == 2 and "--exclude-list" in err and len(err.strip().splitlines()) == 1
    code, _, err = parity_invoke("surgeon", "prune", src, "-o", src)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.onnx").exists() and not (tmp_path / "w.onnx").exists()


def test_weight_strip_not_written_when_invalid_even_with_weights_refilled(parity_invoke, tmp_path):
    # Gemm's B of the wrong rank: the model is broken with or without weights; nothing may be written
    bad = tmp_path / "bad.onnx"
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [_vi("x", [2, 8])], [_vi("y", [2, 4])], [numpy_helper.from_array(np.ones((5, 4), np.float32), "w")]
    )
    onnx.save(helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]), str(bad))
    code, _, err = parity_invoke("surgeon", "weight-strip", bad, "-o", tmp_path / "w.onnx")
    assert code == 3 and "weights refilled" in err
    assert not (tmp_path / "w.onnx").exists()


def test_external_data_is_read_and_written_like_other_surgeon_commands(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    ext = tmp_path / "ext" / "net.onnx"
    ext.parent.mkdir()
    model = onnx.load(str(src))
    onnx.save(model, str(ext), save_as_external_data=True, location="net.onnx.data", size_threshold=0)
    out = tmp_path / "pruned.onnx"
    code, _, err = parity_invoke("surgeon", "prune", ext, "-o", out, "--save-external-data")
    assert code == 0, err
    assert (tmp_path / "pruned.onnx.data").exists()
    pruned = onnx.load(str(out))
    assert sparsity.sparse_weights(pruned) >= {"w", "g", "k", "t"}
    out2 = tmp_path / "weightless.onnx"
    code, _, err = parity_invoke("surgeon", "weight-strip", ext, "-o", out2)
    assert code == 0, err
    stripped = onnx.load(str(out2))
    assert all(not t.external_data for t in stripped.graph.initializer if t.doc_string)
    assert numpy_helper.to_array(next(t for t in stripped.graph.initializer if t.name == "small_table")).shape == (10, 4)


def test_fp_to_fp16_converts_before_pruning_and_after_reconstructing(parity_invoke, tmp_path):
    src = _net(tmp_path / "net.onnx")
    pruned = tmp_path / "pruned16.onnx"
    _ok(parity_invoke, "prune", src, pruned, "--fp-to-fp16")
    model = onnx.load(str(pruned))
    inits = {t.name: t for t in model.graph.initializer}
    assert inits["w"].data_type == TensorProto.FLOAT16 and model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert sparsity.sparse_weights(model) >= {"w", "g", "k", "t"}  # float16 weights pruned
    stripped = tmp_path / "weightless.onnx"  # a float32 model's: reconstruct converts once its weights are back
    _ok(parity_invoke, "prune", src, tmp_path / "pruned.onnx")
    _ok(parity_invoke, "weight-strip", tmp_path / "pruned.onnx", stripped)
    out = tmp_path / "proxy16.onnx"
    _ok(parity_invoke, "weight-reconstruct", stripped, out, "--fp-to-fp16", "--seed", "0")
    result = onnx.load(str(out))
    assert {t.name for t in result.graph.initializer if t.data_type == TensorProto.FLOAT16} >= {"w", "g", "k", "t", "bias"}
    assert sparsity.sparse_weights(result) >= {"w", "g", "k", "t"}
