"""INT8 calibration in the TensorRT model (see ``trt_model/__init__.py``; this is NOT TensorRT).

Written from TensorRT's sources (NVIDIA/TensorRT, tags v10.0.1..v10.16; ``python/src/infer/pyInt8.cpp`` is the same
file, line for line, at v10.0.1, v10.7.0, v10.8.0 and v10.16, and is gone at v11.0), not from Parity's calibrator.
Only TensorRT 10.x has calibration: the 11.0 manifests drop ``BuilderFlag.INT8``, ``IBuilderConfig.int8_calibrator``,
``set/get_calibration_profile``, ``CalibrationAlgoType`` and the five ``IInt8*Calibrator`` classes
(``shared/trt-api/api-diff-10.16.1.11-to-11.0.0.114.txt``).

What TensorRT does, with citations (file@tag:Lline, NVIDIA/TensorRT):

- The classes Python subclasses: ``IInt8Calibrator`` and its four subclasses ``IInt8LegacyCalibrator``,
  ``IInt8EntropyCalibrator``, ``IInt8EntropyCalibrator2``, ``IInt8MinMaxCalibrator``, each with a no-argument
  constructor (``py::init<>()``, pyInt8.cpp@v10.7.0:L286-358). Their ``get_batch``, ``read_calibration_cache`` and
  ``write_calibration_cache`` are bound "for documentation purposes only" (L257-276, L293-298): called on the base
  they return ``[]``, an empty buffer, ``None``. ``get_batch_size`` is bound to the C++ virtual behind a
  DeprecationWarning (L288-291, utils.cpp@v10.7.0:L25-31); with no Python override the trampoline's pure-virtual
  call fails and -1 comes back (L35-50).
- The algorithm: the four subclasses return theirs from C++ (NvInfer.h@v10.7.0:L7866-7869 ENTROPY_CALIBRATION,
  L7906-7909 ENTROPY_CALIBRATION_2, L7946-7949 MINMAX_CALIBRATION, L7985-7988 LEGACY_CALIBRATION) and their
  trampoline (``pyCalibratorTrampoline``, pyInt8.cpp@v10.7.0:L29-150) does not override ``getAlgorithm``, so a Python
  ``get_algorithm`` on them is never called by TensorRT. Only a direct ``IInt8Calibrator`` subclass is asked
  (``pyIInt8Calibrator::getAlgorithm``, L163-178); an exception gives ``CalibrationAlgoType{}``, LEGACY_CALIBRATION.
- Every call into Python is wrapped: an exception is printed ("[ERROR] Exception caught in <name>(): ...") and a
  default returned (``behaviour.trampoline``): ``get_batch_size`` -1 (L35-50), ``get_batch`` false = no more batches
  (L52-77), ``read_calibration_cache`` nullptr = no cache (L79-111), ``write_calibration_cache`` nothing (L113-146).
- ``get_batch(names)`` gets the input names as a list of str (L59-60). ``None`` or an empty list ends calibration
  (L62); otherwise the result is cast to ``std::vector<size_t>`` (a non-int or negative entry is a cast error:
  printed, calibration ends) and ``nbBindings`` pointers are memcpy'd out of it (L64). A list SHORTER than the
  inputs is read past its end there: undefined behaviour in TensorRT, not documented anywhere; the model fails the
  build with a logged error. A longer list: the first ``len(names)`` entries are used, as the memcpy does.
- ``read_calibration_cache``: ``None`` -> no cache (L90-93); anything else must have the buffer protocol (L95; a
  ``str`` does not: printed, no cache); a zero-length buffer is "no data" (NvInfer.h@v10.7.0:L7824-7827), so
  calibration runs. A cache "will not be used if these do not [match] the settings of the current calibrator"
  (NvInfer.h@v10.7.0:L7817-7822): the model recalibrates when the cache's header names another algorithm or the
  cache cannot be parsed (its choice: TensorRT's own check is not in the sources).
- ``write_calibration_cache`` gets a ``memoryview`` of bytes (L133-136).
- The shapes of dynamic inputs are the calibration profile's OPT ("MIN and MAX values will be overwritten by kOPT",
  NvInfer.h@v10.7.0:L9244-9252; "Calibration optimization profile must be set if int8 calibration is used to set
  scales for a network with runtime dimensions", same place). With none set the model uses the first optimization
  profile, as NVIDIA's developer guide describes (not in the headers). See :func:`calibration_inputs`.

Model choices and simplifications (not TensorRT, say so when they matter):

- Call order: ``get_batch_size()``; ``get_algorithm()`` (direct ``IInt8Calibrator`` subclasses only);
  ``read_calibration_cache()``; if no usable cache, ``get_batch(names)`` until it ends, then
  ``write_calibration_cache(buffer)``. With a usable cache ``get_batch`` and ``write_calibration_cache`` are not
  called. The value of ``get_batch_size`` is ignored (implicit batch was removed in 10.0: NvInfer.h@v10.7.0:L7789-7795).
- Zero batches and no cache fail the build: TensorRT's builder logs "Calibration failure occurred with no scaling
  factors detected" (its developer guide's error table; the message is from the closed-source builder).
- Calibration data are read as float32 for inputs whose type is not FLOAT/INT32/INT64/BOOL ("TensorRT requires
  non-index calibration inputs to be provided in float32": Polygraphy 0.53.6 backend/trt/calibrator.py,
  ``set_input_metadata``), then converted to the input's type to run the network.
- The range of a tensor is max |x| over all batches for every algorithm (only MinMax does that in TensorRT; the
  entropy calibrators pick a threshold at or below it by KL divergence, legacy by quantile/regression).
  ``IInt8LegacyCalibrator``'s ``get_quantile``/``get_regression_cutoff``/histogram-cache calls (pyInt8.cpp@v10.7.0:
  L187-254) are not made.
- The cache text is TensorRT's layout as trtexec reads it back (samples/common/sampleEngines.cpp@v10.7.0:L50-73:
  ``name: XXXXXXXX``, eight hex digits = the float32 bits of the scale; range = 127 * scale, L165-166 and
  L176-177), under a first line ``TRT-<NV_TENSORRT_VERSION>-<Algorithm>`` (NV_TENSORRT_VERSION = major*10000 +
  minor*100 + patch, NvInferRuntimeBase.h@v10.7.0:L87-91), e.g. ``TRT-100700-EntropyCalibration2``. The version in
  the header is not checked, the algorithm is.
"""

from __future__ import annotations

import re
import struct
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# ---- the classes Python subclasses ---------------------------------------------------------------------------
# __init__.py takes a class's members from ``vars(impl)`` (its own dict only), so each class below gets all of them.


def _init(self: Any) -> None:
    """``py::init<>()``: pyInt8.cpp@v10.7.0:L287, L302, L317, L332, L347."""


def _get_batch_size(self: Any) -> int:
    # the C++ virtual behind a DeprecationWarning (pyInt8.cpp@v10.7.0:L288-291; utils.cpp@v10.7.0:L25-31); with no
    # Python override the trampoline's pure-virtual call fails, is printed and -1 returned (L35-50)
    warnings.warn("Use Implicit batch dimensions support has been removed instead.", DeprecationWarning, stacklevel=2)
    print("[ERROR] Exception caught in get_batch_size(): Tried to call pure virtual function \"get_batch_size\"", file=sys.stderr)
    return -1


def _get_batch(self: Any, names: Any) -> list[int]:
    return []  # docGetBatch: pyInt8.cpp@v10.7.0:L261-265


def _read_calibration_cache(self: Any) -> Any:
    return None  # docReadCalibrationCache returns an empty py::buffer handle (L267-271); None here


def _write_calibration_cache(self: Any, cache: Any) -> None:
    return None  # docWriteCalibrationCache: L273-276


_ALGORITHM_OF = {  # the C++ getAlgorithm of each subclass (NvInfer.h@v10.7.0)
    "IInt8EntropyCalibrator": "ENTROPY_CALIBRATION",  # L7866-7869
    "IInt8EntropyCalibrator2": "ENTROPY_CALIBRATION_2",  # L7906-7909
    "IInt8MinMaxCalibrator": "MINMAX_CALIBRATION",  # L7946-7949
    "IInt8LegacyCalibrator": "LEGACY_CALIBRATION",  # L7985-7988
}


def _fixed_algorithm(member: str) -> Callable[[Any], Any]:
    def get_algorithm(self: Any) -> Any:
        return getattr(self._trt.CalibrationAlgoType, member)

    return get_algorithm


def _pure_get_algorithm(self: Any) -> Any:
    # IInt8Calibrator::getAlgorithm is pure (NvInfer.h@v10.7.0:L7845); pyIInt8Calibrator catches the failed
    # override call and returns CalibrationAlgoType{} (pyInt8.cpp@v10.7.0:L163-178)
    print("[ERROR] Exception caught in get_algorithm(): Tried to call pure virtual function \"get_algorithm\"", file=sys.stderr)
    return self._trt.CalibrationAlgoType.LEGACY_CALIBRATION


def _calibrator_class(name: str) -> type:
    ns: dict[str, Any] = {
        "__init__": _init,
        "get_batch_size": _get_batch_size,
        "get_batch": _get_batch,
        "read_calibration_cache": _read_calibration_cache,
        "write_calibration_cache": _write_calibration_cache,
        "get_algorithm": _fixed_algorithm(_ALGORITHM_OF[name]) if name in _ALGORITHM_OF else _pure_get_algorithm,
        "__doc__": f"{name}: a class Python subclasses to calibrate (pyInt8.cpp@v10.7.0); see trt_model/calibration.py.",
    }
    return type(name, (), ns)


CLASS_NAMES = ("IInt8Calibrator", "IInt8LegacyCalibrator", "IInt8EntropyCalibrator", "IInt8EntropyCalibrator2", "IInt8MinMaxCalibrator")
CLASSES: dict[str, type] = {name: _calibrator_class(name) for name in CLASS_NAMES}


# ---- IBuilderConfig members (for behaviour.IBuilderConfig) -------------------------------------------------------
def _set_calibration_profile(self: Any, profile: Any) -> bool:
    # pyCore.cpp@v10.7.0:L1542-1545 (deprecated 10.1); None unsets it (pyCoreDoc.h@v10.7.0:L1454-1464)
    warnings.warn("Use Deprecated in TensorRT 10.1. Superseded by explicit quantization. instead.", DeprecationWarning, stacklevel=2)
    self._calibration_profile = profile
    return True


def _get_calibration_profile(self: Any) -> Any:
    # "The current calibration profile or None if calibrartion profile is unset" (pyCoreDoc.h@v10.7.0:L1466-1472)
    warnings.warn("Use Deprecated in TensorRT 10.1. Superseded by explicit quantization. instead.", DeprecationWarning, stacklevel=2)
    return getattr(self, "_calibration_profile", None)


CONFIG_MEMBERS: dict[str, Callable[..., Any]] = {
    "set_calibration_profile": _set_calibration_profile,
    "get_calibration_profile": _get_calibration_profile,
}


# ---- the calibration pass ---------------------------------------------------------------------------------------
def wants_calibration(trt: Any, config: Any) -> bool:
    """Whether a build with ``config`` calibrates: TensorRT 10 (``BuilderFlag.INT8`` exists), the flag set, and a
    calibrator given. (TensorRT also ignores the calibrator for networks with Q/DQ layers; the caller decides that.)"""
    flag = getattr(getattr(trt, "BuilderFlag", None), "INT8", None)
    return flag is not None and config.get_flag(flag) and getattr(config, "_int8_calibrator", None) is not None


def calibration_inputs(network: Any, config: Any) -> list[tuple[str, tuple[int, ...], str]] | str:
    """``calibrate``'s ``inputs`` for a model network: (name, shape, DataType member name) per input, a dynamic
    input's shape being the OPT of the calibration profile, or of the first optimization profile when none was set
    (see the module docstring); an error message when a dynamic input has no such shape."""
    profile = getattr(config, "_calibration_profile", None)
    if profile is None and getattr(config, "_profiles", None):
        profile = config._profiles[0]
    found = []
    for tensor in network._inputs:
        shape = tuple(tensor.shape)
        if any(d < 0 for d in shape):
            if profile is None or tensor.name not in profile._shapes:
                return f"calibration: no calibration profile gives a shape for dynamic input {tensor.name!r} {list(shape)}"
            shape = tuple(profile._shapes[tensor.name][1])
        found.append((tensor.name, shape, tensor.dtype.name))
    return found


_HOST_DTYPES = {"FLOAT": np.float32, "INT32": np.int32, "INT64": np.int64, "BOOL": np.bool_}
_RUN_DTYPES = {**_HOST_DTYPES, "HALF": np.float16, "INT8": np.int8, "UINT8": np.uint8}  # BF16/FP8/...: kept float32
_CACHE_NAMES = {"LEGACY_CALIBRATION": "LegacyCalibration", "ENTROPY_CALIBRATION": "EntropyCalibration",
                "ENTROPY_CALIBRATION_2": "EntropyCalibration2", "MINMAX_CALIBRATION": "MinMaxCalibration"}


def calibration_dtype(dtype_name: str) -> np.dtype:
    """The host type TensorRT reads an input's calibration data as: float32 unless FLOAT/INT32/INT64/BOOL."""
    return np.dtype(_HOST_DTYPES.get(dtype_name, np.float32))


def trt_version_int(version: str) -> int:
    """NV_TENSORRT_VERSION: major*10000 + minor*100 + patch (NvInferRuntimeBase.h@v10.7.0:L87-91)."""
    major, minor, patch = (int(p) for p in (version.split(".") + ["0", "0"])[:3])
    return major * 10000 + minor * 100 + patch


def write_cache_text(version: str, algorithm: str, ranges: Mapping[str, float]) -> bytes:
    """The calibration cache: ``TRT-<ver>-<Algorithm>`` then ``name: <float32 bits of range/127 in hex>`` lines."""
    lines = [f"TRT-{trt_version_int(version)}-{_CACHE_NAMES[algorithm]}"]
    for name, value in ranges.items():
        scale = np.float32(value) / np.float32(127)
        lines.append(f"{name}: {struct.pack('>f', scale).hex()}")
    return ("\n".join(lines) + "\n").encode()


def read_cache_text(data: bytes, algorithm: str) -> dict[str, float] | str:
    """Ranges (127 * scale) from a cache ``write_cache_text`` wrote, or why it is not used."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return "calibration cache is not text"
    lines = [line for line in text.splitlines() if line.strip()]
    header = re.fullmatch(r"TRT-(\d+)-(\w+)", lines[0].strip()) if lines else None
    if header is None:
        return "calibration cache has no TRT-<version>-<algorithm> header"
    if header.group(2) != _CACHE_NAMES[algorithm]:
        return f"calibration cache was made by {header.group(2)}, the calibrator uses {_CACHE_NAMES[algorithm]}"
    ranges = {}
    for line in lines[1:]:
        name, colon, value = line.rpartition(":")  # find_last_of(':'), then 8 hex digits after ": " (L62-68)
        if not colon or not re.fullmatch(r" [0-9a-fA-F]{8}", value):
            return f"calibration cache line {line!r} is not 'name: xxxxxxxx'"
        ranges[name] = float(np.float32(127) * struct.unpack(">f", bytes.fromhex(value[1:]))[0])
    return ranges


def _pointers(result: Any) -> list[int] | str | None:
    """get_batch's result as TensorRT takes it (pyInt8.cpp@v10.7.0:L60-66): None to stop, the pointers, or a str when
    pybind11's cast to std::vector<size_t> fails (printed there, and calibration stops)."""
    if result is None:
        return None
    if isinstance(result, (str, bytes)) or not hasattr(result, "__iter__"):
        return f"Unable to cast Python instance of type {type(result).__name__} to C++ type 'std::vector<size_t>'"
    values = list(result)
    for value in values:
        if isinstance(value, float) or not hasattr(value, "__index__") or int(value) < 0:
            return f"Unable to cast Python instance of type {type(value).__name__} to C++ type 'unsigned long'"
    return [int(v) for v in values] if values else None


def calibrate(trt: Any, config: Any, inputs: list[tuple[str, tuple[int, ...], str]], memory: Any,
              run: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]], log: Callable[[str], None],
              warn: Callable[[str], None] | None = None) -> dict[str, float] | None:
    """The calibration pass of a build (pyInt8.cpp protocol; see the module docstring).

    ``inputs``: the network inputs (name, shape of the calibration profile or the static shape, DataType member
    name; :func:`calibration_inputs` makes them). ``memory``: the model's memory seam with ``read(ptr, nbytes) ->
    bytes`` (in CI host buffers, on a GPU real device memory); a read that raises is a failed build (on a GPU an
    illegal address). ``run(feeds)`` runs the network on one batch and returns every tensor's value. Returns the
    dynamic range per tensor name (max |x| over batches, or 127 * scale from a cache), or None when the build must
    fail, after ``log(message)``. ``warn(message)`` (stderr by default) gets what TensorRT would only warn about.
    """
    from trt_model.behaviour import trampoline  # here, not at import: behaviour may import this module

    warn = warn or (lambda message: print(f"[W] {message}", file=sys.stderr))
    calibrator = config._int8_calibrator
    trampoline(calibrator, "get_batch_size", default=-1)  # asked, then ignored (implicit batch is gone in 10.0)
    algorithm = _algorithm(trt, calibrator)

    cache = trampoline(calibrator, "read_calibration_cache", default=None)
    if cache is not None:
        try:
            data = memoryview(cache).tobytes()  # py::buffer{cacheRaw}: pyInt8.cpp@v10.7.0:L95-99
        except TypeError as exc:
            print(f"[ERROR] Exception caught in read_calibration_cache(): {exc}", file=sys.stderr)
            data = b""
        if data:
            cached = read_cache_text(data, algorithm)
            if isinstance(cached, dict):
                return cached
            warn(f"{cached}; calibrating again")

    names = [name for name, _, _ in inputs]
    for name, shape, _ in inputs:
        if any(int(d) < 0 for d in shape):  # "must be set ... for a network with runtime dimensions" (NvInfer.h@v10.7.0:L9244)
            log(f"calibration: input {name!r} has dynamic shape {list(shape)} and no calibration profile gives its OPT shape")
            return None
    ranges: dict[str, float] = {}
    batches = 0
    while True:
        result = _pointers(trampoline(calibrator, "get_batch", names, default=None))
        if isinstance(result, str):
            print(f"[ERROR] Exception caught in get_batch(): {result}", file=sys.stderr)
            break
        if result is None:
            break
        if len(result) < len(names):  # memcpy of nbBindings pointers reads past the list (pyInt8.cpp@v10.7.0:L64)
            log(f"calibration: get_batch returned {len(result)} pointer(s) for {len(names)} input(s) {names}")
            return None
        feeds = {}
        for (name, shape, dtype_name), ptr in zip(inputs, result):
            host, count = calibration_dtype(dtype_name), int(np.prod(shape, dtype=np.int64))
            try:
                array = np.frombuffer(bytes(memory.read(ptr, count * host.itemsize)), dtype=host, count=count).reshape(shape)
            except Exception as exc:  # noqa: BLE001 - on a GPU: an illegal address, the build fails
                log(f"calibration: cannot read {count * host.itemsize} bytes of input {name!r} at {ptr:#x} (batch {batches}): {exc}")
                return None
            feeds[name] = array.astype(_RUN_DTYPES.get(dtype_name, np.float32), copy=True)
        try:
            values = run(feeds)
        except Exception as exc:  # noqa: BLE001 - the model's own failure to run the network
            log(f"calibration: running batch {batches} failed: {exc}")
            return None
        for name, value in {**feeds, **values}.items():
            value = np.asarray(value)
            if value.dtype.kind == "f" and value.size:
                ranges[name] = max(ranges.get(name, 0.0), float(np.max(np.abs(value.astype(np.float64)))))
        batches += 1

    if not batches:
        log("Calibration failure occurred with no scaling factors detected. This could be due to no int8 calibrator "
            "or insufficient custom scales for network layers.")
        return None
    text = write_cache_text(trt.__version__, algorithm, ranges)
    trampoline(calibrator, "write_calibration_cache", memoryview(text))  # pyInt8.cpp@v10.7.0:L133-136
    return ranges


def _algorithm(trt: Any, calibrator: Any) -> str:
    """The CalibrationAlgoType member name TensorRT uses for ``calibrator`` (see the module docstring)."""
    for name, member in _ALGORITHM_OF.items():
        cls = getattr(trt, name, None)
        if cls is not None and isinstance(calibrator, cls):
            return member  # fixed in C++; a Python get_algorithm override is not called
    # a direct IInt8Calibrator subclass is asked; LEGACY_CALIBRATION when that fails (pyInt8.cpp@v10.7.0:L163-178)
    from trt_model.behaviour import trampoline

    value = trampoline(calibrator, "get_algorithm", default=trt.CalibrationAlgoType.LEGACY_CALIBRATION)
    if not isinstance(value, trt.CalibrationAlgoType):  # pybind11's cast to CalibrationAlgoType fails
        print(f"[ERROR] Exception caught in get_algorithm(): Unable to cast {value!r} to CalibrationAlgoType", file=sys.stderr)
        value = trt.CalibrationAlgoType.LEGACY_CALIBRATION
    return value.name


# ---- what an INT8 engine's tensors look like --------------------------------------------------------------------
def quantize(values: Mapping[str, np.ndarray], ranges: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Each float tensor with a positive range fake-quantized: scale = range/127, x -> clip(rint(x/scale), -127, 127)
    * scale, rint rounding half to even; other tensors unchanged. Symmetric per-tensor INT8 as the cache's scales
    describe (range = 127 * scale). A SIMPLIFICATION, not TensorRT: TensorRT picks each layer's precision itself
    (a layer may stay FP32/FP16, fusions quantize fewer tensors, and kernels accumulate in int32), so an engine's
    outputs differ from these by more or less than this shows; it only gives ``run --trt --int8 --onnxrt`` the
    small differences users expect."""
    out = {}
    for name, value in values.items():
        array = np.asarray(value)
        limit = ranges.get(name)
        if array.dtype.kind != "f" or limit is None or not limit > 0:
            out[name] = value
            continue
        scale = np.float32(limit) / np.float32(127)
        q = np.clip(np.rint(array.astype(np.float32) / scale), -127, 127)
        out[name] = (q * scale).astype(array.dtype)
    return out
