"""Int8 calibration end to end, over the TensorRT model (trt_model: a behavioural model of TensorRT's documented
Python API, NOT TensorRT) and, where it imports, the real TensorRT.

TensorRT 10.x calibrates (``--int8`` with ``--data-loader-script``/``--load-inputs`` and ``--calibration-cache``);
TensorRT 11.x removed implicit quantization, so there ``--int8`` and ``--calibration-cache`` are refused with one
line (exit 2). The model's engines fake-quantize float tensors with the calibrated ranges, so an int8 engine differs
from ONNX Runtime by up to half a quantization step: the default tolerances report that, ``--tolerance-preset int8``
passes it.

The second half checks Parity's ``Calibrator`` through the Python API the way Polygraphy's calibrator is expected
to behave: the cache to a path or a file object, reuse without drawing batches, data that cannot rewind, wrong
dtypes and shapes failing the build, the device buffers freed.
"""

from __future__ import annotations

import io
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from trt_model.install import REAL, backends, install, process_memory, uninstall

from parity.errors import UsageError
from parity.testing import CliResult, invoke, save_model


def _major(trt: types.ModuleType) -> int:
    return int(str(trt.__version__).split(".")[0])


def is_model(trt: types.ModuleType) -> bool:
    """The TensorRT model (its engines fake-quantize; its cache text is known), not the real TensorRT."""
    return getattr(trt, "_memory", None) is not None


def model_only(trt: types.ModuleType, why: str) -> None:
    if not is_model(trt):
        pytest.skip(f"the TensorRT model's behaviour: {why}")


@pytest.fixture(params=[v for v in backends() if not v.startswith("11.")])
def trt10(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """TensorRT 10.x as Parity sees it: each modelled 10.x version, then the real TensorRT if it is a 10.x."""
    trt = install(monkeypatch, request.param)
    if request.param == REAL and _major(trt) >= 11:
        pytest.skip("the installed TensorRT is 11.x: no int8 calibration")
    yield trt
    uninstall()


@pytest.fixture(params=[v for v in backends() if v.startswith("11.") or v == REAL])
def trt11(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    trt = install(monkeypatch, request.param)
    if request.param == REAL and _major(trt) < 11:
        pytest.skip("the installed TensorRT is 10.x")
    yield trt
    uninstall()


# ---- models and data loader scripts ---------------------------------------------------------------------------


def one_op(path: Path, op: str = "Identity", elem: str = "FLOAT", dims: list[Any] | None = None) -> Path:
    """y = op(x), x and y of TensorProto type ``elem`` and shape ``dims`` ([1, 1, 2, 2]: the guide's input)."""
    from onnx import TensorProto, helper

    dtype = getattr(TensorProto, elem)
    dims = dims or [1, 1, 2, 2]
    x, y = helper.make_tensor_value_info("x", dtype, dims), helper.make_tensor_value_info("y", dtype, dims)
    return save_model(path, [helper.make_node(op, ["x"], ["y"])], [x], [y])


def data_script(path: Path, body: str) -> Path:
    """A data-loader script whose ``load_data`` generator appends a line to ``<path>.drawn`` per batch it yields,
    so a test can tell how many batches were drawn."""
    drawn = path.with_suffix(".drawn")
    path.write_text(
        "import numpy as np\n"
        f"DRAWN = {str(drawn)!r}\n"
        "def draw(feed):\n"
        "    with open(DRAWN, 'a') as f:\n"
        "        f.write('batch\\n')\n"
        "    return feed\n"
        "def load_data():\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())
    )
    return path


def drawn(script: Path) -> int:
    marker = script.with_suffix(".drawn")
    return len(marker.read_text().splitlines()) if marker.exists() else 0


ONES = "for _ in range(5):\n    yield draw({'x': np.ones((1, 1, 2, 2), np.float32)})"  # the Polygraphy guide's loader
# values between the grid points of a range-1 quantization (step 1/127), so int8 differs from fp32
RAMP = "for i in range(3):\n    yield draw({'x': np.array([-1.0, 0.3, 0.55, 1.0 - 0.01 * i], np.float32).reshape(1, 1, 2, 2)})"


def verdict(result: CliResult) -> str:
    """The last line ``parity run`` prints (stdout): its verdict."""
    return result.stdout.strip().splitlines()[-1]


def one_line_error(result: CliResult, code: int, pattern: str) -> str:
    """The run ended with ``code`` and Parity's one-line error, its last line on stderr, matching ``pattern`` (no traceback)."""
    assert result.exit_code == code, result
    assert "Traceback" not in result.stdout + result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("parity: error: "), result
    assert re.search(pattern, line), line
    return line


# ---- the Polygraphy guide's flow: calibrate once, then build from the cache ---------------------------------------


def test_convert_calibrates_then_a_second_convert_reuses_the_cache(trt10, tmp_path):
    model = one_op(tmp_path / "identity.onnx")
    loader = data_script(tmp_path / "data_loader.py", ONES)
    cache, engine = tmp_path / "identity_calib.cache", tmp_path / "identity.engine"

    result = invoke("convert", model, "--int8", "--data-loader-script", loader, "--calibration-cache", cache, "-o", engine)
    assert result.exit_code == 0, result
    assert engine.stat().st_size > 0 and cache.stat().st_size > 0
    assert drawn(loader) == 5  # every batch the loader had
    written = cache.read_bytes()

    # the cache alone: no data needed, none drawn, the cache left as it was
    again = tmp_path / "again.engine"
    result = invoke("convert", model, "--int8", "--calibration-cache", cache, "-o", again)
    assert result.exit_code == 0, result
    assert again.stat().st_size > 0 and cache.read_bytes() == written
    # with the data loader given too, the usable cache still wins: not one batch is drawn
    result = invoke("convert", model, "--int8", "--data-loader-script", loader, "--calibration-cache", cache, "-o", tmp_path / "third.engine")
    assert result.exit_code == 0, result
    assert drawn(loader) == 5 and cache.read_bytes() == written

    # the engine built from the cache runs and gives the identity back for data inside the calibrated range
    result = invoke("run", again, "--trt", "--data-loader-script", loader)
    assert result.exit_code == 0, result


def test_run_int8_against_onnxrt_reports_the_quantization_error_and_passes_the_int8_preset(trt10, tmp_path):
    model = one_op(tmp_path / "identity.onnx")
    loader = data_script(tmp_path / "ramp.py", RAMP)
    common = ["run", model, "--trt", "--int8", "--data-loader-script", loader, "--onnxrt"]

    loose = invoke(*common, "--tolerance-preset", "int8")
    assert loose.exit_code == 0, loose
    assert verdict(loose).startswith("PASSED")

    model_only(trt10, "fake quantization with the calibrated range (TensorRT may keep an identity in fp32)")
    strict = invoke(*common)
    assert strict.exit_code == 1, strict  # a mismatch, reported, not an error
    assert verdict(strict).startswith("FAILED | mismatched outputs: y")
    errors = [float(e) for e in re.findall(r"max abs ([0-9.e-]+) \(atol", strict.stdout)]
    # within half a quantization step of the calibrated range 1 (scale 1/127), and not zero: the engine is int8
    assert errors and all(0 < e <= 0.5 / 127 + 1e-7 for e in errors), strict


def test_run_int8_with_only_a_cache(trt10, tmp_path):
    model = one_op(tmp_path / "identity.onnx")
    cache = tmp_path / "calib.cache"
    assert invoke("convert", model, "--int8", "--data-loader-script", data_script(tmp_path / "dl.py", ONES),
                  "--calibration-cache", cache, "-o", tmp_path / "m.engine").exit_code == 0
    # random inputs in [0, 1) against a range-1 calibration
    result = invoke("run", model, "--trt", "--int8", "--calibration-cache", cache, "--onnxrt", "--tolerance-preset", "int8")
    assert result.exit_code == 0, result


def test_run_int8_with_no_data_calibrates_on_the_runs_random_inputs(trt10, tmp_path):
    """As Polygraphy does: ``--int8`` alone calibrates on the run's synthetic inputs, with a warning; before, no
    calibrator was made, so the engine was silently not int8 and compared exactly."""
    model = one_op(tmp_path / "identity.onnx")
    warning = re.compile(r"^parity: warning: .*calibrating on random inputs", re.M)  # the warning, as users see it
    result = invoke("run", model, "--trt", "--int8", "--onnxrt", "--iterations", "2")
    assert warning.search(result.stderr), result
    model_only(trt10, "fake quantization with the calibrated range")
    assert result.exit_code == 1 and verdict(result).startswith("FAILED | mismatched outputs: y"), result
    tolerant = invoke("run", model, "--trt", "--int8", "--onnxrt", "--tolerance-preset", "int8")
    assert tolerant.exit_code == 0, tolerant
    assert warning.search(tolerant.stderr), tolerant


FOREIGN = b"TRT-100700-MinMaxCalibration\nx: 3c010204\ny: 3c010204\n"  # another calibrator's scales


@pytest.mark.parametrize(("content", "why"), [
    (None, r"the calibration cache '.*calib\.cache' does not exist"),
    (b"", r"the calibration cache '.*calib\.cache' is empty"),
    (FOREIGN, r"TensorRT did not accept the calibration cache '.*calib\.cache' \(made by another TensorRT version or calibration algorithm\?\)"),
])
def test_an_unusable_cache_without_data_is_one_clear_line(trt10, tmp_path, content, why):
    model = one_op(tmp_path / "identity.onnx")
    cache, engine = tmp_path / "calib.cache", tmp_path / "m.engine"
    if content == FOREIGN:
        model_only(trt10, "which caches TensorRT refuses")
    if content is not None:
        cache.write_bytes(content)
    result = invoke("convert", model, "--int8", "--calibration-cache", cache, "-o", engine)
    line = one_line_error(result, 2, rf"int8 calibration needs data: {why} and no calibration data was given \(--data-loader-script or --load-inputs\)")
    assert "failed to build" not in line
    assert not engine.exists()
    assert (cache.read_bytes() if cache.exists() else None) == content  # the user's file untouched


# ---- a calibration that fails leaves no cache (finding 1) -----------------------------------------------------


FAILS_AT_2 = ("for i in range(5):\n"
              "    if i == 2:\n"
              "        raise RuntimeError('disk gone')\n"
              "    yield draw({'x': np.ones((1, 1, 2, 2), np.float32) * (i + 1)})")


@pytest.mark.parametrize("existing", [None, FOREIGN])
def test_a_failed_calibration_writes_no_cache_and_keeps_the_users(trt10, tmp_path, existing):
    model = one_op(tmp_path / "identity.onnx")
    loader = data_script(tmp_path / "broken.py", FAILS_AT_2)
    cache, engine = tmp_path / "calib.cache", tmp_path / "m.engine"
    if existing is not None:
        model_only(trt10, "which caches TensorRT refuses")
        cache.write_bytes(existing)  # TensorRT does not accept it, so calibration runs and fails
    result = invoke("convert", model, "--int8", "--data-loader-script", loader, "--calibration-cache", cache, "-o", engine)
    one_line_error(result, 2, r"load_data\(\) raised RuntimeError: disk gone while producing iteration 2")
    assert drawn(loader) == 2 and not engine.exists()
    assert (cache.read_bytes() if cache.exists() else None) == existing  # no partial scales, the user's file kept
    # so the next build cannot silently reuse two batches' scales
    result = invoke("convert", model, "--int8", "--calibration-cache", cache, "-o", engine)
    assert result.exit_code == 2 and not engine.exists(), result


# ---- what TensorRT reads: float32 for half inputs (finding 2), the OPT shape for dynamic ones (finding 3) ----------

HALF_RAMP = ("for i in range(3):\n"
             "    yield draw({'x': np.array([[-1.0, 0.3, 0.55], [0.8, 0.95, 1.0]], np.float32).astype(np.DTYPE)})")


@pytest.mark.parametrize("feed_dtype", ["float16", "float32"])
def test_half_inputs_calibrate_from_float32_batches(trt10, tmp_path, feed_dtype):
    model = one_op(tmp_path / "half.onnx", op="Relu", elem="FLOAT16", dims=[2, 3])
    loader = data_script(tmp_path / "half_dl.py", HALF_RAMP.replace("DTYPE", feed_dtype))
    cache = tmp_path / "half.cache"
    result = invoke("convert", model, "--int8", "--data-loader-script", loader, "--calibration-cache", cache, "-o", tmp_path / "h.engine")
    assert result.exit_code == 0, result
    # the calibrated range is the data's (1.0): the int8 engine stays within half a step (1/254) plus fp16 rounding
    infer = data_script(tmp_path / "half_infer.py", HALF_RAMP.replace("DTYPE", "float16"))
    result = invoke("run", model, "--trt", "--int8", "--calibration-cache", cache, "--data-loader-script", infer,
                    "--onnxrt", "--atol", "0.005", "--rtol", "0")
    assert result.exit_code == 0, result


def test_half_input_calibration_data_of_another_dtype_is_refused(trt10, tmp_path):
    model = one_op(tmp_path / "half.onnx", op="Relu", elem="FLOAT16", dims=[2, 3])
    loader = data_script(tmp_path / "f64.py", HALF_RAMP.replace("DTYPE", "float64"))
    result = invoke("convert", model, "--int8", "--data-loader-script", loader, "-o", tmp_path / "h.engine")
    one_line_error(result, 2, r"^parity: error: calibration data for input 'x' has dtype float64, but the network expects float16 "
                              r"\(TensorRT reads its calibration data as float32; float32 is accepted too\)$")


PROFILE = ["--trt-min-shapes", "x:[1,3]", "--trt-opt-shapes", "x:[2,3]", "--trt-max-shapes", "x:[8,3]"]


@pytest.mark.parametrize(("rows", "ok"), [(2, True), (5, False), (1, False)])
def test_dynamic_inputs_calibrate_at_the_opt_shape(trt10, tmp_path, rows, ok):
    model = one_op(tmp_path / "dyn.onnx", op="Relu", dims=["N", 3])
    loader = data_script(tmp_path / "dyn_dl.py", f"for _ in range(2):\n    yield draw({{'x': np.ones(({rows}, 3), np.float32)}})")
    engine = tmp_path / "d.engine"
    result = invoke("convert", model, "--int8", "--data-loader-script", loader, *PROFILE, "-o", engine)
    if ok:
        assert result.exit_code == 0, result
        return
    one_line_error(result, 2, rf"^parity: error: calibration data for input 'x' has shape \[{rows}, 3\], but TensorRT calibrates it "
                              r"at the calibration profile's OPT shape \[2, 3\] \(the network has \['\?', 3\]\)$")
    assert not engine.exists()


# ---- options that would be ignored (finding 5) and TensorRT 11 ---------------------------------------------------


def test_calibration_cache_without_int8_is_refused(trt10, tmp_path):
    model = one_op(tmp_path / "identity.onnx")
    engine = tmp_path / "m.engine"
    result = invoke("convert", model, "--calibration-cache", tmp_path / "c.cache", "-o", engine)
    one_line_error(result, 2, r"^parity: error: --calibration-cache needs --int8 \(without it TensorRT builds no int8 engine and ignores the cache\)$")
    assert not engine.exists()
    result = invoke("run", model, "--trt", "--calibration-cache", tmp_path / "c.cache")
    one_line_error(result, 2, r"--calibration-cache needs --int8")


def test_calibration_cache_help_says_it_needs_int8(trt10):
    text = " ".join(invoke("convert", "--help").stdout.split())
    assert "Needs --int8 (refused without it)" in text


def test_a_calibrator_without_int8_is_refused_in_the_api(trt10, tmp_path):
    from parity_trt import Calibrator, CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxPath

    build = EngineBytesFromNetwork(NetworkFromOnnxPath(str(one_op(tmp_path / "identity.onnx"))),
                                   CreateConfig(calibrator=Calibrator([{"x": np.ones((1, 1, 2, 2), np.float32)}])))
    with pytest.raises(UsageError, match=r"^a calibrator \(or --calibration-cache\) was given without int8 \(--int8\); TensorRT would ignore it$"):
        build()


@pytest.mark.parametrize(("flags", "message"), [
    (["--int8"], r"^parity: error: --int8: not available on TensorRT 11\.x\. TensorRT 11 networks are strongly typed"),
    (["--int8", "--calibration-cache", "c.cache"], r"^parity: error: --int8: not available on TensorRT 11\.x\."),
    (["--calibration-cache", "c.cache"], r"^parity: error: --calibration-cache: TensorRT 11 has no int8 calibration; quantize with Q/DQ nodes instead$"),
])
def test_trt11_refuses_calibration_in_one_line(trt11, tmp_path, flags, message):
    model = one_op(tmp_path / "identity.onnx")
    loader = data_script(tmp_path / "dl.py", ONES)
    engine = tmp_path / "m.engine"
    flags = [str(tmp_path / f) if f.endswith(".cache") else f for f in flags]
    result = invoke("convert", model, *flags, "--data-loader-script", loader, "-o", engine)
    one_line_error(result, 2, message)
    assert not engine.exists() and drawn(loader) == 0
    assert not (tmp_path / "c.cache").exists()


# ---- Parity's Calibrator through the API, as Polygraphy's calibrator behaves --------------------------------------


class Feeds:
    """A re-iterable list of feeds that counts the batches drawn from it."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.feeds, self.drawn = feeds, 0

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for feed in self.feeds:
            self.drawn += 1
            yield feed


def ramp(n: int = 3) -> list[dict[str, np.ndarray]]:
    return [{"x": np.array([-2.0, 0.5, 1.0, 0.25 * i], np.float32).reshape(1, 1, 2, 2)} for i in range(n)]


def build(model: Path, calibrator: Any, **config: Any) -> bytes:
    from parity_trt import CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxPath

    return EngineBytesFromNetwork(NetworkFromOnnxPath(str(model)), CreateConfig(int8=True, calibrator=calibrator, **config))()


@pytest.fixture
def identity(tmp_path: Path) -> Path:
    return one_op(tmp_path / "identity.onnx")


def test_api_cache_to_a_path_is_reused_without_drawing_batches(trt10, identity, tmp_path):
    from parity_trt import Calibrator

    cache = tmp_path / "c.cache"
    first = Feeds(ramp())
    build(identity, Calibrator(first, cache=str(cache)))
    assert first.drawn == 3 and cache.stat().st_size > 0
    second = Feeds(ramp())
    assert build(identity, Calibrator(second, cache=cache))  # a Path works as well as a str
    assert second.drawn == 0


def test_api_cache_to_a_file_object(trt10, identity):
    from parity_trt import Calibrator

    handle = io.BytesIO()
    build(identity, Calibrator(ramp(), cache=handle))
    written = handle.getvalue()
    assert written
    again = Feeds(ramp())
    build(identity, Calibrator(again, cache=handle))
    assert again.drawn == 0 and handle.getvalue() == written


def test_api_one_calibrator_built_twice_calibrates_once(trt10, identity):
    from parity_trt import Calibrator

    feeds = Feeds(ramp())
    calibrator = Calibrator(feeds)  # no cache file: the scales are kept in the calibrator
    build(identity, calibrator)
    build(identity, calibrator)
    assert feeds.drawn == 3


def test_api_data_that_cannot_rewind_fails_a_second_calibration_clearly(trt10, identity):
    from parity_trt import Calibrator

    calibrator = Calibrator(feed for feed in ramp())  # a generator: iterable once
    build(identity, calibrator)
    calibrator._reset()  # forget the kept scales: calibrate again
    with pytest.raises(UsageError, match=r"^int8 calibration got no batches: the calibration data is empty \(a generator can be iterated only once"):
        build(identity, calibrator)

    feeds = Feeds(ramp())  # a re-iterable source calibrates again after a reset
    calibrator = Calibrator(feeds)
    build(identity, calibrator)
    calibrator._reset()
    build(identity, calibrator)
    assert feeds.drawn == 6


@pytest.mark.parametrize(("feed", "message"), [
    ({"x": np.ones((1, 1, 2, 2), np.float64)}, r"^calibration data for input 'x' has dtype float64, but the network expects float32$"),
    ({"x": np.ones((1, 1, 2, 3), np.float32)}, r"^calibration data for input 'x' has shape \[1, 1, 2, 3\], but the network expects \[1, 1, 2, 2\]$"),
    ({"y": np.ones((1, 1, 2, 2), np.float32)}, r"^calibration data has no input 'x' \(it has y\)$"),
])
def test_api_mismatched_data_fails_the_build(trt10, identity, tmp_path, feed, message):
    from parity_trt import Calibrator

    cache = tmp_path / "c.cache"
    with pytest.raises(UsageError, match=message):
        build(identity, Calibrator([*ramp(1), feed], cache=str(cache)))
    assert not cache.exists()


def spy_on_batches(calibrator: Any, nbytes: int) -> tuple[list[int], list[bytes]]:
    """Record the pointers ``get_batch`` hands TensorRT and the first input's ``nbytes`` there (what it reads)."""
    seam = process_memory()
    pointers: list[int] = []
    seen: list[bytes] = []
    get_batch = calibrator.get_batch

    def spy(names: list[str]) -> Any:
        result = get_batch(names)
        if result:
            pointers.extend(result)
            seen.append(bytes(seam.read(result[0], nbytes)))
        return result

    calibrator.get_batch = spy
    return pointers, seen


def test_api_half_batches_reach_the_device_as_float32(trt10, tmp_path):
    from parity_trt import Calibrator

    model_only(trt10, "reads its memory seam")
    model = one_op(tmp_path / "half.onnx", op="Relu", elem="FLOAT16", dims=[2, 3])
    data = [{"x": (np.arange(6, dtype=np.float32).reshape(2, 3) * (i + 1)).astype(np.float16)} for i in range(2)]
    calibrator = Calibrator(data)
    _, seen = spy_on_batches(calibrator, 6 * 4)  # TensorRT reads six float32 values
    build(model, calibrator)
    assert [np.frombuffer(b, np.float32).reshape(2, 3).tolist() for b in seen] == [d["x"].astype(np.float32).tolist() for d in data]


@pytest.mark.parametrize("fails", [False, True])
def test_api_device_buffers_are_freed_after_the_build(trt10, identity, fails):
    from parity_trt import Calibrator

    model_only(trt10, "reads its memory seam")
    data = [*ramp(2), *([{"x": np.ones((3,), np.float32)}] if fails else [])]
    calibrator = Calibrator(data)
    pointers, _ = spy_on_batches(calibrator, 4 * 4)
    if fails:
        with pytest.raises(UsageError, match="has shape"):
            build(identity, calibrator)
    else:
        build(identity, calibrator)
    assert pointers and not any(process_memory().is_device(p) for p in pointers)
