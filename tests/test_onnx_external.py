"""The ONNX model layer for external data (parity.onnx_external): weights read lazily through memory maps,
graph-only sessions, and model + data files written together, validated on the path, without stray files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from parity import onnx_external, onnx_models
from parity.errors import ModelError, UsageError
from parity.onnx_external import ExternalData, WeightReader, runtime_bytes, save_model


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def ext_model(tmp_path) -> Path:
    """x[1,32] @ w[32,32] + b[32] -> Relu; w external, b (small) inside, a Constant node's value inside."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b"], ["add"], name="add"),
        helper.make_node("Constant", [], ["c"], name="c", value=numpy_helper.from_array(np.full(32, 0.5, np.float32))),
        helper.make_node("Mul", ["add", "c"], ["mul"], name="mul"),
        helper.make_node("Relu", ["mul"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 32])], [helper.make_tensor_value_info("y", 1, [1, 32])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    folder = tmp_path / "in"
    folder.mkdir()
    onnx.save_model(model, folder / "m.onnx", save_as_external_data=True, location="m.onnx.data", size_threshold=256)
    return folder / "m.onnx"


def run(path_or_bytes, config: dict[str, str] | None = None) -> np.ndarray:
    """The model's output y for a fixed input."""
    options = ort.SessionOptions()
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    session = ort.InferenceSession(path_or_bytes, options, providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": np.arange(32, dtype=np.float32).reshape(1, 32)})[0]


def test_lazy_load_reads_no_weight_and_checks_references(ext_model):
    model = onnx_models.load(ext_model, load_external_data=False)
    w = next(t for t in model.graph.initializer if t.name == "w")
    assert onnx_external.is_external(w) and not w.raw_data
    assert onnx_external.nbytes(w) == 32 * 32 * 4
    (ext_model.parent / "m.onnx.data").rename(ext_model.parent / "elsewhere.data")
    with pytest.raises(ModelError, match=r"external data file 'm.onnx.data' of tensor 'w' is missing.*--external-data-dir"):
        onnx_models.load(ext_model, load_external_data=False)
    # structure only: references are not checked
    assert len(onnx_models.load(ext_model, ignore_external_data=True).graph.node) == 5


def test_external_data_dir_names_the_data_folder(ext_model, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (ext_model.parent / "m.onnx.data").rename(data / "m.onnx.data")
    model = onnx_models.load(ext_model, load_external_data=False, external_data_dir=data)
    assert onnx_models.data_dir(ext_model, data) == data
    with WeightReader(data) as reader:
        w = reader.array(next(t for t in model.graph.initializer if t.name == "w"))
        assert w.shape == (32, 32) and not w.flags.writeable  # a view of the map, not a copy
    with pytest.raises(UsageError, match="--external-data-dir: .* is not a folder"):
        onnx_models.load(ext_model, external_data_dir=tmp_path / "nope")


def test_reader_values_match_onnx(ext_model):
    full = onnx.load(str(ext_model))
    lazy = onnx_models.load(ext_model, load_external_data=False)
    with WeightReader(ext_model.parent) as reader:
        for a, b in zip(onnx_external.tensors(full), onnx_external.tensors(lazy), strict=True):
            np.testing.assert_array_equal(numpy_helper.to_array(a), reader.array(b))
            np.testing.assert_array_equal(numpy_helper.to_array(a), numpy_helper.to_array(reader.inline_copy(b)))


def test_runtime_bytes_runs_an_edited_lazy_model_without_its_weights_in_the_message(ext_model):
    expected = run(str(ext_model))
    model = onnx_models.load(ext_model, load_external_data=False)
    onnx_models.mark_outputs(model, ["mm", "y"])
    data, config = runtime_bytes(model, ext_model.parent)
    assert len(data) < 32 * 32 * 4  # the weights are not in the message
    assert config == {onnx_external.ORT_DATA_FOLDER: str(ext_model.parent.resolve())}
    np.testing.assert_array_equal(run(data, config), expected)


@pytest.mark.parametrize(
    ("external", "data_files"),
    [
        (ExternalData(), []),
        (ExternalData(""), ["out.onnx.data"]),
        (ExternalData("weights.bin", size_threshold=0), ["weights.bin"]),
        (ExternalData("ignored", size_threshold=0, one_file=False), ["b", "tensor", "w"]),  # the Constant's value has no name
    ],
)
def test_save_model_layouts_are_validated_and_leave_no_stray_file(ext_model, tmp_path, external, data_files):
    before = {p: digest(p) for p in ext_model.parent.iterdir()}
    model = onnx_models.load(ext_model, load_external_data=False)
    snapshot = model.SerializeToString()
    out = tmp_path / "out" / "out.onnx"
    saved = save_model(model, out, base_dir=ext_model.parent, external=external)
    assert listing(out.parent) == sorted(["out.onnx", *data_files])
    assert sorted(p.name for p in saved.data_files) == data_files
    assert not saved.automatic
    onnx.checker.check_model(str(out), full_check=True)
    np.testing.assert_array_equal(run(str(out)), run(str(ext_model)))
    assert model.SerializeToString() == snapshot  # the caller's model is as it was
    assert {p: digest(p) for p in ext_model.parent.iterdir()} == before  # inputs untouched
    for name in data_files:
        assert (out.parent / name).stat().st_mode & 0o777 == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_external_tensors_start_on_page_boundaries(ext_model, tmp_path):
    model = onnx_models.load(ext_model, load_external_data=False)
    out = tmp_path / "o.onnx"
    save_model(model, out, base_dir=ext_model.parent, external=ExternalData("", size_threshold=0))
    written = onnx.load(str(out), load_external_data=False)
    offsets = [onnx_external.external_info(t)[1] for t in onnx_external.tensors(written)]
    assert len(offsets) == 3 and all(o % onnx_external.ALIGN == 0 for o in offsets)


def test_in_memory_weights_move_out_and_back(tmp_path):
    """A model built in memory (weights inside the proto) is written with external data and left unchanged."""
    w = numpy_helper.from_array(np.ones((256, 256), np.float32), "w")
    x, y = helper.make_tensor_value_info("x", 1, [1, 256]), helper.make_tensor_value_info("y", 1, [1, 256])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    snapshot = model.SerializeToString()
    save_model(model, tmp_path / "m.onnx", external=ExternalData(""))
    assert model.SerializeToString() == snapshot
    assert (tmp_path / "m.onnx.data").stat().st_size == 256 * 256 * 4
    assert (tmp_path / "m.onnx").stat().st_size < 1024


def test_a_model_past_the_protobuf_limit_gets_external_data_by_itself(ext_model, tmp_path, monkeypatch):
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", 64 << 20 | 100)  # 64 MiB margin + 100 bytes: this model "does not fit"
    model = onnx_models.load(ext_model, load_external_data=False)
    saved = save_model(model, tmp_path / "big.onnx", base_dir=ext_model.parent)
    assert saved.automatic and [p.name for p in saved.data_files] == ["big.onnx.data"]
    onnx.checker.check_model(str(tmp_path / "big.onnx"), full_check=True)


def test_serialize_refuses_past_the_limit_in_one_line(ext_model, monkeypatch):
    model = onnx_models.load(ext_model)
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", 100)
    with pytest.raises(ModelError, match="past protobuf's 2 GiB limit for one message; write it with --save-external-data") as info:
        onnx_external.serialize(model, "the model")
    assert "\n" not in str(info.value)


def test_an_invalid_model_is_not_written_and_nothing_is_left(ext_model, tmp_path):
    model = onnx_models.load(ext_model, load_external_data=False)
    model.graph.node[0].input[1] = "missing"
    out = tmp_path / "o"
    out.mkdir()
    (out / "bad.onnx").write_bytes(b"old")  # an older output stays as it was
    with pytest.raises(ModelError, match=r"not written to .*bad.onnx"):
        save_model(model, out / "bad.onnx", base_dir=ext_model.parent, external=ExternalData(""))
    assert listing(out) == ["bad.onnx"] and (out / "bad.onnx").read_bytes() == b"old"


def test_a_location_outside_the_folder_is_refused(ext_model, tmp_path):
    model = onnx_models.load(ext_model, load_external_data=False)
    for bad in ("../w.bin", "/tmp/w.bin", "o.onnx"):
        with pytest.raises(UsageError, match="--save-external-data"):
            save_model(model, tmp_path / "o.onnx", base_dir=ext_model.parent, external=ExternalData(bad))
    assert listing(tmp_path) == ["in"]


def test_writing_over_the_input_data_file_is_refused(ext_model):
    model = onnx_models.load(ext_model, load_external_data=False)
    before = digest(ext_model.parent / "m.onnx.data")
    with pytest.raises(UsageError, match="refusing to overwrite"):
        save_model(model, ext_model.parent / "other.onnx", base_dir=ext_model.parent, external=ExternalData("m.onnx.data"))
    assert digest(ext_model.parent / "m.onnx.data") == before


def test_not_enough_disk_space_is_one_line_before_any_write(ext_model, tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10, 10, 0))
    model = onnx_models.load(ext_model, load_external_data=False)
    with pytest.raises(Exception, match=r"cannot write .*o.onnx: it needs about .* GiB and .* has 0.00 GiB free"):
        save_model(model, tmp_path / "o.onnx", base_dir=ext_model.parent)
    assert listing(tmp_path) == ["in"]
