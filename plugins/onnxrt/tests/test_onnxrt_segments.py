"""``--onnx-outputs mark all`` on a model with big external weights runs as a chain of segments, one session at a
time (parity_onnxrt.segments): the same values bit for bit as one session, on the LLM-like decoder and on a trained
model; cuts never cross a value that is not a typed tensor; a run that does not mark every tensor is one session.

The size from which runs go in segments (1 GiB) is lowered here so small models take that path."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from parity_onnxrt import segments

from parity.results.files import load_results

VALS = ["--val-range", "input_ids:[0,999]"]
CORPUS = Path.home() / ".cache" / "parity-corpus" / "models"


@pytest.fixture
def sessions(monkeypatch):
    """Segments from any size (each about a quarter of the weights); the sessions built, counted."""
    import onnxruntime as ort

    monkeypatch.setattr(segments, "SEGMENT_FROM", 0)
    monkeypatch.setattr(segments, "MIN_SEGMENT", 0)
    monkeypatch.setattr(segments, "SEGMENTS", 4)
    built: list[int] = []
    real = ort.InferenceSession

    def session(source, *args, **kwargs):
        built.append(1)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", session)
    return built


def _values(path: Path) -> dict[str, np.ndarray]:
    (run,) = [iters for _, iters in load_results(path)]
    return {name: np.asarray(value) for name, value in run[0].items()}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    differ = [n for n in a if a[n].dtype != b[n].dtype or a[n].shape != b[n].shape or a[n].tobytes() != b[n].tobytes()]
    assert not differ, f"{len(differ)} tensors differ: {differ[:3]}"


def _both(parity_invoke, monkeypatch, sessions: list, model: Path, tmp_path: Path, *args: str) -> tuple[dict, dict, int]:
    """The mark-all values in segments (the fixture's sizes), then in one session; the sessions the first run built."""
    seg, whole = tmp_path / "seg.npz", tmp_path / "whole.npz"
    code, text, err = parity_invoke("run", model, "--onnxrt", "--onnx-outputs", "mark", "all", *args, "--save-outputs", seg)
    assert code == 0, text + err
    first = len(sessions)
    monkeypatch.setattr(segments, "SEGMENT_FROM", 1 << 62)
    code, text, err = parity_invoke("run", model, "--onnxrt", "--onnx-outputs", "mark", "all", *args, "--save-outputs", whole)
    assert code == 0, text + err
    return _values(seg), _values(whole), first


def test_decoder_in_segments_gives_the_values_of_one_session(parity_invoke, llm_decoder, monkeypatch, tmp_path, sessions):
    model = llm_decoder(layers=3)
    seg, whole, runs_in_segments = _both(parity_invoke, monkeypatch, sessions, model, tmp_path, *VALS)
    _same(seg, whole)
    assert len(seg) > 100 and "logits" in seg
    # the marked run in 4-5 segments, then its unmarked twin (one session); then one session and its twin
    assert runs_in_segments >= 5 and len(sessions) == runs_in_segments + 2


@pytest.mark.skipif(not (CORPUS / "ppocr_det.onnx").exists(), reason="the corpus is fetched by tests/corpus (pip download)")
def test_trained_model_in_segments_gives_the_values_of_one_session(parity_invoke, monkeypatch, tmp_path, sessions):
    """PP-OCR's detector (Conv, BatchNorm, Resize, Sigmoid...), its weights (Constant nodes in the file) made
    initializers and moved to an external data file."""
    model = onnx.load(CORPUS / "ppocr_det.onnx")
    constants = [n for n in model.graph.node if n.op_type == "Constant" and n.attribute[0].name == "value"]
    for node in constants:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(node.attribute[0].t)
        tensor.name = node.output[0]
        model.graph.initializer.append(tensor)
        model.graph.node.remove(node)
    onnx.save_model(model, tmp_path / "det.onnx", save_as_external_data=True, location="det.onnx.data", size_threshold=1024)
    seg, whole, _ = _both(parity_invoke, monkeypatch, sessions, tmp_path / "det.onnx", tmp_path, "--input-shapes", "x:[1,3,64,64]")
    _same(seg, whole)
    assert len(sessions) >= 6


def test_excluded_outputs_leave_segments_with_nothing_to_return_out(parity_invoke, llm_decoder, monkeypatch, tmp_path, sessions):
    """mark all minus the logits: the last segment, which computes only them, is not run (onnxruntime refuses a
    session asked for no output), and the rest agree with one session."""
    monkeypatch.setattr(segments, "SEGMENTS", 16)  # the LM head's weight alone passes a segment's share
    model = llm_decoder(layers=3)
    seg, whole, _ = _both(parity_invoke, monkeypatch, sessions, model, tmp_path, *VALS, "--onnx-exclude-outputs", "logits")
    _same(seg, whole)
    assert "logits" not in seg and len(seg) > 100


def test_named_outputs_run_in_one_session(parity_invoke, llm_decoder, sessions):
    code, text, err = parity_invoke("run", llm_decoder(layers=3), "--onnxrt", "--onnx-outputs", "block0/mlp/residual:0", "logits", *VALS)
    assert code == 0, text + err
    assert len(sessions) == 2  # the marked runner and its unmarked twin


def test_cuts_never_cross_a_sequence(tmp_path):
    """x -> MatMul(w0) -> SequenceConstruct -> SequenceAt -> MatMul(w1) -> MatMul(w2): with room for one weight per
    segment, the cut after SequenceConstruct is not allowed (a sequence cannot be fed to a session)."""
    weights = [helper.make_tensor(f"w{i}", TensorProto.FLOAT, [4, 4], np.eye(4, dtype=np.float32).ravel().tolist()) for i in range(3)]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["a"]),
        helper.make_node("SequenceConstruct", ["a"], ["seq"]),
        helper.make_node("SequenceAt", ["seq", "zero"], ["b"]),
        helper.make_node("MatMul", ["b", "w1"], ["c"]),
        helper.make_node("MatMul", ["c", "w2"], ["y"]),
    ]
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [*weights, zero]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.save_model(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    lazy = onnx.load(tmp_path / "m.onnx", load_external_data=False)
    planned = segments.plan(lazy, 64, segments.tensor_types(lazy))  # one 4x4 float weight per segment
    crossing = {t for s in planned for t in s.reads}
    assert "seq" not in crossing and "a" not in crossing  # a and seq stay inside one segment
    assert len(planned) == 3  # cut before MatMul(w1) and before MatMul(w2)
    lazy = onnx_models_mark_all(lazy)
    session = segments.SegmentedSession(lazy, _ort_session(tmp_path), limit=64)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))
    assert np.array_equal(out["y"], x) and np.array_equal(out["c"], x)


def onnx_models_mark_all(model):
    from parity.api import onnx_models

    return onnx_models.mark_outputs(model, ["mark", "all"])


def _ort_session(folder: Path):
    from parity_onnxrt.api import SessionFromOnnx

    return lambda part: SessionFromOnnx(part, base_dir=folder)()


def test_segments_hold_less_than_the_whole_model(llm_decoder, tmp_path):
    """Each segment's session reads about its share of the weights, not all of them."""
    from parity.api import onnx_external, onnx_models

    source = llm_decoder(layers=4)
    folder = tmp_path / "m"
    shutil.copytree(source.parent, folder)
    model = onnx_models.mark_outputs(onnx.load(folder / source.name, load_external_data=False), ["mark", "all"])
    total = onnx_models.external_bytes(model)
    planned = segments.plan(model, total // 4, segments.tensor_types(model))
    held = []
    for s in planned:
        reads = {t for i in s.nodes for t in onnx_models.node_inputs(model.graph.node[i])}
        held.append(sum(onnx_external.nbytes(t) for t in model.graph.initializer if t.name in reads))
    assert len(planned) >= 4 and max(held) < total // 2
