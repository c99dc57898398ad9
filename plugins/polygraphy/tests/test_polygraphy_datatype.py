"""parity_polygraphy.datatype: one DataType per element type, converted to and from NumPy, ONNX, ONNX Runtime and
TensorRT (the behavioural model of TensorRT, NOT TensorRT), as Polygraphy's DataType converts them."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from parity_polygraphy.datatype import DataType, DataTypeEntry
from parity_polygraphy.exception import DataTypeConversionException, PolygraphyException

from parity import api as parity_api

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trt" / "tests"))  # trt_model lives with parity-trt's tests

from trt_model.install import install, uninstall  # noqa: E402
from trt_model.manifest import versions  # noqa: E402

NUMPY_TYPES = {"FLOAT64", "FLOAT32", "FLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BOOL", "STRING"}


def identity_model(elem_type: int) -> bytes:
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", elem_type, [2])], [helper.make_tensor_value_info("y", elem_type, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def test_members_are_entries_with_names_sizes_and_kinds():
    assert len(DataType.__members__) == 21
    for name, entry in DataType.__members__.items():
        assert isinstance(entry, DataTypeEntry) and getattr(DataType, name) is entry
        assert entry.name == name.lower() and str(entry) == entry.name and repr(entry) == f"DataType.{name}"
    assert DataType.FLOAT16.is_floating and not DataType.FLOAT16.is_integral
    assert DataType.UINT8.is_integral and not DataType.BOOL.is_integral and not DataType.BOOL.is_floating
    assert DataType.INT4.itemsize == 0.5 and DataType.BFLOAT16.itemsize == 2


@pytest.mark.parametrize("name", sorted(NUMPY_TYPES))
def test_numpy_types_convert_both_ways(name):
    entry = DataType.__members__[name]
    np_type = entry.numpy()
    assert isinstance(np_type, np.dtype) and DataType.to_dtype(entry, "numpy") == np_type
    assert np_type.itemsize == entry.itemsize
    assert DataType.from_dtype(np_type) is entry
    if name != "STRING":  # a scalar type and the type's name convert too
        assert DataType.from_dtype(np_type.type) is entry and DataType.from_dtype(np_type.name) is entry


@pytest.mark.parametrize("name", ["BFLOAT16", "FLOAT8E4M3FN", "INT4", "FLOAT4"])
def test_a_type_numpy_lacks_is_refused_with_the_conversion_exception(name):
    with pytest.raises(DataTypeConversionException, match=f"{name.lower()} to a corresponding numpy data type"):
        DataType.__members__[name].numpy()
    # the exception is Polygraphy's and Parity's: Parity's command line prints it as one line
    assert issubclass(DataTypeConversionException, PolygraphyException) and issubclass(PolygraphyException, parity_api.ParityError)


MODEL_TYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.INT64, TensorProto.UINT8, TensorProto.BOOL]


@pytest.mark.parametrize("elem_type", MODEL_TYPES)
def test_the_types_of_a_real_model_and_its_onnxruntime_session_convert(elem_type):
    """An ONNX model's input type and ONNX Runtime's name for it give the same DataType, and back again."""
    data = identity_model(elem_type)
    onnx_type = onnx.load_from_string(data).graph.input[0].type.tensor_type.elem_type
    ort_type = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).get_inputs()[0].type
    entry = DataType.from_dtype(onnx_type)
    assert DataType.from_dtype(ort_type) is entry
    assert entry.onnx() == onnx_type and entry.onnxruntime() == ort_type
    assert DataType.to_dtype(entry, "onnx") == onnx_type
    assert entry.numpy() == helper.tensor_dtype_to_np_dtype(onnx_type)


def test_every_type_has_an_onnx_and_onnxruntime_name():
    for entry in DataType.__members__.values():
        assert isinstance(entry.onnx(), int)
        assert DataType.from_dtype(entry.onnx(), "onnx") is entry
        assert DataType.from_dtype(entry.onnxruntime(), "onnxruntime") is entry
    assert DataType.FLOAT32.onnxruntime() == "tensor(float)" and DataType.FLOAT64.onnxruntime() == "tensor(double)"
    assert DataType.from_dtype(np.int32(TensorProto.FLOAT16), "onnx") is DataType.FLOAT16  # an integer read from an array


def test_unknown_types_stay_as_they_are_with_one_warning(capsys):
    class Custom:
        def __repr__(self):
            return "Custom()"

    custom = Custom()
    assert DataType.from_dtype(custom) is custom
    assert DataType.from_dtype(custom) is custom
    assert capsys.readouterr().out.count("Could not convert: Custom()") == 1
    assert DataType.from_dtype(DataType.INT32) is DataType.INT32
    assert DataType.to_dtype("not a DataType", "numpy") == "not a DataType"


def test_bad_requests_are_refused():
    with pytest.raises(PolygraphyException, match="Could not convert: None"):
        DataType.from_dtype(None)
    with pytest.raises(PolygraphyException, match="Could not find target module: jax"):
        DataType.to_dtype(DataType.FLOAT32, "jax")
    with pytest.raises(PolygraphyException, match="Could not find source module: jax"):
        DataType.from_dtype(np.float32, "jax")


def test_entries_pickle_as_the_same_member():
    assert pickle.loads(pickle.dumps(DataType.FLOAT16)) is DataType.FLOAT16


@pytest.mark.parametrize("version", versions())
def test_tensorrt_types_convert_with_the_model_of_tensorrt(monkeypatch, version):
    """Against each modelled TensorRT version: TensorRT's types convert both ways; types TensorRT lacks are refused."""
    trt = install(monkeypatch, version)
    try:
        assert DataType.from_dtype(trt.float32) is DataType.FLOAT32
        assert DataType.from_dtype(trt.float16, "tensorrt") is DataType.FLOAT16
        assert DataType.INT8.tensorrt() == trt.int8 and DataType.to_dtype(DataType.BOOL, "tensorrt") == trt.bool
        if hasattr(trt, "bfloat16"):
            assert DataType.from_dtype(trt.bfloat16) is DataType.BFLOAT16
        with pytest.raises(DataTypeConversionException, match="float64 to a corresponding tensorrt data type"):
            DataType.FLOAT64.tensorrt()
        # a TensorRT type is not mistaken for another library's
        assert DataType.from_dtype(trt.int32, "numpy") is trt.int32
    finally:
        uninstall()
