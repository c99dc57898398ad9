"""What makes ``convert --fp-to-fp16`` and ``surgeon sanitize`` fast (issue 30) without changing what they write:
onnxruntime's symbolic shape inference is loaded without the ``onnxruntime.tools`` package (which imports
PyTorch wherever it is installed), and sees the model without its large weights (the same inferred model);
a small model's fp16 conversion finds a missing fp16 kernel by validating what it wrote (no graph-only probe
first) and still keeps that op fp32."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def _conv_reshape(path: Path) -> Path:
    """Conv (a 64x64x3x3 weight, 147 KB) -> Reshape by a shape initializer -> Gemm (a 4096x10 weight): shape
    inference needs the shape tensor's values and only the dims of the weights."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((64, 64, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([1, -1], np.int64), "shape"),
        numpy_helper.from_array(rng.standard_normal((4096, 10)).astype(np.float32), "fc"),
        numpy_helper.from_array(np.ones(10, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64, 8, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def test_symbolic_shape_inference_does_not_import_the_onnxruntime_tools_package(tmp_path):
    """``onnxruntime.tools/__init__`` imports PyTorch where it is installed (1.5-3 s); the inference is loaded
    from its own file, and works."""
    model = _conv_reshape(tmp_path / "m.onnx")
    code = (
        "import sys, onnx\n"
        "from parity import onnx_models\n"
        f"out = onnx_models.symbolic_shapes(onnx.load({str(model)!r}))\n"
        "assert any(vi.name == 'flat' for vi in out.graph.value_info), out.graph.value_info\n"
        "print(sorted(m for m in ('onnxruntime.tools', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_sanitize_infers_on_the_model_without_its_weights_and_gives_the_same_model(tmp_path):
    """The skeleton's inference (large weights as dims and type only) gives the model full inference gives,
    weights and all, byte for byte."""
    from parity_surgeon.sanitizer import SanitizeReport, _infer, _shape_skeleton

    from parity import onnx_models

    model = onnx.load(str(_conv_reshape(tmp_path / "m.onnx")))
    skeleton, big = _shape_skeleton(model)
    assert set(big) == {"w", "fc"}  # the int64 shape and the 40-byte bias keep their values
    assert not any(t.raw_data or t.float_data for t in skeleton.graph.initializer if t.name in big)
    full = onnx_models.symbolic_shapes(model)
    inferred, status = _infer(model, True, report := SanitizeReport())
    assert status == "ok" and report.symbolic
    assert inferred.SerializeToString() == full.SerializeToString()
    assert [t.SerializeToString() for t in inferred.graph.initializer] == [t.SerializeToString() for t in model.graph.initializer]


def _constant_of_shape(path: Path, batch: int | str = 1) -> Path:
    """x[batch, 4096] @ ConstantOfShape([4096, 64], 0.5) -> Reshape to [-1, 8, 8]: folding writes a 1 MB weight."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4096])
    nodes = [
        helper.make_node("ConstantOfShape", ["dims"], ["w"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Reshape", ["m", "shape"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([4096, 64], np.int64), "dims"), numpy_helper.from_array(np.array([-1, 8, 8], np.int64), "shape")]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def test_sanitize_skips_inference_between_passes_on_a_static_graph(tmp_path, monkeypatch):
    """After a folding pass, a graph whose every tensor has a type and static shape is not inferred again before
    the next pass (nothing is left to resolve): the same model as with that inference, one inference fewer. A
    graph with a dynamic dim still gets it."""
    from parity_surgeon import sanitizer

    calls: list[int] = []
    real = sanitizer._infer

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sanitizer, "_infer", counted)
    for batch, between in ((1, 0), ("n", 1)):
        src = _constant_of_shape(tmp_path / f"cos_{batch}.onnx", batch)
        calls.clear()
        fast, report = sanitizer.sanitize(str(src), fold_constants=True)
        assert report.pass_nodes == [(3, 2), (2, 2)] and len(calls) == 2 + between
        monkeypatch.setattr(sanitizer, "_all_static", lambda graph: False)
        calls.clear()
        slow, _ = sanitizer.sanitize(str(src), fold_constants=True)
        monkeypatch.undo()
        monkeypatch.setattr(sanitizer, "_infer", counted)
        assert len(calls) == 3
        assert fast.SerializeToString() == slow.SerializeToString()


def test_sanitize_fold_constants_writes_the_folded_weights(parity_invoke, tmp_path):
    """End to end: the folded ConstantOfShape weights are in the written model (with data: the skeleton's bare
    tensors never reach the file), which passes the full checker and runs."""
    src, out = _constant_of_shape(tmp_path / "cos.onnx"), tmp_path / "folded.onnx"
    code, text, err = parity_invoke("surgeon", "sanitize", src, "--fold-constants", "-o", out)
    assert code == 0, err
    folded = onnx.load(str(out))
    assert [n.op_type for n in folded.graph.node] == ["MatMul", "Reshape"]
    weight = {t.name: numpy_helper.to_array(t) for t in folded.graph.initializer}["w"]
    assert weight.shape == (4096, 64) and np.all(weight == 0.5)
    onnx.checker.check_model(str(out), full_check=True)
    feed = {"x": np.ones((1, 4096), np.float32)}
    assert np.all(ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, feed)[0] == 2048.0)


def test_small_model_missing_fp16_kernel_is_found_by_the_final_check(parity_invoke, tmp_path, monkeypatch):
    """A model with its weights inside and under the probe's size: no graph-only probe; the written model's own
    validation finds the op type onnxruntime could not run in fp16 (simulated for Erf), which is kept fp32 and
    the model written again; the report names it."""
    from parity import onnx_models

    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Erf", ["m"], ["e"]), helper.make_node("Relu", ["e"], ["y"])]
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32), "w")
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8]) for n in "xy")
    graph = helper.make_graph(nodes, "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    src, out = tmp_path / "erf.onnx", tmp_path / "erf16.onnx"
    onnx.save(model, str(src))
    real = onnx_models.validate
    checked: list[str] = []

    def validate(model, what="the model", onnxruntime=True, missing_kernels_ok=False):
        checked.append(model if isinstance(model, str) else "bytes")
        proto = onnx.load(model) if isinstance(model, str) else onnx.load_from_string(model)
        if any(n.op_type == "Erf" and not n.input[0].endswith("__fp32") for n in proto.graph.node) and not missing_kernels_ok:
            raise onnx_models.MissingKernelError(f"{what} does not load in onnxruntime (CPU): no kernel for Erf at these types", "Erf")
        return real(model, what, onnxruntime, missing_kernels_ok)

    monkeypatch.setattr(onnx_models, "validate", validate)
    code, text, err = parity_invoke("convert", "--fp-to-fp16", src, "-o", out)
    assert code == 0, err
    assert "kept fp32 because onnxruntime has no fp16 kernel: Erf" in text + err
    assert len(checked) == 2 and "bytes" not in checked  # two writes, each checked on its path; no probe
    converted = onnx.load(str(out))
    assert [n.op_type for n in converted.graph.node if n.op_type != "Cast"] == ["MatMul", "Erf", "Relu"]
    assert all(n.input[0].endswith("__fp32") for n in converted.graph.node if n.op_type == "Erf")
    assert {t.name: t.data_type for t in converted.graph.initializer}["w"] == TensorProto.FLOAT16
    assert sorted(p.name for p in tmp_path.iterdir()) == ["erf.onnx", "erf16.onnx"]  # no stray file from the first write


def test_folding_sessions_run_on_one_thread_and_the_session_class_comes_back(tmp_path, monkeypatch):
    """graphsurgeon makes its folding sessions with default options (a thread per core); while sanitize folds,
    a session made without options gets one thread; onnxruntime's class is itself again afterwards."""
    from parity_surgeon import sanitizer

    real = ort.InferenceSession
    seen: list[int] = []
    original_init = real.__init__

    def spy(self, model, sess_options=None, *args, **kwargs):
        seen.append(sess_options.intra_op_num_threads if sess_options is not None else -1)
        original_init(self, model, sess_options, *args, **kwargs)

    monkeypatch.setattr(real, "__init__", spy)
    folded, report = sanitizer.sanitize(str(_constant_of_shape(tmp_path / "cos.onnx")), fold_constants=True)
    assert report.pass_nodes[0] == (3, 2) and seen and set(seen) == {1}
    assert ort.InferenceSession is real


def _folding_reshape() -> onnx.ModelProto:
    """A dynamic-batch model whose first folding pass changes it (Add of two constants), whose shapes onnx's own
    inference leaves symbolic: sanitize asks onnxruntime's symbolic inference."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    nodes = [
        helper.make_node("Add", ["c1", "c2"], ["c"]),  # folds: the graph changes in the first pass
        helper.make_node("Mul", ["x", "c"], ["m"]),
        helper.make_node("Shape", ["m"], ["s"]),
        helper.make_node("Reshape", ["m", "s"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.full(4, v, np.float32), n) for n, v in (("c1", 1.0), ("c2", 2.0))]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def test_sanitize_runs_symbolic_shape_inference_once(tmp_path, monkeypatch):
    """onnxruntime's symbolic inference runs once per sanitize; the passes after it use onnx's own inference, which
    keeps the symbolic dims. Run after every folding pass and at the end, it cost PP-OCR's detector minutes (sympy
    simplifying its Resize chain's dims) for the same model."""
    from parity_surgeon.sanitizer import sanitize

    from parity import onnx_models

    model = _folding_reshape()
    calls = []
    real = onnx_models.symbolic_shapes
    monkeypatch.setattr(onnx_models, "symbolic_shapes", lambda m, *a, **k: calls.append(1) or real(m, *a, **k))
    out, report = sanitize(model, fold_constants=True)
    assert report.symbolic and report.passes >= 1 and len(calls) == 1, (calls, report)
    assert [n.op_type for n in out.graph.node] == ["Mul", "Shape", "Reshape"]
    y = next(vi for vi in out.graph.output if vi.name == "y")
    assert [d.dim_param or d.dim_value for d in y.type.tensor_type.shape.dim][1:] == [4]
    onnx.checker.check_model(out, full_check=True)
    feed = {"x": np.ones((3, 4), np.float32)}
    assert np.array_equal(ort.InferenceSession(out.SerializeToString()).run(None, feed)[0], np.full((3, 4), 3.0, np.float32))


def test_symbolic_shape_inference_that_raised_is_not_tried_again(monkeypatch):
    """Where onnxruntime's symbolic inference raises (its own assertions do, on PP-OCR's classifier and both silero-vad
    models), the later passes use onnx's inference without trying it again: it raised again after every folding pass
    on each of them, 0.3-0.4 s a try. The note says why once; the model is folded and valid."""
    from parity_surgeon.sanitizer import sanitize

    from parity import onnx_models

    calls = []

    def raises(model, *args, **kwargs):
        calls.append(1)
        raise AssertionError

    monkeypatch.setattr(onnx_models, "symbolic_shapes", raises)
    out, report = sanitize(_folding_reshape(), fold_constants=True)
    assert len(calls) == 1 and not report.symbolic and report.passes >= 1, (calls, report)
    assert [n for n in report.verbose_notes if "it failed (AssertionError" in n] == [report.verbose_notes[0]]
    assert [n.op_type for n in out.graph.node] == ["Mul", "Shape", "Reshape"]
    onnx.checker.check_model(out, full_check=True)
    feed = {"x": np.ones((3, 4), np.float32)}
    assert np.array_equal(ort.InferenceSession(out.SerializeToString()).run(None, feed)[0], np.full((3, 4), 3.0, np.float32))


def test_localize_computes_only_what_it_shows_and_answers_the_same(tmp_path, monkeypatch):
    """``debug localize`` needs each tensor's verdict, max errors, cosine and SQNR: percentiles and both tensors'
    statistics only for its pictures. Its report is the same either way."""
    import json

    from parity.compare import simple
    from parity.testing import invoke, mlp

    levels = []
    real_init = simple.SimpleCompare.__init__

    def recording(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        levels.append(self.statistics)

    monkeypatch.setattr(simple.SimpleCompare, "__init__", recording)
    model = mlp(tmp_path / "mlp.onnx", planted=0.5)
    reports = {}
    for case, extra in (("plain", []), ("pictures", ["--save-report-html", str(tmp_path / "r.html")])):
        out = tmp_path / f"{case}.json"
        result = invoke("debug", "localize", model, "--onnxrt", "--onnxrt=graph-optimization-level=disable", "--report", out, *extra)
        assert result.exit_code in (0, 1), result.stderr
        reports[case] = {k: v for k, v in json.loads(out.read_text()).items() if k != "seconds"}
    assert levels == ["shown", "histogram"]
    assert reports["plain"] == reports["pictures"]


def test_localize_collections_skip_what_lives_through_the_search(tmp_path, monkeypatch):
    """Each batch's session is released with a full ``gc.collect``; the graphs and the caller's objects are frozen
    for the search (``gc.freeze``), so a collection walks only what the batch made (PP-OCR's detector with a tight
    budget: 1,344 collections of 37 ms each were 49 s of a 56 s localize), and unfrozen after it."""
    import gc

    from parity_surgeon import localizer

    from parity.testing import invoke, mlp

    frozen = []
    real = gc.collect
    monkeypatch.setattr(localizer.gc, "collect", lambda *a: frozen.append(gc.get_freeze_count()) or real(*a))
    before = gc.get_freeze_count()
    result = invoke("debug", "localize", mlp(tmp_path / "m.onnx"), "--onnxrt", "--validate", "--memory-budget", "1")
    assert result.exit_code == 0, result.stderr
    assert frozen and min(frozen) > before, frozen
    assert gc.get_freeze_count() == before
