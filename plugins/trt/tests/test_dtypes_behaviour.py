"""Engines with bf16/fp8/int4/fp4 inputs and outputs run through TrtRunner (issue 12, item 9).

The engines are trt_model's (a model of TensorRT's documented behaviour, NOT TensorRT) running an identity program:
TensorRT reads and writes raw device bytes of its own type, whose sizes are ``itemsize``
(python/packaging/bindings_wheel/tensorrt/__init__.py@v10.16:L198-219: bfloat16 2, fp8 1, int4 0.5, fp4 0.5). The
DataType members and values are in trt_model/behaviour.py (pyFoundationalTypes.cpp@v10.16:L179-191). The two-per-byte
order (first element in the low nibble) is ONNX's (onnx.proto, TensorProto int4: "the first element is stored in the
4 LSB"); TensorRT's headers do not state it, so only real TensorRT can confirm it.
"""

from __future__ import annotations

import ctypes
import sys

import ml_dtypes
import numpy as np
import pytest
from test_runner_behaviour import fake_cuda, run  # noqa: F401 - fixtures
from trt_model.behaviour import ENUM_VALUES
from trt_model.engine import Program, engine
from trt_model.install import install, uninstall

from parity.errors import UsageError


@pytest.fixture
def trt(monkeypatch):
    yield install(monkeypatch, "10.16.1.11")  # FP4 and E8M0 are not in 10.7
    uninstall()


ITEMSIZE = {"BF16": 2, "FP8": 1, "INT4": 0.5, "FP4": 0.5}  # tensorrt/__init__.py@v10.16


def nbytes(dtype: str, count: int) -> int:
    return int(np.ceil(ITEMSIZE[dtype] * count))


def TypedEngine(fake_cuda, tensors: dict[str, tuple[str, tuple[int, ...]]]):  # noqa: F811, N802
    """Identity engine: each output o_<x> is a copy of input <x>'s device bytes (static shapes, one profile)."""

    def compute(context):
        outputs = {}
        for name, (dtype, shape) in tensors.items():
            size = nbytes(dtype, int(np.prod(shape)))
            outputs["o_" + name] = np.frombuffer((ctypes.c_char * size).from_address(context._addresses[name]), np.uint8).copy()
        return outputs, []

    io = {name: ("INPUT", dtype, shape, False) for name, (dtype, shape) in tensors.items()}
    io.update({"o_" + name: ("OUTPUT", dtype, shape, False) for name, (dtype, shape) in tensors.items()})
    return engine(sys.modules["tensorrt"], Program(io, [{}], [{}], compute), fake_cuda)


BF16_X = np.array([[1.5, -2.0, 3.140625], [0.0, 65280.0, -0.0078125]], dtype=ml_dtypes.bfloat16)
INT4_Q = np.array([-8, -1, 0, 7, 3], dtype=ml_dtypes.int4)  # odd count: the last byte is half used


def test_bf16_input_metadata_and_round_trip(trt, fake_cuda):  # noqa: F811
    from parity_trt.runner import TrtRunner

    engine = TypedEngine(fake_cuda, {"x": ("BF16", (2, 3))})
    with TrtRunner(engine, capture_debug=False) as runner:
        assert runner.get_input_metadata()["x"].dtype == np.dtype(ml_dtypes.bfloat16)
        out = runner.infer({"x": BF16_X})
    assert out["o_x"].dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out["o_x"].view(np.uint16), BF16_X.view(np.uint16))


def test_fp8_round_trip(trt, fake_cuda):  # noqa: F811
    x = np.array([0.5, -448.0, 1.125, 0.0], dtype=ml_dtypes.float8_e4m3fn)  # E4M3, bias 7: NvInferRuntimeBase.h@v10.16:L176-178
    out = run(TypedEngine(fake_cuda, {"x": ("FP8", (4,))}), {"x": x}, capture_debug=False)
    assert out["o_x"].dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(out["o_x"].view(np.uint8), x.view(np.uint8))


def test_int4_and_fp4_are_packed_two_per_byte(trt, fake_cuda, monkeypatch):  # noqa: F811
    from parity_trt import cuda

    f = np.array([-6.0, 0.5, 1.5, 6.0], dtype=ml_dtypes.float4_e2m1fn)
    engine = TypedEngine(fake_cuda, {"q": ("INT4", (5,)), "f": ("FP4", (2, 2))})
    seen = {}
    real = cuda._memcpy

    def spy(dst, src, n, kind, stream=None):
        if kind == "cudaMemcpyHostToDevice":
            seen[n] = bytes((ctypes.c_ubyte * n).from_address(src))
        return real(dst, src, n, kind, stream)

    monkeypatch.setattr(cuda, "_memcpy", spy)
    out = run(engine, {"q": INT4_Q, "f": f.reshape(2, 2)}, capture_debug=False)
    assert seen[3] == bytes([0xF8, 0x70, 0x03])  # -8,-1 | 0,7 | 3,pad: low nibble first
    assert seen[2] == bytes([0x1F, 0x73])  # fp4 codes 0xF,0x1 | 0x3,0x7
    assert out["o_q"].dtype == np.dtype(ml_dtypes.int4) and out["o_q"].shape == (5,)
    np.testing.assert_array_equal(out["o_q"].astype(np.int8), INT4_Q.astype(np.int8))
    np.testing.assert_array_equal(out["o_f"].astype(np.float32), f.astype(np.float32).reshape(2, 2))


def test_float32_feed_for_bf16_input_is_refused_with_the_expected_type(trt, fake_cuda):  # noqa: F811
    engine = TypedEngine(fake_cuda, {"x": ("BF16", (2, 3))})
    with pytest.raises(UsageError, match="bfloat16"):
        run(engine, {"x": BF16_X.astype(np.float32)}, capture_debug=False)


def test_one_mapping_covers_every_datatype_of_every_manifest_version():
    from pathlib import Path

    from parity_trt import dtypes
    from trt_model.manifest import MANIFESTS

    manifests = sorted(MANIFESTS.glob("tensorrt-*-enums.txt"))
    members = {line.split(".", 1)[1].strip() for p in manifests for line in p.read_text().splitlines() if line.startswith("DataType.")}
    members |= set(ENUM_VALUES["DataType"])
    assert members <= set(dtypes.DTYPES), members - set(dtypes.DTYPES)
    from parity_trt import engine, runner

    assert runner.DTYPES is dtypes.DTYPES and runner.to_numpy_dtype is dtypes.to_numpy_dtype
    assert "DTYPES = {" not in Path(engine.__file__).read_text()
