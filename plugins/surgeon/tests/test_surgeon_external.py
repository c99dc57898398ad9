"""``surgeon sanitize/extract/insert`` and ``check lint`` on models whose weights are in external data files
(issue 25): weights stay in their files (read only where a command computes on them), outputs are valid on
their path and run in onnxruntime, inputs are left byte-identical, no stray files, bad inputs are one line.
The models: the ``llm_decoder`` fixture (repo-root conftest.py) and a tiny model with a foldable weight."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from parity.api import onnx_external, onnx_models

BLOCK0 = "block0/mlp/residual:0"  # block 0's output in the decoder


def _files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _valid(path: Path) -> ort.InferenceSession:
    """The written model passes onnx's full check on its path and loads in onnxruntime."""
    onnx.checker.check_model(str(path), full_check=True)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _ids(seed: int = 0) -> dict[str, np.ndarray]:
    return {"input_ids": np.random.default_rng(seed).integers(0, 1000, (1, 16), dtype=np.int64)}


def _reference(model: Path, outputs: list[str], feed: dict) -> list[np.ndarray]:
    """The original model's values of ``outputs`` (its weights read in: it is small)."""
    proto = onnx_models.mark_outputs(onnx_models.load(model), outputs)
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(outputs, feed)


def _one_line(err: str) -> None:
    assert err.count("\n") == 1 and err.startswith("parity: error:") and "Traceback" not in err, err


@pytest.fixture(scope="module")
def decoder(llm_decoder) -> Path:
    """The repo's small LLM-like decoder (2 blocks, 8 MiB of weights in decoder.onnx.data); read-only."""
    return llm_decoder()


def foldable(folder: Path) -> Path:
    """``y = x @ w_big + x @ Transpose(w_t)``, both weights external: ``Transpose(w_t)`` folds, ``w_big`` must
    stay in its file."""
    rng = np.random.default_rng(3)
    w_big = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w_big")
    w_t = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w_t")
    nodes = [
        helper.make_node("Transpose", ["w_t"], ["w_t_T"], name="transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w_big"], ["a"], name="mm_big"),
        helper.make_node("MatMul", ["x", "w_t_T"], ["b"], name="mm_t"),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "foldable", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])], [w_big, w_t]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fold.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="fold.onnx.data", size_threshold=0)
    return path


# --- sanitize ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("save", [[], ["--save-external-data"]], ids=["inside", "external"])
def test_sanitize_keeps_logits_and_the_weights_in_files(parity_invoke, decoder, tmp_path, save):
    before = _files(decoder.parent)
    out = tmp_path / "s.onnx"
    code, text, err = parity_invoke("surgeon", "sanitize", decoder, "-o", out, "--fold-constants", "--cleanup", *save)
    assert code == 0, err
    assert _files(tmp_path).keys() == ({"s.onnx", "s.onnx.data"} if save else {"s.onnx"})
    assert ("wrote" in text) and ("s.onnx.data" in text) == bool(save)
    feed = _ids()
    np.testing.assert_array_equal(_valid(out).run(["logits"], feed)[0], _reference(decoder, ["logits"], feed)[0])
    assert _files(decoder.parent) == before  # inputs byte-identical, nothing written beside them
    written = onnx.load(str(out), load_external_data=False)
    assert all(onnx_external.is_external(t) for t in written.graph.initializer if onnx_external.nbytes(t) >= 4096) == bool(save)


def test_fold_reads_only_the_weights_a_foldable_node_reads(tmp_path):
    from parity_surgeon import graph as g
    from parity_surgeon.sanitizer import foldable_external, sanitize

    path = foldable(tmp_path / "in")
    proto = g.load(path, lazy=True)
    assert all(onnx_external.is_external(t) for t in proto.graph.initializer)
    assert foldable_external(proto) == {"w_t"}
    result, report = sanitize(proto, fold_constants=True, base_dir=path.parent)
    assert [n.op_type for n in result.graph.node] == ["MatMul", "MatMul", "Add"]
    inits = {t.name: t for t in result.graph.initializer}
    assert set(inits) == {"w_big", "w_t_T"}
    assert onnx_external.is_external(inits["w_big"])  # never read: still a reference into fold.onnx.data
    assert not onnx_external.is_external(inits["w_t_T"])  # computed by folding
    assert all(onnx_external.is_external(t) for t in proto.graph.initializer)  # the input proto is untouched


def test_sanitize_fold_cli_resolves_weights_against_the_model_not_the_cwd(parity_invoke, tmp_path, monkeypatch):
    src = foldable(tmp_path / "in")
    before = _files(src.parent)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # graphsurgeon alone would look for fold.onnx.data here
    out = tmp_path / "out" / "folded.onnx"
    code, text, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--fold-constants", "--save-external-data", "--external-data-size-threshold", "0")
    assert code == 0, err
    assert "removed: 1 Transpose" in text
    written = onnx.load(str(out), load_external_data=False)
    assert {t.name for t in written.graph.initializer} == {"w_big", "w_t_T"}
    assert all(onnx_external.is_external(t) for t in written.graph.initializer)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    expected = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(_valid(out).run(None, {"x": x})[0], expected, rtol=1e-6, atol=1e-6)
    assert _files(out.parent).keys() == {"folded.onnx", "folded.onnx.data"}
    assert _files(src.parent) == before and not any((tmp_path / "elsewhere").iterdir())


# --- extract -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("save", [[], ["--save-external-data", "block0.bin"]], ids=["inside", "external"])
def test_extract_block0_holds_only_its_weights(parity_invoke, decoder, tmp_path, save):
    before = _files(decoder.parent)
    out = tmp_path / "b0.onnx"
    code, _, err = parity_invoke("surgeon", "extract", decoder, "-o", out, "--outputs", f"{BLOCK0}:auto", *save)
    assert code == 0, err
    assert _files(tmp_path).keys() == ({"b0.onnx", "block0.bin"} if save else {"b0.onnx"})
    feed = _ids(1)
    np.testing.assert_array_equal(_valid(out).run([BLOCK0], feed)[0], _reference(decoder, [BLOCK0], feed)[0])
    data = decoder.with_name("decoder.onnx.data").stat().st_size
    written = (tmp_path / "block0.bin") if save else out
    assert written.stat().st_size < 0.6 * data  # block 1 and the LM head are left out
    names = {t.name for t in onnx.load(str(out), load_external_data=False).graph.initializer}
    assert "lm_head/weight" not in names and not any(n.startswith("block1/") for n in names)
    assert _files(decoder.parent) == before


def test_extract_fallback_run_reads_the_weights_from_their_folder(parity_invoke, tmp_path, monkeypatch):
    """Shape inference cannot size a Reshape to a runtime shape: extract runs the model, whose weight is external
    (onnxruntime gets the graph-only message and the data's folder, not the current directory)."""
    w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
        helper.make_node("MatMul", ["r", "w"], ["m"], name="mm"),
        helper.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    graph = helper.make_graph(nodes, "dyn", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    (tmp_path / "in").mkdir()
    onnx.save_model(model, str(tmp_path / "in" / "dyn.onnx"), save_as_external_data=True, location="dyn.onnx.data", size_threshold=0)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    out = tmp_path / "sub.onnx"
    code, _, err = parity_invoke("surgeon", "extract", tmp_path / "in" / "dyn.onnx", "--inputs", "r:auto:auto", "--outputs", "y:auto", "-o", out)
    assert code == 0, err
    sub = _valid(out)
    assert sub.get_inputs()[0].name == "r" and len(sub.get_inputs()[0].shape) == 2
    np.testing.assert_array_equal(sub.run(None, {"r": np.ones((2, 3), np.float32)})[0], np.full((2, 4), 3, np.float32))


# --- insert --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("save", [[], ["--save-external-data"]], ids=["inside", "external"])
def test_insert_keeps_the_other_weights(parity_invoke, decoder, tmp_path, save):
    before = _files(decoder.parent)
    out = tmp_path / "i.onnx"
    up = "block0/mlp/up/add_bias:0"
    args = ["--op", "Relu", "--inputs", up, "--outputs", "block0/mlp/gelu/mul_half:0", "--name", "relu0"]
    code, text, err = parity_invoke("surgeon", "insert", decoder, "-o", out, *args, *save)
    assert code == 0, err
    assert "nodes: 74 -> 70" in text  # the GELU's five nodes became one
    assert _files(tmp_path).keys() == ({"i.onnx", "i.onnx.data"} if save else {"i.onnx"})
    feed = _ids(2)
    (logits,) = _valid(out).run(["logits"], feed)
    assert np.isfinite(logits).all() and logits.shape == (1, 16, 1000)
    model = onnx.load(str(out))
    assert any(n.name == "relu0" for n in model.graph.node)
    assert len(model.graph.initializer) == 44  # GELU's constants are shared with block 1: every weight is kept
    assert _files(decoder.parent) == before


def test_past_the_limit_the_weights_go_to_a_data_file_unasked(parity_invoke, decoder, tmp_path, monkeypatch):
    """With protobuf's limit lowered below the decoder's 8 MiB of weights, every command still works (no message
    holding the weights is ever serialized), and a written model gets OUTPUT.data with a one-line note."""
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", 1 << 20)
    before = _files(decoder.parent)
    out = tmp_path / "s.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", decoder, "-o", out, "--fold-constants")
    assert code == 0, err
    assert err.count("\n") == 1 and "parity: note: the weights" in err and "s.onnx.data" in err and "2 GiB" in err
    assert _files(tmp_path).keys() == {"s.onnx", "s.onnx.data"}
    feed = _ids(4)
    np.testing.assert_array_equal(_valid(out).run(["logits"], feed)[0], _reference(decoder, ["logits"], feed)[0])
    code, _, err = parity_invoke("surgeon", "extract", decoder, "-o", tmp_path / "x.onnx", "--outputs", BLOCK0)
    assert code == 0 and "x.onnx.data" in err, err
    code, out_text, err = parity_invoke("check", "lint", decoder)
    assert code == 0 and "PASSED" in out_text, out_text + err
    assert _files(decoder.parent) == before


# --- --external-data-dir, bad inputs ---------------------------------------------------------------------------


def test_external_data_dir_names_the_weights_folder(parity_invoke, decoder, tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(decoder, lone / "decoder.onnx")  # the graph alone; its data stays in the decoder's folder
    code, _, err = parity_invoke("surgeon", "extract", lone / "decoder.onnx", "-o", tmp_path / "x.onnx", "--outputs", BLOCK0)
    assert code == 3 and "decoder.onnx.data" in err and "missing" in err and "--external-data-dir" in err
    _one_line(err)
    out = tmp_path / "out" / "s.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", lone / "decoder.onnx", "-o", out, "--external-data-dir", decoder.parent, "--save-external-data")
    assert code == 0, err
    feed = _ids(3)
    np.testing.assert_array_equal(_valid(out).run(["logits"], feed)[0], _reference(decoder, ["logits"], feed)[0])
    assert _files(lone).keys() == {"decoder.onnx"} and _files(out.parent).keys() == {"s.onnx", "s.onnx.data"}


@pytest.mark.parametrize("command", ["sanitize", "extract", "insert"])
def test_bad_external_data_flags_are_one_line(parity_invoke, decoder, tmp_path, command):
    extra = {"sanitize": [], "extract": ["--outputs", BLOCK0], "insert": ["--op", "Relu", "--inputs", BLOCK0, "--outputs", "logits"]}[command]
    run = lambda *args: parity_invoke("surgeon", command, decoder, "-o", tmp_path / "o.onnx", *extra, *args)  # noqa: E731
    code, _, err = run("--external-data-size-threshold", "1K")
    assert code == 2 and "--save-external-data" in err
    _one_line(err)
    code, _, err = run("--no-save-all-tensors-to-one-file")
    assert code == 2 and "--save-external-data" in err
    code, _, err = run("--external-data-dir", tmp_path / "nowhere")
    assert code == 2 and "not a folder" in err
    _one_line(err)
    code, _, err = run("--external-data-dir", decoder)  # a file
    assert code == 2 and "Traceback" not in err
    code, _, err = run("--save-external-data", "--external-data-size-threshold", "lots")
    assert code == 2 and "lots" in err
    _one_line(err)
    assert not any(tmp_path.iterdir())


def test_output_data_cannot_replace_the_inputs_data(parity_invoke, decoder, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("decoder.onnx", "decoder.onnx.data"):
        shutil.copy(decoder.with_name(name), folder / name)
    before = _files(folder)
    code, _, err = parity_invoke("surgeon", "sanitize", folder / "decoder.onnx", "-o", folder / "s.onnx", "--save-external-data", "decoder.onnx.data")
    assert code == 2 and "refusing to overwrite" in err and "decoder.onnx.data" in err
    _one_line(err)
    assert _files(folder) == before


# --- check lint ------------------------------------------------------------------------------------------------


def _no_weight_reads(monkeypatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("a weight was read")

    monkeypatch.setattr(onnx_external.WeightReader, "buffer", refuse)


def test_lint_without_the_weights(parity_invoke, decoder, tmp_path, monkeypatch):
    _no_weight_reads(monkeypatch)
    code, out, err = parity_invoke("check", "lint", decoder)
    assert code == 0 and "PASSED" in out, out + err
    lone = tmp_path / "lone.onnx"
    shutil.copy(decoder, lone)  # its data file decoder.onnx.data is not beside it
    code, _, err = parity_invoke("check", "lint", lone)
    assert code == 3 and "missing" in err
    _one_line(err)
    code, out, err = parity_invoke("check", "lint", lone, "--ignore-external-data", "-o", tmp_path / "lint.json")
    assert code == 0 and "PASSED | 0 error(s), 0 warning(s)" in out, out + err
    assert err.count("\n") == 1 and "skipped the onnxruntime load" in err
    import json

    assert json.loads((tmp_path / "lint.json").read_text())["skipped"]
    code, out, err = parity_invoke("check", "lint", lone, "--external-data-dir", decoder.parent)
    assert code == 0 and "PASSED" in out, out + err
    # the weights are found; lint still reads none of them unless a data flag asks it to run the model (and says so)
    assert err.count("\n") == 1 and "skipped the onnxruntime run (it reads every weight" in err, err
    code, _, err = parity_invoke("check", "lint", lone, "--external-data-dir", decoder.parent, "--ignore-external-data")
    assert code == 2
    _one_line(err)


def test_lint_finds_problems_in_a_model_whose_data_is_absent(parity_invoke, tmp_path):
    src = foldable(tmp_path / "in")
    model = onnx.load(str(src), load_external_data=False)
    model.graph.node[1].input[0] = "nowhere"  # mm_big reads a tensor nothing produces
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(model.SerializeToString())  # fold.onnx.data is not beside it
    code, out, err = parity_invoke("check", "lint", broken, "--ignore-external-data")
    assert code == 1 and "[dangling-input]" in out, out + err
