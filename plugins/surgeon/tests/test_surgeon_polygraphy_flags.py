"""Polygraphy's shared loading and data-loader flags on the surgeon plugin's commands (surgeon sanitize, extract,
insert, prune, weight-strip, weight-reconstruct, inspect sparsity, check lint), sanitize's --override-inputs,
--num-const-fold-passes, --exclude-outputs and --outputs-by-type, and check lint's JSON report with Polygraphy's
keys. Each test asserts the flag's effect on a model built here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import foldable
from onnx import TensorProto, helper, numpy_helper

from parity.testing import save_graph


def _two_outputs(path: Path, batch: int | str = "N", width: int | str = 4) -> Path:
    """x[batch,width] -> MatMul(W 4x4) h -> Relu r -> Add(r, x) y; h -> Sigmoid z. Outputs y and z."""
    weight = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 16 - 0.5, "W")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["y"], name="add"),
        helper.make_node("Sigmoid", ["h"], ["z"], name="sig"),
    ]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch, width if n == "x" else 4]) for n in ("x", "y", "z")]
    return save_graph(helper.make_graph(nodes, "two", io[:1], io[1:], [weight]), path)


def _nonzero(path: Path) -> Path:
    """x[4] -> NonZero nz -> Transpose t: nz's second dim is data-dependent (a symbol only onnxruntime's symbolic
    shape inference names after the node)."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nz"), helper.make_node("Transpose", ["nz"], ["t"], name="tr")]
    graph = helper.make_graph(
        nodes, "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [helper.make_tensor_value_info("t", TensorProto.INT64, ["n", 1])]
    )
    return save_graph(graph, path)


def _gather(path: Path) -> Path:
    """y = Gather(data[5], i[1]): an index past 4 fails only when the model runs."""
    data = numpy_helper.from_array(np.arange(5, dtype=np.float32), "data")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "i"], ["y"], name="gather")],
        "gather",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [data],
    )
    return save_graph(graph, path)


def _dims(vi) -> list:
    return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]


def _external(path: Path) -> Path:
    """_two_outputs with its weight in PATH.data."""
    model = onnx.load(str(_two_outputs(path)))
    onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    return path


# --- surgeon sanitize -------------------------------------------------------------------------------


def test_sanitize_exclude_outputs_unmarks_and_cleans_up(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", _two_outputs(tmp_path / "m.onnx"), "-o", out, "--exclude-outputs", "z")
    assert code == 0, err
    model = onnx.load(str(out))
    assert [o.name for o in model.graph.output] == ["y"]
    assert "Sigmoid" not in {n.op_type for n in model.graph.node}
    code, _, err = parity_invoke("surgeon", "sanitize", tmp_path / "m.onnx", "-o", tmp_path / "o2.onnx", "--exclude-outputs", "y", "z")
    assert code == 2 and "no graph output would be left" in err


def _sanitized(parity_invoke, src: Path, out: Path, *flags: str) -> onnx.ModelProto:
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, *flags)
    assert code == 0, err
    return onnx.load(str(out))


def test_sanitize_outputs_by_type_marks_those_nodes_outputs(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    model = _sanitized(parity_invoke, src, out, "--outputs-by-type", "relu", "SIGMOID")
    assert [o.name for o in model.graph.output] == ["r", "z"]
    assert "Add" not in {n.op_type for n in model.graph.node}
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--outputs", "y", "--outputs-by-type", "Sigmoid")
    assert code == 0 and [o.name for o in onnx.load(str(out)).graph.output] == ["y", "z"]
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "x.onnx", "--outputs-by-type", "Relux")
    assert code == 2 and "did you mean 'Relu'" in err and not (tmp_path / "x.onnx").exists()


def test_sanitize_override_inputs_and_num_const_fold_passes_are_the_long_names(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--override-inputs", "x:[3,4]")
    assert code == 0, err
    assert _dims(onnx.load(str(out)).graph.input[0]) == [3, 4]
    fold = foldable(tmp_path / "fold.onnx")
    code, text, _ = parity_invoke("surgeon", "sanitize", fold, "-o", out, "--fold-constants")
    assert code == 0 and "constant folding: 2 pass(es)" in text
    code, text, _ = parity_invoke("surgeon", "sanitize", fold, "-o", out, "--fold-constants", "--num-const-fold-passes", "1")
    assert code == 0 and "constant folding: 1 pass(es)" in text


def test_sanitize_data_loader_flags_feed_the_fallback_run(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx")
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", tmp_path / "o.onnx", "--seed", "3")
    assert code == 2 and "--force-fallback-shape-inference" in err  # nothing runs the model: refused, not ignored
    saved = tmp_path / "in.json"
    code, _, err = parity_invoke("run", src, "--onnxrt", "--input-shapes", "x:[5,4]", "--save-inputs", saved)
    assert code == 0, err
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--force-fallback-shape-inference", "--load-input-data", saved)
    assert code == 0, err
    model = onnx.load(str(out))
    assert _dims(model.graph.input[0]) == [5, 4] and _dims(model.graph.output[0]) == [5, 4]  # the run saw the saved batch of 5
    code, _, err = parity_invoke("surgeon", "sanitize", src, "-o", out, "--force-fallback-shape-inference", "--iterations", "2")
    assert code == 2 and "runs the model once" in err


def test_sanitize_fp_to_fp16_converts_as_it_reads(parity_invoke, tmp_path):
    out = tmp_path / "o.onnx"
    code, _, err = parity_invoke("surgeon", "sanitize", _two_outputs(tmp_path / "m.onnx"), "-o", out, "--fp-to-fp16")
    assert code == 0, err
    model = onnx.load(str(out))
    assert [t.data_type for t in model.graph.initializer] == [TensorProto.FLOAT16]
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT


def test_symbolic_shape_inference_leaves_no_file_in_the_working_folder(parity_invoke, tmp_path, monkeypatch):
    """onnxruntime's symbolic inference saves sym_shape_infer_temp.onnx in the working folder when it cannot finish
    (here: a custom op); Parity runs it elsewhere."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Foo", ["a"], ["b"], domain="my.ops"), helper.make_node("Relu", ["b"], ["y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:]), opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)])
    model.ir_version = 10
    src = tmp_path / "custom.onnx"
    onnx.save(model, str(src))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    code, _, err = parity_invoke("surgeon", "sanitize", "-v", src, "-o", tmp_path / "o.onnx")
    assert code == 0, err
    assert "symbolic shape inference skipped: it failed" in err
    assert os.listdir(work) == []


# --- surgeon extract and insert ----------------------------------------------------------------------


def test_extract_model_inputs_set_the_fallback_runs_shapes(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    args = ("surgeon", "extract", src, "-o", out, "--inputs", "h:auto:auto", "--outputs", "r:auto", "--force-fallback-shape-inference")
    code, _, err = parity_invoke(*args, "--model-inputs", "x:[6,4]")
    assert code == 0, err
    assert _dims(onnx.load(str(out)).graph.input[0]) == [6, 4]
    code, _, err = parity_invoke(*args, "--model-input-shapes", "x:[2,4]", "--seed", "9", "--val-range", "[0,1]")
    assert code == 0 and _dims(onnx.load(str(out)).graph.input[0]) == [2, 4]


def test_extract_says_when_the_data_flags_fed_no_run(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx", batch=1)
    code, _, err = parity_invoke("surgeon", "extract", src, "-o", tmp_path / "o.onnx", "--inputs", "x:auto:auto", "--outputs", "h:auto", "--seed", "5")
    assert code == 0, err
    assert "--seed: the shapes and dtypes were known, so the model did not run on these inputs" in err


@pytest.mark.parametrize("command", ["extract", "insert"])
def test_shape_inference_and_no_onnxruntime_shape_inference(parity_invoke, tmp_path, command):
    src = _nonzero(tmp_path / "nz.onnx")
    out = tmp_path / "o.onnx"
    args = (
        ("surgeon", "extract", src, "-o", out, "--inputs", "nz:auto:auto", "--outputs", "t:auto")
        if command == "extract"
        else ("surgeon", "insert", src, "-o", out, "--op", "Identity", "--inputs", "nz", "--outputs", "nz")
    )

    def nz_dims() -> list:
        model = onnx.load(str(out))
        return next(_dims(v) for v in [*model.graph.input, *model.graph.value_info] if v.name == "nz")

    assert parity_invoke(*args).exit_code == 0
    assert "NonZero" not in str(nz_dims()[1])
    code, text, err = parity_invoke(*args, "--do-shape-inference", "-v")
    assert code == 0, err
    assert str(nz_dims()[1]).startswith("NonZero")  # onnxruntime's symbolic inference named the data-dependent dim
    assert "symbolic_shape_infer" in text
    code, _, err = parity_invoke(*args, "--shape-inference", "--no-onnxruntime-shape-inference")
    assert code == 0, err
    assert "NonZero" not in str(nz_dims()[1])
    code, _, err = parity_invoke(*args, "--no-onnxruntime-shape-inference")
    assert code == 2 and "add --shape-inference" in err


@pytest.mark.parametrize("command", ["sanitize", "extract", "insert", "prune", "weight-strip", "weight-reconstruct"])
def test_writing_commands_refuse_ignore_external_data(parity_invoke, tmp_path, command):
    src = _external(tmp_path / "m.onnx")
    extra = {"extract": ["--outputs", "y"], "insert": ["--op", "Identity", "--inputs", "r", "--outputs", "r"]}.get(command, [])
    code, out, err = parity_invoke("surgeon", command, src, "-o", tmp_path / "o.onnx", *extra, "--ignore-external-data")
    assert code == 2 and "--ignore-external-data" in err and "carries its weights" in err
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("command", ["sanitize", "extract", "insert", "prune"])
def test_load_external_data_and_external_data_path(parity_invoke, tmp_path, command):
    folder = tmp_path / "weights"
    folder.mkdir()
    _external(folder / "m.onnx")
    src = tmp_path / "m.onnx"
    (folder / "m.onnx").rename(src)  # the weights stay in weights/
    extra = {"extract": ["--outputs", "y"], "insert": ["--op", "Identity", "--inputs", "r", "--outputs", "r"]}.get(command, [])
    out = tmp_path / "out" / "o.onnx"
    out.parent.mkdir()
    code, _, err = parity_invoke("surgeon", command, src, "-o", out, *extra, "--external-data-size-threshold", "0")
    assert code == 2  # a modifier without the data path; and the data is not found either
    code, _, err = parity_invoke(
        "surgeon", command, src, "-o", out, *extra, "--load-external-data", folder, "--external-data-path", "w.bin", "--external-data-size-threshold", "0"
    )
    assert code == 0, err
    assert (out.parent / "w.bin").stat().st_size > 0
    onnx.checker.check_model(str(out), full_check=True)


# --- inspect sparsity ------------------------------------------------------------------------------------


def test_inspect_sparsity_fp_to_fp16_and_ignore_external_data(parity_invoke, tmp_path):
    src = _external(tmp_path / "m.onnx")
    code, text, err = parity_invoke("inspect", "sparsity", src)
    assert code == 0 and "W: float32[4, 4]" in text, err
    code, text, err = parity_invoke("inspect", "sparsity", src, "--fp-to-fp16")
    assert code == 0 and "W: float16[4, 4]" in text, err
    (tmp_path / "m.onnx.data").unlink()
    code, text, err = parity_invoke("inspect", "sparsity", src, "--ignore-external-data")
    assert code == 0, err
    assert "W: float32[4, 4], axis 0: not read (--ignore-external-data)" in text
    code, _, err = parity_invoke("inspect", "sparsity", src)
    assert code != 0


# --- check lint ---------------------------------------------------------------------------------------


def test_lint_report_has_polygraphys_keys_beside_paritys(parity_invoke, tmp_path):
    report = tmp_path / "lint.json"
    code, _, err = parity_invoke("check", "lint", _two_outputs(tmp_path / "m.onnx", batch=1), "-o", report)
    assert code == 0, err
    data = json.loads(report.read_text())
    assert {"format", "model", "passed", "issues", "summary", "lint_entries"} <= set(data)
    assert data["summary"]["error"] == 0 and sorted(data["summary"]["passing"]) == ["add", "mm", "relu", "sig"]
    assert data["summary"]["failing"] == []
    assert data["lint_entries"] == []


def test_lint_runs_the_model_and_its_input_flags_take_effect(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx", width="K")  # x[N,K]: Parity does not guess K
    report = tmp_path / "lint.json"
    code, _, err = parity_invoke("check", "lint", src, "-o", report)
    assert code == 0, err
    assert "skipped the onnxruntime run" in err and json.loads(report.read_text())["summary"]["passing"] == []
    code, _, err = parity_invoke("check", "lint", src, "-o", report, "--input-shapes", "x:[2,4]")
    assert code == 0, err
    assert len(json.loads(report.read_text())["summary"]["passing"]) == 4
    # a wrong shape makes the MatMul fail when the model runs: an exception entry naming the node
    code, text, err = parity_invoke("check", "lint", src, "-o", report, "--input-shapes", "x:[2,3]")
    assert code == 1
    data = json.loads(report.read_text())
    entry = next(e for e in data["lint_entries"] if e["source"] == "onnxruntime")
    assert entry["level"] == "exception" and entry["nodes"] == ["mm"]
    assert data["summary"]["failing"] == ["mm"] and data["summary"]["passing"] == []
    assert "[inference]" in text
    code, _, err = parity_invoke("check", "lint", src, "--no-onnxruntime", "--seed", "2")
    assert code == 2 and "--no-onnxruntime" in err


def test_lint_seed_and_val_range_choose_the_values_the_model_runs_on(parity_invoke, tmp_path):
    from parity.api import DataLoader, TensorMeta, save_inputs

    src = _gather(tmp_path / "g.onnx")
    meta = {"i": TensorMeta(np.dtype(np.int64), (1,))}
    index = {seed: int(DataLoader(meta, seed=seed, val_range={"": (0, 9)})[0]["i"][0]) for seed in range(1, 40)}
    good = next(s for s, i in index.items() if i < 5)
    bad = next(s for s, i in index.items() if i >= 5)
    code, _, err = parity_invoke("check", "lint", src, "--val-range", "[0,9]", "--seed", str(good))
    assert code == 0, err
    code, text, _ = parity_invoke("check", "lint", src, "--val-range", "[0,9]", "--seed", str(bad))
    assert code == 1 and "[inference]" in text
    code, _, err = parity_invoke("check", "lint", src, "--val-range", "[0,4]", "--seed", str(bad))
    assert code == 0, err
    saved = tmp_path / "in.json"
    save_inputs([{"i": np.array([7], np.int64)}], saved)
    code, text, _ = parity_invoke("check", "lint", src, "--load-inputs", saved)
    assert code == 1 and "idx=7" in text


def test_lint_fp_to_fp16_lints_the_converted_model(parity_invoke, tmp_path):
    src = _two_outputs(tmp_path / "m.onnx", batch=1)
    report = tmp_path / "lint.json"
    code, _, err = parity_invoke("check", "lint", src, "--fp-to-fp16", "-o", report)
    assert code == 0, err
    assert "fp16:" in err and "converted" in err
    data = json.loads(report.read_text())
    assert data["model"] == str(src)
    assert len(data["summary"]["passing"]) > 4  # the converted model's Cast nodes ran too


def test_lint_runs_a_model_with_external_data_only_when_asked(parity_invoke, tmp_path):
    src = _external(tmp_path / "m.onnx")
    report = tmp_path / "lint.json"
    code, _, err = parity_invoke("check", "lint", src, "-o", report)
    assert code == 0, err
    assert "skipped the onnxruntime run (it reads every weight" in err  # lint reads no weight by default
    assert json.loads(report.read_text())["summary"]["passing"] == []
    code, _, err = parity_invoke("check", "lint", src, "-o", report, "--seed", "1", "--input-shapes", "x:[2,4]")
    assert code == 0, err
    assert sorted(json.loads(report.read_text())["summary"]["passing"]) == ["add", "mm", "relu", "sig"]
