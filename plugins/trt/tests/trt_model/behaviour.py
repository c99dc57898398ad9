"""What the TensorRT model does (see ``trt_model/__init__.py``): one class per modelled TensorRT class, each behaviour
with its citation in NVIDIA/TensorRT (file@tag:line), or, where TensorRT documents nothing, the Polygraphy code that
relies on it. Only members the version's manifest lists are taken from a class here; the rest of a manifest class
raises ``NotImplementedError("not modelled")``. ``self._trt`` is the model module the object belongs to.

Simplifications (not TensorRT): ``IHostMemory`` is returned as ``bytes`` (it has the buffer protocol,
pyCore.cpp@v10.16:297); a serialized engine and a timing cache are JSON; the engines the builder makes have no
executable code: tests that run inference give ``engine()`` a ``Program`` (the network's arithmetic) and a memory
object (``host_cuda.HostCudart`` in CI, where "device" memory is host buffers).
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# DataType values: pyFoundationalTypes.cpp@v10.16:L179-191 (values: NvInferRuntimeBase.h@v10.16 kX = n)
ENUM_VALUES = {"DataType": {"FLOAT": 0, "HALF": 1, "INT8": 2, "INT32": 3, "BOOL": 4, "UINT8": 5, "FP8": 6, "BF16": 7,
                            "INT64": 8, "INT4": 9, "FP4": 10, "E8M0": 11}}
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
        self._messages.append(msg)


# ---- building ------------------------------------------------------------------------------------------------
class ITensor:
    def _init(self, network: Any, name: str, shape: tuple[int, ...], is_shape_tensor: bool = False, dtype: Any = None) -> None:
        self._network, self._name, self._shape, self._layer = network, name, tuple(shape), None
        self._dtype = dtype if dtype is not None else self._trt.DataType.FLOAT
        self._is_shape_tensor = is_shape_tensor

    name = property(lambda self: self._name, lambda self, v: setattr(self, "_name", v))
    shape = property(lambda self: self._shape, lambda self, v: setattr(self, "_shape", tuple(v)))
    dtype = property(lambda self: self._dtype, lambda self, v: setattr(self, "_dtype", v))
    is_shape_tensor = property(lambda self: self._is_shape_tensor)  # read-only: pyGraph.cpp@v10.7.0:L344
    is_network_output = property(lambda self: self in self._network._outputs)


class ILayer:
    def _init(self, kind: Any, outputs: list[Any], in_loop: bool = False) -> None:
        self._type, self._outputs = kind, outputs
        self._in_loop = in_loop  # TensorRT keeps loop membership to itself
        for tensor in outputs:
            if tensor is not None:
                tensor._layer = self

    type = property(lambda self: self._type)  # ILayer.type, read-only: pyGraph.cpp@v10.7.0:L359
    num_outputs = property(lambda self: len(self._outputs))

    def get_output(self, index: int) -> Any:
        # "The indexed output tensor, or nullptr if the index is out of range or the tensor is optional":
        # ILayer::getOutput, NvInfer.h@v10.7.0:L619-623; pybind11 turns nullptr into None (pyGraph.cpp@v10.7.0:L366)
        return self._outputs[index] if 0 <= index < len(self._outputs) else None


class INetworkDefinition:
    def _init(self, flags: int = 0) -> None:
        self._flags, self._inputs, self._layers, self._outputs = flags, [], [], []

    # model helpers (not TensorRT API): build a network layer by layer
    def _input(self, name: str, shape: tuple[int, ...], is_shape_tensor: bool = False, dtype: Any = None) -> Any:
        tensor = self._trt.ITensor._new(self, name, shape, is_shape_tensor, dtype)
        self._inputs.append(tensor)
        return tensor

    def _layer(self, kind: Any, *names: str | None, in_loop: bool = False, shape_output: bool = False) -> Any:
        outs = [None if n is None else self._trt.ITensor._new(self, n, (2, 3), shape_output) for n in names]
        layer = self._trt.ILayer._new(kind, outs, in_loop)
        self._layers.append(layer)
        return layer

    flags = property(lambda self: self._flags)
    num_inputs = property(lambda self: len(self._inputs))
    num_layers = property(lambda self: len(self._layers))
    num_outputs = property(lambda self: len(self._outputs))

    def get_input(self, index: int) -> Any:
        return self._inputs[index]

    def get_layer(self, index: int) -> Any:
        return self._layers[index]

    def get_output(self, index: int) -> Any:
        return self._outputs[index]

    def mark_output(self, tensor: Any) -> None:
        # bound to markOutput(ITensor&) (pyGraph.cpp@v10.7.0:L855); pybind11 cannot bind None to a reference
        # and raises (reference_cast_error, a RuntimeError)
        if tensor is None:
            raise RuntimeError("Unable to cast Python instance to C++ type")
        if tensor not in self._outputs:
            self._outputs.append(tensor)

    def unmark_output(self, tensor: Any) -> None:
        if tensor in self._outputs:
            self._outputs.remove(tensor)

    def mark_debug(self, tensor: Any) -> bool:
        return True


class IOptimizationProfile:
    def _init(self) -> None:
        self._shapes: dict[str, tuple] = {}
        self._values: dict[str, tuple] = {}

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002 - TensorRT's keyword names
        # pyCore.cpp@v10.7.0:L870 (opt_profile_set_shape, L30-43: raises when min/opt/max disagree)
        self._shapes[input] = (tuple(min), tuple(opt), tuple(max))

    def set_shape_input(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002
        # VALUES of a shape-tensor input: pyCore.cpp@v10.7.0:L59-68 (std::vector<int32_t> each; int64 from 10.16)
        for which in (min, opt, max):
            if any(not isinstance(v, int) for v in which):
                raise TypeError("set_shape_input takes lists of ints")
        if not len(min) == len(opt) == len(max):
            raise RuntimeError("min input provided for shape tensor is inconsistent with other inputs.")
        self._values[input] = (tuple(min), tuple(opt), tuple(max))


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
    def _init(self, entries: dict[str, tuple[int, float]]) -> None:
        self._entries = dict(entries)  # key text -> (tacticHash, timingMSec)

    def serialize(self) -> bytes:
        return json.dumps(self._entries).encode()

    def queryKeys(self) -> list[Any]:  # noqa: N802
        return [self._trt.TimingCacheKey._new(k) for k in self._entries]

    def query(self, key: Any) -> Any:
        return self._trt.TimingCacheValue(*self._entries[str(key)])

    def update(self, key: Any, value: Any) -> bool:
        # NvInfer.h@v11.0:L10279: "If the key does not exist, return false" (pyCore.cpp@v11.0:L1689 returns it)
        if str(key) not in self._entries:
            return False
        self._entries[str(key)] = (value.tacticHash, value.timingMSec)
        return True

    def combine(self, input_cache: Any, ignore_mismatch: bool) -> bool:
        # NvInfer.h@v11.0:L10209: "Append entries in input cache to local cache. Conflicting entries will be skipped"
        for key, value in input_cache._entries.items():
            self._entries.setdefault(key, value)
        return True


class IBuilderConfig:
    def _init(self) -> None:
        self._flags: set[str] = set()
        self._profiles: list[Any] = []
        self._cache: Any = None
        self._int8_calibrator: Any = None  # nullptr until set (IBuilderConfig::getInt8Calibrator)
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

    def add_optimization_profile(self, profile: Any) -> int:
        self._profiles.append(profile)
        return len(self._profiles) - 1

    def create_timing_cache(self, serialized_timing_cache: Any) -> Any:
        # takes any buffer, b"" included (an empty cache): pyCore.cpp@v10.7.0:L246-249, L1564
        data = memoryview(serialized_timing_cache).tobytes()
        return self._trt.ITimingCache._new({k: tuple(v) for k, v in json.loads(data).items()} if data else {})

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


class Builder:
    def __init__(self, logger: Any) -> None:
        self._logger = logger

    logger = property(lambda self: self._logger)

    def create_network(self, flags: int = 0) -> Any:
        return self._trt.INetworkDefinition._new(flags)

    def create_builder_config(self) -> Any:
        return self._trt.IBuilderConfig._new()

    def create_optimization_profile(self) -> Any:
        return self._trt.IOptimizationProfile._new()

    def build_serialized_network(self, network: Any, config: Any) -> bytes | None:
        """None on failure, after logging the reason (IHostMemory* null on failure: pyCore.cpp@v10.16:1923)."""
        errors = []
        dynamic = [t for t in network._inputs if not t.is_shape_tensor and any(d < 0 for d in t.shape)]
        shape_inputs = [t for t in network._inputs if t.is_shape_tensor]
        # a profile is needed "if the network has dynamic or shape input tensors": NvInfer.h@v10.7.0:L9171
        if (dynamic or shape_inputs) and not config._profiles:
            errors.append("network has dynamic or shape inputs, but no optimization profile has been defined")
        for profile in config._profiles:
            for tensor in shape_inputs:
                # values must be set for every shape-tensor input, as many as dims[0] (1 for a scalar):
                # NvInferRuntime.h@v10.7.0:L2664-2669
                want = tensor.shape[0] if tensor.shape else 1
                got = profile._values.get(tensor.name)
                if got is None or any(len(v) != want for v in got):
                    errors.append(f"shape tensor {tensor.name}: values not set or wrong count")
            for tensor in dynamic:
                if tensor.name not in profile._shapes:
                    errors.append(f"{tensor.name}: no profile shape")
        for tensor in network._outputs:
            layer = tensor._layer
            # loop-body tensors cannot be network outputs (Polygraphy backend/trt/util.py mark_layerwise: "Layers
            # within loops cannot be marked as network outputs"); nor outputs of SHAPE/CONSTANT layers (same code)
            if layer is not None and (layer._in_loop or layer.type.name in ("SHAPE", "CONSTANT")):
                errors.append(f"{tensor.name} cannot be a network output")
        if errors:
            for message in errors:
                self._logger.log(self._trt.ILogger.Severity.ERROR, message)
            return None
        if config._int8_calibrator is not None:
            # pyInt8.cpp@v10.7.0:L58-66: get_batch(list of names); a None/empty result ends calibration; an
            # exception is logged and false returned (L68-76), and the build goes on with the batches it had
            names = [t.name for t in network._inputs]
            while trampoline(config._int8_calibrator, "get_batch", names, default=None):
                pass
        layers = []
        for index in range(len(network._layers)):
            tactic = 0
            if config._cache is not None:  # the build records its timings in the cache it was given
                tactic = config._cache._entries.setdefault(cache_key(index), (0, 0.0))[0]
            layers.append({"Name": f"layer{index}", "TacticName": f"tactic{tactic}"})
        return serialize_engine(layers, config.profiling_verbosity.name)


def serialize_engine(layers: list[dict[str, Any]], verbosity: str) -> bytes:
    """The model's serialized engine: each layer's name and kernel (``TacticName``), and the profiling verbosity."""
    return json.dumps({"layers": layers, "verbosity": verbosity}).encode()


class OnnxParser:
    """Reads the test's ONNX files into a model network: inputs (-1 for named dims), one ELEMENTWISE layer per node."""

    def __init__(self, network: Any, logger: Any) -> None:
        self._network = network

    num_errors = property(lambda self: 0)

    def parse_from_file(self, model: str) -> bool:
        import onnx

        graph = onnx.load(model).graph
        for value in graph.input:
            dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim)
            self._network._input(value.name, dims)
        for node in graph.node:
            self._network._layer(self._trt.LayerType.ELEMENTWISE, *node.output)
        named = {t.name: t for layer in self._network._layers for t in layer._outputs if t is not None}
        for value in graph.output:
            self._network.mark_output(named[value.name])
        return True


class IPluginRegistry:
    def load_library(self, plugin_path: str) -> Any:
        return object()


# module-level functions and static methods get the model module as their first argument
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "init_libnvinfer_plugins": lambda trt, logger, namespace: True,
    "get_plugin_registry": lambda trt: trt.IPluginRegistry._new(),
}


# ---- engines and inference -----------------------------------------------------------------------------------
@dataclass
class Program:
    """What a test's engine computes (the network; not TensorRT behaviour).

    ``io``: name -> (``"INPUT"``/``"OUTPUT"``, DataType member name, shape with -1 for dynamic, shape-inference IO).
    ``shape_profiles``/``value_profiles``: per profile, name -> (min, opt, max) of shapes / shape-tensor values.
    ``output_shape(context, name)``: an output's shape before enqueue, or None when it is data dependent.
    ``compute(context)``: (outputs as arrays, debug tensors as (name, array, "DEVICE"/"HOST")), or a str error.
    """

    io: dict[str, tuple[str, str, tuple[int, ...], bool]]
    shape_profiles: list[dict[str, tuple]]
    value_profiles: list[dict[str, tuple]]
    compute: Callable[[Any], Any]
    output_shape: Callable[[Any, str], Any] = lambda context, name: context._io(name)[2]
    layers: list[dict[str, Any]] = field(default_factory=list)


def engine(trt: Any, program: Program, memory: Any) -> Any:
    """An ICudaEngine of ``trt`` (a model module) that runs ``program`` on ``memory`` (see host_cuda.HostCudart)."""
    return trt.ICudaEngine._new(program, memory)


class Runtime:
    def __init__(self, logger: Any) -> None:
        self._logger = logger

    def deserialize_cuda_engine(self, serialized_engine: Any) -> Any:
        data = json.loads(memoryview(serialized_engine).tobytes())
        program = Program({}, [], [], lambda context: "the model's built engines do not execute", layers=data["layers"])
        cuda_engine = self._trt.ICudaEngine._new(program, None)
        cuda_engine._detailed = data["verbosity"] == "DETAILED"
        return cuda_engine


class EngineInspector:
    def _init(self, cuda_engine: Any) -> None:
        self._engine = cuda_engine

    def get_layer_information(self, layer_index: int, format: Any) -> str:  # noqa: A002
        layer = self._engine._program.layers[layer_index]
        # the tactic is named only for DETAILED builds (sampleEditableTimingCache.cpp@v11.0:L540-542)
        return json.dumps(layer if self._engine._detailed else layer["Name"])


class ICudaEngine:
    def _init(self, program: Program, memory: Any) -> None:
        self._program, self._memory, self._detailed = program, memory, False

    num_layers = property(lambda self: len(self._program.layers))
    num_io_tensors = property(lambda self: len(self._program.io))
    num_optimization_profiles = property(lambda self: max(1, len(self._program.shape_profiles)))

    def create_engine_inspector(self) -> Any:
        return self._trt.EngineInspector._new(self)

    def get_tensor_name(self, index: int) -> str:
        return list(self._program.io)[index]

    def get_tensor_mode(self, name: str) -> Any:
        return getattr(self._trt.TensorIOMode, self._program.io[name][0])

    def get_tensor_dtype(self, name: str) -> Any:
        return getattr(self._trt.DataType, self._program.io[name][1])

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self._program.io[name][2]

    def is_shape_inference_io(self, name: str) -> bool:
        return self._program.io[name][3]

    def get_tensor_location(self, name: str) -> Any:
        return self._trt.TensorLocation.HOST if self._program.io[name][3] else self._trt.TensorLocation.DEVICE

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[tuple[int, ...]]:
        shape = self._program.io[name][2]
        return list(self._program.shape_profiles[profile_index].get(name, (shape, shape, shape)))

    def get_tensor_profile_values(self, name: Any, profile_index: Any) -> list[list[int]]:
        # pyCore.cpp@v10.7.0:L1333 binds the lambda (ICudaEngine&, int32_t profileIndex, std::string tensorName)
        # of L193-194 under the names ("name", "profile_index"): the first positional argument is the profile
        # index (the signature manifest shows name: int, profile_index: str); pybind11 refuses other types
        # (checked by the manifest signature).
        index, tensor = name, profile_index
        # L197-198: only input shape tensors
        if not (self._program.io[tensor][3] and self._program.io[tensor][0] == "INPUT"):
            raise RuntimeError("Binding index does not correspond to an input shape tensor.")
        return [list(v) for v in self._program.value_profiles[index][tensor]]

    def create_execution_context(self) -> Any:
        return self._trt.IExecutionContext._new(self)


class IExecutionContext:
    def _init(self, cuda_engine: Any) -> None:
        self._engine, self._profile = cuda_engine, 0
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, int] = {}
        self._allocators: dict[str, Any] = {}
        self._listener: Any = None
        self._debug_all = False
        self._errors: list[str] = []

    # helpers for Programs (not TensorRT API)
    def _io(self, name: str) -> tuple:
        return self._engine._program.io[name]

    def _read(self, name: str, dtype: Any) -> np.ndarray:
        """The array of ``dtype`` at the address bound to ``name``, in its bound shape."""
        shape = self._shapes.get(name, self._io(name)[2])
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer((ctypes.c_char * size).from_address(self._addresses[name]), dtype=dtype).reshape(shape).copy()

    def _shape_values(self, name: str) -> list[int] | None:
        """The values of shape tensor ``name``, read from host memory as TensorRT does: NvInferRuntime.h@v10.7.0:L4446-4448
        (a kHOST tensor's pointer must point to a host buffer). A "device" pointer is refused here."""
        ptr = self._addresses.get(name)
        if ptr is None or self._engine._memory.is_device(ptr):
            return None
        count = int(np.prod(self._io(name)[2]))
        return [int(v) for v in np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(ptr))]

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        self._profile = profile_index
        return True

    def set_input_shape(self, name: str, shape: Any) -> bool:
        static = self._io(name)[2]
        if self._io(name)[3] or -1 not in static:
            ok = tuple(shape) == tuple(static)
        else:
            lo, _, hi = self._engine._program.shape_profiles[self._profile][name]
            ok = len(shape) == len(lo) and all(a <= s <= b for s, a, b in zip(shape, lo, hi))
        if ok:
            self._shapes[name] = tuple(shape)
        return ok

    def set_tensor_address(self, name: str, memory: int) -> bool:
        self._addresses[name] = int(memory)
        return True

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        if self._io(name)[0] == "OUTPUT":
            shape = self._engine._program.output_shape(self, name)
            return tuple(shape) if shape is not None else tuple(-1 for _ in self._io(name)[2])
        return self._shapes.get(name, self._io(name)[2])

    def set_output_allocator(self, name: str, output_allocator: Any) -> bool:
        self._allocators[name] = output_allocator
        return True

    def set_debug_listener(self, listener: Any) -> bool:
        self._listener = listener
        return True

    def set_all_tensors_debug_state(self, flag: bool) -> bool:
        self._debug_all = flag
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        memory = self._engine._memory
        memory.enqueueing = True
        try:
            return self._execute(int(stream_handle))
        finally:
            memory.enqueueing = False

    def _execute(self, stream: int) -> bool:
        program, memory = self._engine._program, self._engine._memory
        for name, (mode, _, _, shape_io) in program.io.items():
            if mode == "INPUT" and shape_io:
                values = self._shape_values(name)
                if values is None:
                    self._errors.append(f"shape tensor {name!r} is not in host memory")
                    return False
                lo, _, hi = program.value_profiles[self._profile][name]
                if not all(a <= v <= b for v, a, b in zip(values, lo, hi)):
                    self._errors.append(f"values of {name!r} {values} are outside profile {self._profile}")
                    return False
        result = program.compute(self)
        if isinstance(result, str):
            self._errors.append(result)
            return False
        outputs, debug = result
        if self._listener is not None and self._debug_all:
            for name, array, location in debug:
                array = np.ascontiguousarray(array)
                if location == "DEVICE":
                    # a device tensor that lives only during the callback (NvInferRuntime.h@v10.7.0:L3983-3984)
                    ptr = memory.alloc_device(array.nbytes)
                    ctypes.memmove(ptr, array.ctypes.data, array.nbytes)
                else:
                    ptr = array.ctypes.data
                # pyCore.cpp@v10.7.0:L716: pyFunc(reinterpret_cast<size_t>(addr), location, type, shape, name,
                # reinterpret_cast<size_t>(stream)): addr and stream are plain ints
                dtype = {np.dtype(np.float32): "FLOAT", np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32"}[array.dtype]
                trampoline(self._listener, "process_debug_tensor", ptr, getattr(self._trt.TensorLocation, location),
                           getattr(self._trt.DataType, dtype), array.shape, name, stream)
                if location == "DEVICE":
                    ctypes.memset(ptr, 0, array.nbytes)
                    memory.free_device(ptr)
        for name, array in outputs.items():
            array = np.ascontiguousarray(array)
            if name in self._allocators:
                allocator = self._allocators[name]
                # pyCore.cpp@v10.7.0:L563-565: reallocate_output_async(name, int(currentMemory), size, alignment,
                # int(stream)); an exception gives nullptr (L574-583), and enqueue fails without memory
                ptr = trampoline(allocator, "reallocate_output_async", name, 0, array.nbytes, 256, stream, default=None)
                if not ptr:
                    self._errors.append("output allocator returned nullptr")
                    return False
                trampoline(allocator, "notify_shape", name, tuple(array.shape))  # pyCore.cpp@v10.7.0:L592
            else:
                ptr = self._addresses[name]
            ctypes.memmove(int(ptr), array.ctypes.data, array.nbytes)
        return True


class _Interface:
    """Classes Python subclasses to receive callbacks: IDebugListener(), IOutputAllocator(), ... take no arguments."""

    def __init__(self) -> None:
        pass


IDebugListener = IOutputAllocator = IProgressMonitor = IInt8EntropyCalibrator2 = IInt8Calibrator = _Interface

CLASSES: dict[str, type] = {
    name: value for name, value in dict(globals()).items()
    if isinstance(value, type) and not name.startswith("_") and name not in ("Program", "Any")
}
