"""What the TensorRT model does (see ``trt_model/__init__.py``): logging, builder configs, timing caches and callback
interfaces here; networks and the ONNX parser in ``network.py``; building and running engines in ``engine.py``;
tactic choice in ``tactics.py``; int8 calibration in ``calibration.py``. One class per modelled TensorRT class, each behaviour
with its citation in NVIDIA/TensorRT (file@tag:line), or, where TensorRT documents nothing, the Polygraphy code that
relies on it. Only members the version's manifest lists are taken from a class here; the rest of a manifest class
raises ``NotImplementedError("not modelled")``. ``self._trt`` is the model module the object belongs to.

Simplifications (not TensorRT): ``IHostMemory`` is returned as ``bytes`` (it has the buffer protocol,
pyCore.cpp@v10.16:297); a timing cache is JSON (engine.py says what an engine is).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from typing import Any

# DataType values: pyFoundationalTypes.cpp@v10.16:L179-191 (values: NvInferRuntimeBase.h@v10.16 kX = n)
ENUM_VALUES = {"DataType": {"FLOAT": 0, "HALF": 1, "INT8": 2, "INT32": 3, "BOOL": 4, "UINT8": 5, "FP8": 6, "BF16": 7,
                            "INT64": 8, "INT4": 9, "FP4": 10, "E8M0": 11}}
# ILogger::Severity: kINTERNAL_ERROR = 0 .. kVERBOSE = 4 (NvInferRuntime.h@v10.7.0, ILogger)
ENUM_VALUES["ILogger.Severity"] = {"INTERNAL_ERROR": 0, "ERROR": 1, "WARNING": 2, "INFO": 3, "VERBOSE": 4}
# OnnxParserFlag: kNATIVE_INSTANCENORM = 0 .. kADJUST_FOR_DLA = 4 (NvOnnxParser.h@v11.0 OnnxParserFlag; the manifests
# list members alphabetically)
ENUM_VALUES["OnnxParserFlag"] = {"NATIVE_INSTANCENORM": 0, "ENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA": 1,
                                 "REPORT_CAPABILITY_DLA": 2, "ENABLE_PLUGIN_OVERRIDE": 3, "ADJUST_FOR_DLA": 4}
# module-level DataType values (manifest kind enum_value:DataType); the member each names follows its spelling
ENUM_ALIASES = {"float32": "FLOAT", "float16": "HALF", "bfloat16": "BF16", "int8": "INT8", "int32": "INT32", "int64": "INT64",
                "bool": "BOOL", "uint8": "UINT8", "fp8": "FP8", "int4": "INT4", "fp4": "FP4", "e8m0": "E8M0"}


def trampoline(obj: Any, method: str, *args: Any, default: Any = None) -> Any:
    """How pyCore.cpp / pyInt8.cpp call a Python override: any exception is caught, printed to stderr, and the
    default returned (pyCore.cpp@v10.7.0:L718-725 PyDebugListener, L574-583 reallocateOutputAsync returns
    nullptr, L594-601 notifyShape; pyInt8.cpp@v10.7.0:L68-76 getBatch returns false)."""
    try:
        return getattr(obj, method)(*args)
    except Exception as exc:  # noqa: BLE001 - modelling TensorRT's catch (std::exception const&)
        print(f"[ERROR] Exception caught in {method}(): {exc}", file=sys.stderr)
        return default


# ---- logging -------------------------------------------------------------------------------------------------
class Logger:
    def __init__(self, min_severity: Any = None) -> None:
        # Logger(min_severity=WARNING) with a read-write min_severity: pyCore.cpp@v10.7.0:L826-828
        self._min_severity = self._trt.ILogger.Severity.WARNING if min_severity is None else min_severity
        self._messages: list[str] = []  # what TensorRT logged through this logger

    min_severity = property(lambda self: self._min_severity, lambda self, value: setattr(self, "_min_severity", value))

    def log(self, severity: Any, msg: str) -> None:
        # trt.Logger prints messages at min_severity or worse (pyCore.cpp@v10.7.0:L775-790, DefaultLogger::log)
        self._messages.append(msg)
        if int(severity) <= int(self._min_severity):
            print(f"[TRT] [{severity.name[:1]}] {msg}", file=sys.stderr)


# ---- building ------------------------------------------------------------------------------------------------
class TimingCacheKey:
    """ "0x" + 32 hex digits, parsed and printed (NvInfer.h@v11.0:L10125-10140)."""

    def _init(self, text: str) -> None:
        self._text = text.lower()

    @staticmethod
    def parse(trt: Any, text: str) -> Any:  # pyCore.cpp@v11.0:L1665 def_static("parse", ..., "text"_a)
        return trt.TimingCacheKey._new(text)

    def __str__(self) -> str:
        return self._text


class TimingCacheValue:
    def __init__(self, tactic_hash: int, timing_msec: float) -> None:  # NvInfer.h@v11.0:L10156-10162
        self._tacticHash, self._timingMSec = tactic_hash, timing_msec

    tacticHash = property(lambda self: self._tacticHash, lambda self, v: setattr(self, "_tacticHash", v))  # noqa: N815
    timingMSec = property(lambda self: self._timingMSec, lambda self, v: setattr(self, "_timingMSec", v))  # noqa: N815


class ITimingCache:
    """Entries key text -> (tacticHash, timingMSec), and the version that made the cache. Serialized as JSON with the
    version under ``VERSION_KEY`` (a test's JSON without it is taken as this version's)."""

    def _init(self, entries: dict[str, tuple[int, float]], version: str | None = None) -> None:
        self._entries = dict(entries)
        self._version = version or self._trt.__version__

    def serialize(self) -> bytes:
        return json.dumps({VERSION_KEY: self._version, **self._entries}).encode()

    def queryKeys(self) -> list[Any]:  # noqa: N802
        return [self._trt.TimingCacheKey._new(k) for k in self._entries]

    def query(self, key: Any) -> Any:
        # "Cache value if the key exists, otherwise an invalid value" (NvInfer.h@v11.0:L10259-10262); which value
        # is invalid is not documented: the model's is hash 0 with a NaN timing
        return self._trt.TimingCacheValue(*self._entries.get(str(key), (0, math.nan)))

    def update(self, key: Any, value: Any) -> bool:
        # NvInfer.h@v11.0:L10279-10282: False for an unknown key; a NaN timing deletes the entry (True); an invalid
        # value gives False (the model's invalid: a negative timing); else the value is replaced
        if str(key) not in self._entries:
            return False
        if math.isnan(value.timingMSec):
            del self._entries[str(key)]
            return True
        if value.timingMSec < 0:
            return False
        self._entries[str(key)] = (value.tacticHash, value.timingMSec)
        return True

    def combine(self, input_cache: Any, ignore_mismatch: bool) -> bool:
        # NvInfer.h@v11.0:L10208-10211: "Append entries in input cache to local cache. Conflicting entries will be
        # skipped. The input cache must be generated by a TensorRT build of exact same version, otherwise combine
        # will be skipped and return false."
        if input_cache._version != self._version:
            return False
        for key, value in input_cache._entries.items():
            self._entries.setdefault(key, value)
        return True


VERSION_KEY = "__tensorrt_version__"


def cache_entries(data: bytes) -> dict[str, list]:
    """The entries of a serialized model timing cache (without its version)."""
    entries = json.loads(data)
    entries.pop(VERSION_KEY, None)
    return entries


class IBuilderConfig:
    def _init(self) -> None:
        self._flags: set[str] = set()
        self._profiles: list[Any] = []
        self._cache: Any = None
        self._int8_calibrator: Any = None  # nullptr until set (IBuilderConfig::getInt8Calibrator)
        self._calibration_profile: Any = None  # nullptr until set (IBuilderConfig::getCalibrationProfile)
        self._progress_monitor: Any = None
        self._profiling_verbosity = self._trt.ProfilingVerbosity.LAYER_NAMES_ONLY  # TensorRT's default

    int8_calibrator = property(lambda self: self._int8_calibrator, lambda self, v: setattr(self, "_int8_calibrator", v))
    progress_monitor = property(lambda self: self._progress_monitor, lambda self, v: setattr(self, "_progress_monitor", v))
    profiling_verbosity = property(lambda self: self._profiling_verbosity, lambda self, v: setattr(self, "_profiling_verbosity", v))

    def set_flag(self, flag: Any) -> None:
        self._flags.add(flag.name)

    def clear_flag(self, flag: Any) -> None:
        self._flags.discard(flag.name)

    def get_flag(self, flag: Any) -> bool:
        return flag.name in self._flags

    # tactic sources: a bit mask of 1 << TacticSource; TensorRT's default enables every source of the version
    # (NvInfer.h@v10.7.0 IBuilderConfig::setTacticSources/getTacticSources); returns bool (pyCore.cpp@v10.7.0)
    def set_tactic_sources(self, tactic_sources: int) -> bool:
        self._tactic_sources = int(tactic_sources)
        return True

    def get_tactic_sources(self) -> int:
        default = 0
        for member in self._trt.TacticSource.__members__.values():
            default |= 1 << int(member)
        return getattr(self, "_tactic_sources", default)

    # quantization flags (TensorRT 10): each set or cleared; none set by default (NvInfer.h@v10.7.0 QuantizationFlag)
    def set_quantization_flag(self, flag: Any) -> None:
        self.__dict__.setdefault("_quantization", set()).add(flag.name)

    def clear_quantization_flag(self, flag: Any) -> None:
        self.__dict__.setdefault("_quantization", set()).discard(flag.name)

    def get_quantization_flag(self, flag: Any) -> bool:
        return flag.name in self.__dict__.get("_quantization", set())

    # memory pool limits, by MemoryPoolType name (IBuilderConfig::setMemoryPoolLimit); an unset pool reads as the
    # model's "device memory" (TensorRT's default for WORKSPACE is the device's total global memory)
    def set_memory_pool_limit(self, pool: Any, pool_size: int) -> None:
        self.__dict__.setdefault("_pools", {})[pool.name] = int(pool_size)

    def get_memory_pool_limit(self, pool: Any) -> int:
        return self.__dict__.get("_pools", {}).get(pool.name, 1 << 34)

    def add_optimization_profile(self, profile: Any) -> int:
        self._profiles.append(profile)
        return len(self._profiles) - 1

    def create_timing_cache(self, serialized_timing_cache: Any) -> Any:
        # takes any buffer, b"" included (an empty cache): pyCore.cpp@v10.7.0:L246-249, L1564
        data = memoryview(serialized_timing_cache).tobytes()
        entries = json.loads(data) if data else {}
        version = entries.pop(VERSION_KEY, None)
        return self._trt.ITimingCache._new({k: tuple(v) for k, v in entries.items()}, version)

    def set_timing_cache(self, cache: Any, ignore_mismatch: bool) -> bool:
        # returns bool: pyCore.cpp@v10.7.0:L1566 (IBuilderConfig::setTimingCache)
        self._cache = cache
        return True

    def get_timing_cache(self) -> Any:
        # the cache "used in" this config, nullptr (None) while none was set: pyCore.cpp@v10.7.0:L1568,
        # NvInfer.h@v10.7.0:L9414-9419
        return self._cache


def cache_key(index: int) -> str:
    """The timing-cache key the model's builder records for layer ``index`` (TensorRT's are opaque hashes)."""
    return f"0x{index:032x}"


class IPluginRegistry:
    def load_library(self, plugin_path: str) -> Any:
        return object()


# ---- python-level additions of tensorrt_bindings/__init__.py (the same at every modelled tag) ----------------------
def common_enter(this: Any) -> Any:
    """``with obj:`` on Builder, INetworkDefinition, OnnxParser, IBuilderConfig, ICudaEngine, IExecutionContext, Runtime,
    IHostMemory and ILogger: a DeprecationWarning ("Context managers for TensorRT types are deprecated. Memory will be
    freed automatically when the reference count reaches 0."), and the object itself."""
    import warnings

    warnings.warn("Context managers for TensorRT types are deprecated. "
                  "Memory will be freed automatically when the reference count reaches 0.", DeprecationWarning, stacklevel=1)
    # (no stacklevel given there: the warning is attributed to the tensorrt package, so Python's default filters hide it)
    return this


def common_exit(this: Any, exc_type: Any, exc_value: Any, traceback: Any) -> None:
    """Does nothing ("Context managers are deprecated and have no effect"); ILogger's ``__exit__`` is a lambda that
    returns None, the same. An exception in the block is not suppressed."""
    return None


# module-level functions and static methods get the model module as their first argument
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "init_libnvinfer_plugins": lambda trt, logger, namespace: True,
    "get_plugin_registry": lambda trt: trt.IPluginRegistry._new(),
    "common_enter": lambda trt, this: common_enter(this),
    "common_exit": lambda trt, this, exc_type, exc_value, traceback: common_exit(this, exc_type, exc_value, traceback),
}


def _weights_from(value: Any) -> bool:
    """Whether pybind11 turns ``value`` into ``Weights`` implicitly: ``py::implicitly_convertible<py::array, Weights>()``
    (pyFoundationalTypes.cpp@v10.7.0) takes numpy arrays only, through ``Weights(a: numpy.ndarray)``, which refuses a
    non-contiguous array (ValueError) or a dtype TensorRT lacks (utils::type throws): a failed conversion is no match."""
    import numpy as np

    from trt_model.network import weights_type

    return isinstance(value, np.ndarray) and bool(value.flags.c_contiguous) and weights_type(value.dtype) is not None


# class name -> which Python values pybind11 converts to it implicitly (py::implicitly_convertible)
IMPLICIT: dict[str, Callable[[Any], bool]] = {"Weights": _weights_from}


# ---- callback interfaces ---------------------------------------------------------------------------------
class _Interface:
    """Classes Python subclasses to receive callbacks: IDebugListener(), IOutputAllocator(), ... take no arguments."""

    def __init__(self) -> None:
        pass


IDebugListener = IOutputAllocator = IProgressMonitor = _Interface


def _public_classes(namespace: dict[str, Any]) -> dict[str, type]:
    return {name: value for name, value in namespace.items()
            if isinstance(value, type) and not name.startswith("_") and value.__module__.startswith("trt_model")}


def _registry() -> dict[str, type]:
    """Every modelled class by TensorRT name: this module's, then network.py's, engine.py's, tactics.py's and
    calibration.py's (a module's ``CLASSES`` dict where it has one)."""
    from trt_model import calibration, capability, engine, network, tactics

    classes = _public_classes(globals())
    for name, member in {**tactics.CONFIG_MEMBERS, **calibration.CONFIG_MEMBERS}.items():
        setattr(IBuilderConfig, name, member)
    for name, member in capability.PARSER_MEMBERS.items():  # the parser's capability queries
        setattr(network.OnnxParser, name, member)
    for module in (network, engine, tactics, calibration):
        classes.update(getattr(module, "CLASSES", None) or _public_classes(vars(module)))
    classes.pop("Program", None)
    return classes

