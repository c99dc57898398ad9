"""parity_polygraphy.backend.onnx: Polygraphy's ONNX loaders on real models built with onnx.helper."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx_graphsurgeon as gs
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from parity_polygraphy.backend.onnx import (
    BytesFromOnnx,
    ConvertToFp16,
    FoldConstants,
    ModifyOutputs,
    OnnxFromBytes,
    OnnxFromPath,
    OnnxFromTfGraph,
    SaveOnnx,
    bytes_from_onnx,
    extract_subgraph,
    fold_constants,
    gs_from_onnx,
    infer_shapes,
    onnx_from_path,
    set_upper_bound,
)
from parity_polygraphy.backend.onnx import util as onnx_util
from parity_polygraphy.exception import PolygraphyException


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


def chain() -> onnx.ModelProto:
    """x -> Relu -> a -> Neg -> y, x: float32[2, 3]."""
    return _model(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )


def foldable() -> onnx.ModelProto:
    """y = x + (c1 * c2): the constant branch folds into one initializer, leaving one Add."""
    c1 = numpy_helper.from_array(np.full((3,), 2.0, np.float32), "c1")
    c2 = numpy_helper.from_array(np.full((3,), 3.0, np.float32), "c2")
    return _model(
        [helper.make_node("Mul", ["c1", "c2"], ["c"]), helper.make_node("Add", ["x", "c"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [c1, c2],
    )


def run(model, feed):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)


def test_onnx_from_path_reads_external_weights_into_the_model(tmp_path):
    model = foldable()
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    loaded = OnnxFromPath(str(path))()
    assert all(t.data_location == TensorProto.DEFAULT for t in loaded.graph.initializer)
    # self-contained: it runs from bytes, far from its data file
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(run(loaded, {"x": x})[0], x + 6)

    moved = tmp_path / "elsewhere"
    moved.mkdir()
    os.replace(path, moved / "m.onnx")
    assert len(onnx_from_path(str(moved / "m.onnx"), external_data_dir=str(tmp_path)).graph.initializer) == 2
    ignored = onnx_from_path(str(moved / "m.onnx"), ignore_external_data=True)
    assert all(t.data_location == TensorProto.EXTERNAL for t in ignored.graph.initializer)


def test_onnx_from_path_missing_file_is_a_polygraphy_exception(tmp_path):
    with pytest.raises(PolygraphyException, match="nothere.onnx"):
        onnx_from_path(str(tmp_path / "nothere.onnx"))


def test_bytes_round_trip_and_graphsurgeon_import():
    model = chain()
    data = bytes_from_onnx(model)
    again = OnnxFromBytes(BytesFromOnnx(model))()
    assert isinstance(data, bytes) and again == model
    graph = gs_from_onnx(again)
    assert isinstance(graph, gs.Graph) and [n.op for n in graph.nodes] == ["Relu", "Neg"]
    with pytest.raises(PolygraphyException, match="parse"):
        OnnxFromBytes(b"not a model at all")()


@pytest.mark.parametrize("copy", [True, False])
def test_modify_outputs_marks_every_tensor_and_excludes(copy):
    original = chain()
    model = ModifyOutputs(original, outputs="mark-all", copy=copy)()
    assert [o.name for o in model.graph.output] == ["a", "y"]
    assert len(original.graph.output) == (1 if copy else 2)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    a, y = run(model, {"x": x})
    np.testing.assert_array_equal(a, np.maximum(x, 0))
    np.testing.assert_array_equal(y, -np.maximum(x, 0))

    only_a = ModifyOutputs(chain(), outputs="mark-all", exclude_outputs=["y"])()
    assert [o.name for o in only_a.graph.output] == ["a"]
    typed = ModifyOutputs(chain(), mark_types=["Relu"])()
    assert [o.name for o in typed.graph.output] == ["y", "a"]


def test_fold_constants_folds_and_respects_size_threshold():
    original = foldable()
    folded = FoldConstants(original, copy=True)()
    assert [n.op_type for n in folded.graph.node] == ["Add"]
    assert len(original.graph.node) == 2  # the copy was folded, not the original
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(run(folded, {"x": x})[0], x + 6)
    # the folded constant is 12 bytes: a threshold below it leaves the graph alone
    assert len(fold_constants(foldable(), size_threshold=4).graph.node) == 2


def test_infer_shapes_fills_value_info_for_a_model_and_a_path(tmp_path):
    model = chain()
    assert not model.graph.value_info
    inferred = infer_shapes(model)
    assert [(v.name, [d.dim_value for d in v.type.tensor_type.shape.dim]) for v in inferred.graph.value_info] == [("a", [2, 3])]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert "a" in [v.name for v in infer_shapes(str(path), allow_onnxruntime=True).graph.value_info]
    assert [v.name for v in infer_shapes(model, save_to_disk_threshold_bytes=0).graph.value_info] == ["a"]


def test_convert_to_fp16_keeps_float32_io():
    model = ConvertToFp16(chain(), copy=True)()
    graph = gs_from_onnx(model)
    graph.toposort()
    assert [n.op for n in graph.nodes] == ["Cast", "Relu", "Neg", "Cast"]
    assert graph.inputs[0].dtype == np.float32 and graph.outputs[0].dtype == np.float32
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(run(model, {"x": x})[0], -np.maximum(x, 0))


def test_extract_subgraph_from_a_model_and_from_a_graph():
    from parity_polygraphy.common import TensorMetadata

    inputs = TensorMetadata().add("a", dtype=np.float32, shape=(2, 3))
    outputs = TensorMetadata().add("y", dtype=np.float32, shape=None)
    sub = extract_subgraph(chain(), inputs, outputs)
    assert [n.op_type for n in sub.graph.node] == ["Neg"]
    assert [i.name for i in sub.graph.input] == ["a"]
    a = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(run(sub, {"a": a})[0], -a)

    graph = gs_from_onnx(chain())
    sub_graph = extract_subgraph(graph, output_metadata=TensorMetadata().add("a", dtype=None, shape=None))
    assert isinstance(sub_graph, gs.Graph) and [n.op for n in sub_graph.nodes] == ["Relu"]
    assert len(graph.nodes) == 2  # the given graph is untouched
    with pytest.raises(PolygraphyException, match="Tensor: nope does not exist"):
        extract_subgraph(chain(), output_metadata=TensorMetadata().add("nope", dtype=np.float32, shape=None))


def _range_model() -> onnx.ModelProto:
    """y = Range(0, n, 1) with n read at run time: the output length depends on data, without bound."""
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    return _model(
        [helper.make_node("Identity", ["n"], ["limit"]), helper.make_node("Range", ["zero", "limit", "one"], ["y"])],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["len"])],
        [zero, one],
    )


def test_set_upper_bound_bounds_unbounded_data_dependent_tensors():
    model = infer_shapes(_range_model())
    tensors = onnx_util.get_unbounded_dds_tensors(gs_from_onnx(model))
    assert [t.name for t in tensors] == ["limit"]
    bounded = set_upper_bound(model, {"": 5})
    mins = [n for n in bounded.graph.node if n.op_type == "Min"]
    assert len(mins) == 1
    assert run(bounded, {"n": np.array(9, np.int64)})[0].tolist() == [0, 1, 2, 3, 4]
    assert run(bounded, {"n": np.array(3, np.int64)})[0].tolist() == [0, 1, 2]
    # bounded once: nothing left to bound
    assert onnx_util.get_unbounded_dds_tensors(gs_from_onnx(infer_shapes(bounded))) == []


def test_get_num_nodes_counts_subgraph_nodes():
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1])])
    model = _model(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    assert onnx_util.get_num_nodes(model) == 3


def test_save_onnx_creates_folders_and_external_data(tmp_path):
    path = tmp_path / "a" / "b" / "m.onnx"
    returned = SaveOnnx(foldable(), str(path), external_data_path="m.data", size_threshold=0)()
    assert returned.graph.node
    written = onnx.load(str(path), load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in written.graph.initializer)
    assert (path.parent / "m.data").stat().st_size >= 24
    x = np.zeros(3, np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], x + 6)
    assert sorted(os.listdir(path.parent)) == ["m.data", "m.onnx"]  # no temporary files left


def test_tensorflow_loader_is_refused():
    with pytest.raises(PolygraphyException, match="TensorFlow"):
        OnnxFromTfGraph(None)()


def _add() -> onnx.ModelProto:
    """y = Relu(x) + Neg(z), two inputs."""
    return _model(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["z"], ["b"]), helper.make_node("Add", ["a", "b"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )


def test_extract_subgraph_refuses_a_cut_that_leaves_a_tensor_unfed():
    from parity_polygraphy.common import TensorMetadata

    # inputs a only: b is still needed by Add, but nothing produces it any more
    with pytest.raises(PolygraphyException, match="'z'"):
        extract_subgraph(_add(), input_metadata=TensorMetadata().add("a", dtype=np.float32, shape=(2,)))
    both = extract_subgraph(_add(), input_metadata=TensorMetadata().add("a", dtype=np.float32, shape=(2,)).add("b", dtype=np.float32, shape=(2,)))
    assert [n.op_type for n in both.graph.node] == ["Add"]
    ones = np.ones(2, np.float32)
    np.testing.assert_array_equal(run(both, {"a": ones, "b": ones})[0], 2 * ones)

