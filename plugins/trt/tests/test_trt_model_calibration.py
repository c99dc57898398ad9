"""INT8 calibration in the TensorRT model (trt_model/calibration.py; NOT TensorRT): the pyInt8.cpp protocol driven
with model objects and a Python calibrator that puts numpy batches into the model's "device" memory (host_cuda)."""

from __future__ import annotations

import ctypes
import struct
import warnings

import numpy as np
import pytest
import trt_model
from trt_model import behaviour, calibration
from trt_model.host_cuda import HostCudart
from trt_model.manifest import Manifest

CAL_VERSIONS = [v for v in trt_model.versions() if "IBuilderConfig.int8_calibrator" in Manifest(v).kinds]
NO_CAL_VERSIONS = [v for v in trt_model.versions() if v not in CAL_VERSIONS]


def test_calibration_is_10x_only():
    assert set(CAL_VERSIONS) == {"10.0.1", "10.7.0", "10.8.0.43", "10.16.1.11"}
    assert set(NO_CAL_VERSIONS) == {"11.0.0.114", "11.4.0.106"}


@pytest.fixture
def make(monkeypatch):
    """trt_model.make, with the calibration classes where behaviour's class registry does not have them yet."""

    def merged(classes: dict) -> dict:
        classes = dict(classes)
        for name, cls in calibration.CLASSES.items():
            if "get_batch" not in vars(classes.get(name, object)):
                classes[name] = cls
        config = classes["IBuilderConfig"]
        if "set_calibration_profile" not in vars(config):
            classes["IBuilderConfig"] = type("IBuilderConfig", (config,), {**dict(vars(config)), **calibration.CONFIG_MEMBERS})
        return classes

    if hasattr(behaviour, "_registry"):
        registry = behaviour._registry
        monkeypatch.setattr(behaviour, "_registry", lambda: merged(registry()))
    else:
        monkeypatch.setattr(behaviour, "CLASSES", merged(behaviour.CLASSES))
    return trt_model.make


class Memory:
    """The memory seam's read(ptr, nbytes) over HostCudart's "device" allocations (raises outside them)."""

    def __init__(self, cuda: HostCudart) -> None:
        self.cuda = cuda
        self.reads: list[tuple[int, int]] = []

    def read(self, ptr: int, nbytes: int) -> bytes:
        buf = self.cuda.device[int(ptr)]  # KeyError: not device memory
        if nbytes > ctypes.sizeof(buf):
            raise ValueError(f"{nbytes} bytes past an allocation of {ctypes.sizeof(buf)}")
        self.reads.append((int(ptr), nbytes))
        return ctypes.string_at(int(ptr), nbytes)


def calibrator(trt, cuda, batches, base="IInt8EntropyCalibrator2", cache=None, raise_at=None, pointers=None):
    """A user's calibrator: each batch (feed dict) copied into cudaMalloc'd "device" memory; records its calls."""
    base_cls = getattr(trt, base)

    class Calibrator(base_cls):
        def __init__(self):
            base_cls.__init__(self)
            self.calls, self.cache, self.written = [], cache, None
            self.batches = iter(batches)
            self.served = 0

        def get_batch_size(self):
            self.calls.append("get_batch_size")
            return 1

        def get_batch(self, names):
            self.calls.append(("get_batch", list(names)))
            if raise_at is not None and self.served == raise_at:
                raise RuntimeError("boom")
            feed = next(self.batches, None)
            if feed is None:
                return None
            self.served += 1
            if pointers is not None:
                return pointers
            ptrs = []
            for name in names:
                array = np.ascontiguousarray(feed[name])
                _, ptr = cuda.cudaMalloc(array.nbytes)
                ctypes.memmove(ptr, array.ctypes.data, array.nbytes)
                ptrs.append(ptr)
            return ptrs

        def read_calibration_cache(self):
            self.calls.append("read_calibration_cache")
            return self.cache

        def write_calibration_cache(self, cache):
            self.calls.append("write_calibration_cache")
            self.written = bytes(cache)

    return Calibrator()


def relu_twice(feeds):
    """The network the tests calibrate: h = relu(x), y = 2 * h."""
    h = np.maximum(feeds["x"], 0)
    return {"h": h, "y": 2 * h}


def setup(trt, cal):
    config = trt.Builder(trt.Logger()).create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    config.int8_calibrator = cal
    return config


def run_calibration(trt, cuda, cal, inputs=(("x", (2, 3), "FLOAT"),), run=relu_twice, memory=None):
    config = setup(trt, cal)
    errors = []
    ranges = calibration.calibrate(trt, config, list(inputs), memory or Memory(cuda), run, errors.append)
    return ranges, errors


BATCHES = [{"x": np.array([[1, -2, 3], [0.5, 0, -1]], np.float32)}, {"x": np.array([[-4, 1, 2], [1, 1, 1]], np.float32)}]


@pytest.mark.parametrize("version", CAL_VERSIONS)
def test_classes_python_subclasses(make, version):
    trt = make(version)
    for name in calibration.CLASS_NAMES:
        cls = getattr(trt, name)
        obj = cls()  # py::init<>()
        assert obj.get_batch(["x"]) == [] and obj.read_calibration_cache() is None and obj.write_calibration_cache(b"") is None
        with pytest.raises(TypeError):
            cls(1)
    assert trt.IInt8EntropyCalibrator2().get_algorithm() == trt.CalibrationAlgoType.ENTROPY_CALIBRATION_2
    assert trt.IInt8EntropyCalibrator().get_algorithm() == trt.CalibrationAlgoType.ENTROPY_CALIBRATION
    assert trt.IInt8MinMaxCalibrator().get_algorithm() == trt.CalibrationAlgoType.MINMAX_CALIBRATION
    assert trt.IInt8LegacyCalibrator().get_algorithm() == trt.CalibrationAlgoType.LEGACY_CALIBRATION
    assert trt.IInt8Calibrator().get_algorithm() == trt.CalibrationAlgoType.LEGACY_CALIBRATION  # pure: the default
    assert issubclass(trt.IInt8EntropyCalibrator2, trt.IInt8Calibrator)
    with pytest.warns(DeprecationWarning):
        assert trt.IInt8MinMaxCalibrator().get_batch_size() == -1  # no override: pure virtual, -1


@pytest.mark.parametrize("version", NO_CAL_VERSIONS)
def test_11x_has_no_calibration(make, version):
    trt = make(version)
    assert not any(hasattr(trt, name) for name in calibration.CLASS_NAMES)
    config = trt.Builder(trt.Logger()).create_builder_config()
    assert not calibration.wants_calibration(trt, config)


@pytest.mark.parametrize("version", CAL_VERSIONS)
def test_ranges_and_cache_written(make, version):
    trt, cuda = make(version), HostCudart()
    cal = calibrator(trt, cuda, BATCHES)
    ranges, errors = run_calibration(trt, cuda, cal)
    assert not errors
    assert ranges == pytest.approx({"x": 4.0, "h": 3.0, "y": 6.0})
    assert cal.calls == ["get_batch_size", "read_calibration_cache", *[("get_batch", ["x"])] * 3, "write_calibration_cache"]
    assert calibration.wants_calibration(trt, setup(trt, cal))
    major, minor, patch = (int(p) for p in version.split(".")[:3])
    lines = cal.written.decode().splitlines()
    assert lines[0] == f"TRT-{major * 10000 + minor * 100 + patch}-EntropyCalibration2"
    scale_of_x = struct.unpack(">f", bytes.fromhex(dict(line.split(": ") for line in lines[1:])["x"]))[0]
    assert scale_of_x == pytest.approx(4.0 / 127)


@pytest.mark.parametrize("version", CAL_VERSIONS)
def test_cache_is_reused_without_batches(make, version):
    trt, cuda = make(version), HostCudart()
    first = calibrator(trt, cuda, BATCHES)
    ranges, _ = run_calibration(trt, cuda, first)
    second = calibrator(trt, cuda, BATCHES, cache=first.written)
    again, errors = run_calibration(trt, cuda, second)
    assert not errors and again == pytest.approx(ranges, rel=1e-6)
    assert second.calls == ["get_batch_size", "read_calibration_cache"]  # neither get_batch nor write


@pytest.mark.parametrize("cache", [b"", None, "TRT-100700-EntropyCalibration2\nx: 3c010204\n", b"garbage"])
def test_no_usable_cache_calibrates(make, cache, capsys):
    trt, cuda = make("10.7.0"), HostCudart()
    cal = calibrator(trt, cuda, BATCHES, cache=cache)
    ranges, errors = run_calibration(trt, cuda, cal)
    assert not errors and ranges["x"] == pytest.approx(4.0) and cal.written
    if isinstance(cache, str):  # no buffer protocol: pybind11's py::buffer cast fails, printed, no cache
        assert "Exception caught in read_calibration_cache()" in capsys.readouterr().err


def test_cache_of_another_algorithm_is_not_used(make):
    trt, cuda = make("10.16.1.11"), HostCudart()
    entropy = calibrator(trt, cuda, BATCHES)
    run_calibration(trt, cuda, entropy)
    minmax = calibrator(trt, cuda, BATCHES, base="IInt8MinMaxCalibrator", cache=entropy.written)
    ranges, errors = run_calibration(trt, cuda, minmax)
    assert not errors and ("get_batch", ["x"]) in minmax.calls
    assert minmax.written.decode().startswith("TRT-101601-MinMaxCalibration\n")


def test_get_algorithm_is_asked_only_of_direct_iint8calibrator_subclasses(make, capsys):
    trt, cuda = make("10.8.0.43"), HostCudart()
    asked = []

    def get_algorithm(self):
        asked.append(type(self).__mro__[1].__name__)
        return trt.CalibrationAlgoType.MINMAX_CALIBRATION

    entropy2 = calibrator(trt, cuda, BATCHES)
    type(entropy2).get_algorithm = get_algorithm  # not called: fixed in C++ for the subclasses
    run_calibration(trt, cuda, entropy2)
    assert asked == [] and entropy2.written.startswith(b"TRT-100800-EntropyCalibration2\n")

    direct = calibrator(trt, cuda, BATCHES, base="IInt8Calibrator")
    type(direct).get_algorithm = get_algorithm
    run_calibration(trt, cuda, direct)
    assert asked == ["IInt8Calibrator"] and direct.written.startswith(b"TRT-100800-MinMaxCalibration\n")

    failing = calibrator(trt, cuda, BATCHES, base="IInt8Calibrator")
    type(failing).get_algorithm = lambda self: 1 / 0
    run_calibration(trt, cuda, failing)
    assert failing.written.startswith(b"TRT-100800-LegacyCalibration\n")  # CalibrationAlgoType{}
    assert "[ERROR] Exception caught in get_algorithm(): division by zero" in capsys.readouterr().err


@pytest.mark.parametrize("version", CAL_VERSIONS)
def test_exception_in_get_batch_ends_calibration(make, version, capsys):
    trt, cuda = make(version), HostCudart()
    cal = calibrator(trt, cuda, BATCHES, raise_at=1)
    ranges, errors = run_calibration(trt, cuda, cal)
    assert not errors and ranges == pytest.approx({"x": 3.0, "h": 3.0, "y": 6.0})  # the first batch only
    assert "[ERROR] Exception caught in get_batch(): boom" in capsys.readouterr().err
    assert cal.calls[-1] == "write_calibration_cache"


@pytest.mark.parametrize("version", CAL_VERSIONS)
def test_no_batch_fails_the_build(make, version, capsys):
    trt, cuda = make(version), HostCudart()
    for cal in (calibrator(trt, cuda, []), calibrator(trt, cuda, BATCHES, raise_at=0)):
        ranges, errors = run_calibration(trt, cuda, cal)
        assert ranges is None and "no scaling factors detected" in errors[0]
        assert "write_calibration_cache" not in cal.calls


def test_fewer_pointers_than_inputs_fails_the_build(make):
    trt, cuda = make("10.7.0"), HostCudart()
    feeds = [{"a": np.ones((2,), np.float32), "b": np.ones((2,), np.float32)}]
    _, ptr = cuda.cudaMalloc(8)
    cal = calibrator(trt, cuda, feeds, pointers=[ptr])
    inputs = [("a", (2,), "FLOAT"), ("b", (2,), "FLOAT")]
    ranges, errors = run_calibration(trt, cuda, cal, inputs, run=lambda feeds: {})
    assert ranges is None and "1 pointer(s) for 2 input(s)" in errors[0]
    # more pointers than inputs: the first ones are used, as pyInt8.cpp's memcpy of nbBindings pointers does
    _, other = cuda.cudaMalloc(8)
    ctypes.memmove(ptr, np.array([5, -6], np.float32).ctypes.data, 8)
    cal = calibrator(trt, cuda, feeds[:1], pointers=[ptr, ptr, other])
    ranges, errors = run_calibration(trt, cuda, cal, inputs, run=lambda feeds: {})
    assert not errors and ranges == {"a": 6.0, "b": 6.0}


@pytest.mark.parametrize("bad", [[1.5], ["0x10"], [-1], "x"])
def test_pointers_pybind11_cannot_cast_end_calibration(make, bad, capsys):
    trt, cuda = make("10.0.1"), HostCudart()
    cal = calibrator(trt, cuda, BATCHES, pointers=bad)
    ranges, errors = run_calibration(trt, cuda, cal)
    assert ranges is None and "no scaling factors detected" in errors[0]
    assert "Exception caught in get_batch(): Unable to cast" in capsys.readouterr().err


def test_pointer_outside_device_memory_fails_the_build(make):
    trt, cuda = make("10.7.0"), HostCudart()
    host = np.zeros((2, 3), np.float32)
    ranges, errors = run_calibration(trt, cuda, calibrator(trt, cuda, BATCHES, pointers=[host.ctypes.data]))
    assert ranges is None and "cannot read 24 bytes of input 'x'" in errors[0]
    _, small = cuda.cudaMalloc(8)  # a batch smaller than the calibration shape
    ranges, errors = run_calibration(trt, cuda, calibrator(trt, cuda, BATCHES, pointers=[small]))
    assert ranges is None and "cannot read 24 bytes" in errors[0]


@pytest.mark.parametrize("version", CAL_VERSIONS)
def test_calibration_shapes_come_from_the_calibration_profile(make, version):
    trt = make(version)
    builder = trt.Builder(trt.Logger())
    network = builder.create_network()
    network._input("x", (-1, 3))
    network._input("s", (2, 3), dtype=trt.DataType.HALF)
    config = builder.create_builder_config()
    assert "no calibration profile" in calibration.calibration_inputs(network, config)
    first, calib = builder.create_optimization_profile(), builder.create_optimization_profile()
    first.set_shape("x", (1, 3), (2, 3), (8, 3))
    calib.set_shape("x", (4, 3), (4, 3), (4, 3))
    config.add_optimization_profile(first)
    assert calibration.calibration_inputs(network, config) == [("x", (2, 3), "FLOAT"), ("s", (2, 3), "HALF")]
    with warnings.catch_warnings():  # TensorRT warns: deprecated in 10.1 (pyCore.cpp@v10.7.0:L1542-1549)
        warnings.simplefilter("ignore", DeprecationWarning)
        assert config.get_calibration_profile() is None
        assert config.set_calibration_profile(calib) is True
        assert config.get_calibration_profile() is calib
    assert calibration.calibration_inputs(network, config)[0] == ("x", (4, 3), "FLOAT")
    cuda = HostCudart()
    cal = calibrator(trt, cuda, BATCHES)
    ranges, errors = run_calibration(trt, cuda, cal, [("x", (-1, 3), "FLOAT")])  # a caller that found no profile
    assert ranges is None and "dynamic shape [-1, 3]" in errors[0] and not any(c[0] == "get_batch" for c in cal.calls)


def test_half_inputs_are_read_as_float32(make):
    trt, cuda = make("10.16.1.11"), HostCudart()
    seen = {}

    def run(feeds):
        seen.update(feeds)
        return {"y": feeds["x"].astype(np.float32) * 3}

    batch = {"x": np.array([0.5, -1.25], np.float32)}  # float32 bytes, as TensorRT reads them
    ranges, errors = run_calibration(trt, cuda, calibrator(trt, cuda, [batch]), [("x", (2,), "HALF")], run=run)
    assert not errors and seen["x"].dtype == np.float16 and seen["x"].tolist() == [0.5, -1.25]
    assert ranges == {"x": 1.25, "y": 3.75}


def test_integer_tensors_get_no_range(make):
    trt, cuda = make("10.7.0"), HostCudart()
    batch = {"i": np.array([7, -9], np.int64)}
    ranges, errors = run_calibration(trt, cuda, calibrator(trt, cuda, [batch]), [("i", (2,), "INT64")],
                                     run=lambda feeds: {"f": feeds["i"].astype(np.float32) / 2})
    assert not errors and ranges == {"f": 4.5}


def test_cache_text_round_trip():
    assert calibration.trt_version_int("10.8.0.43") == 100800
    text = calibration.write_cache_text("10.7.0", "MINMAX_CALIBRATION", {"a:b": 1.0, "y": 254.0})
    assert text.decode() == f"TRT-100700-MinMaxCalibration\na:b: {struct.pack('>f', 1 / 127).hex()}\ny: 40000000\n"
    assert calibration.read_cache_text(text, "MINMAX_CALIBRATION") == pytest.approx({"a:b": 1.0, "y": 254.0})
    assert "made by MinMaxCalibration" in calibration.read_cache_text(text, "ENTROPY_CALIBRATION_2")
    assert "not 'name: xxxxxxxx'" in calibration.read_cache_text(b"TRT-1-MinMaxCalibration\ny 3f800000\n", "MINMAX_CALIBRATION")


def test_quantize_arithmetic():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 126.6, 200, -300], np.float32)
    q = calibration.quantize({"x": x}, {"x": 127.0})["x"]  # scale 1: round half to even, clip at +-127
    assert q.dtype == np.float32 and q.tolist() == [0, 2, 2, -0.0, -2, 127, 127, -127]
    rng = np.random.default_rng(0)
    y = rng.uniform(-3, 3, 1000).astype(np.float32)
    scale = np.float32(3) / np.float32(127)
    qy = calibration.quantize({"y": y}, {"y": 3.0})["y"]
    assert np.all(np.abs(qy - y) <= scale / 2 + 1e-6) and not np.array_equal(qy, y)
    assert np.allclose(qy / scale, np.rint(qy / scale), atol=1e-3)  # on the int8 grid
    half = calibration.quantize({"h": np.array([1.0, 0.3], np.float16)}, {"h": 1.0})["h"]
    assert half.dtype == np.float16 and half[0] == 1.0
    ints, untouched = np.array([1, 2]), np.array([0.123], np.float32)
    out = calibration.quantize({"i": ints, "u": untouched, "z": untouched}, {"i": 1.0, "z": 0.0})
    assert out["i"] is ints and out["u"] is untouched and out["z"] is untouched
