"""Building, deserializing and running engines in the TensorRT model (see ``trt_model/__init__.py``; NOT TensorRT).

A network the model's ONNX parser read builds into an engine that executes the ONNX graph with onnxruntime on the
host: its inputs are read from, and its outputs written to, the model module's memory seam (``trt._memory``:
``host_cuda.HostCudart`` in CI, where "device" memory is host buffers; ``cuda_memory.CudaMemory`` on a GPU, where
it is real device memory). Tests with their own arithmetic give ``engine()`` a ``Program`` instead.

Simplifications (not TensorRT): a serialized engine is ``MAGIC`` + JSON holding the ONNX graph (with the marked
outputs as graph outputs), the IO, the profiles, each layer's inspector record and the build's precision; the
``FP16`` flag rounds float32 inputs and every float32 result through float16 (onnxruntime's CPU kernels compute
float16 graphs in float32 and drop the casts, so converting the graph would change nothing); ``INT8`` fake-quantizes
the outputs with the calibrated ranges (``calibration.quantize``); output shapes before enqueue come from onnx's
shape inference with the bound input shapes and shape-tensor values (an output it cannot size is data dependent).
"""

from __future__ import annotations

import base64
import ctypes
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trt_model.behaviour import trampoline

MAGIC = b"TRT-MODEL-ENGINE\n"  # what the model's deserializer checks, as TensorRT checks its plan's magic tag

NUMPY = {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
         "BOOL": np.bool_, "UINT8": np.uint8}


def numpy_dtype(name: str) -> Any:
    if name in NUMPY:
        return np.dtype(NUMPY[name])
    import ml_dtypes

    return np.dtype({"BF16": ml_dtypes.bfloat16, "FP8": ml_dtypes.float8_e4m3fn}[name])


@dataclass
class Program:
    """What an engine computes.

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
    layers: list[Any] = field(default_factory=list)
    debug: list[str] = field(default_factory=list)  # debug tensors the engine can report


def engine(trt: Any, program: Program, memory: Any) -> Any:
    """An ICudaEngine of ``trt`` (a model module) that runs ``program`` on ``memory`` (see host_cuda.HostCudart)."""
    return trt.ICudaEngine._new(program, memory)


# ---- building ------------------------------------------------------------------------------------------------
class Builder:
    def __init__(self, logger: Any) -> None:
        self._logger = logger

    logger = property(lambda self: self._logger)
    num_DLA_cores = property(lambda self: 0)  # noqa: N815 - the model's machine has no DLA (a GPU machine's has none)

    def create_network(self, flags: int = 0) -> Any:
        return self._trt.INetworkDefinition._new(flags)

    def create_builder_config(self) -> Any:
        return self._trt.IBuilderConfig._new()

    def create_optimization_profile(self) -> Any:
        return self._trt.IOptimizationProfile._new()

    def _error(self, message: str) -> None:
        self._logger.log(self._trt.ILogger.Severity.ERROR, message)

    def build_serialized_network(self, network: Any, config: Any) -> bytes | None:
        """None on failure, after logging the reason (IHostMemory* null on failure: pyCore.cpp@v10.16:1923)."""
        errors = _network_errors(network, config)
        if errors:
            for message in errors:
                self._error(message)
            return None
        self._trt._last_build = (network, config)  # what the last build was given, for tests
        plan = _Plan(self._trt, network, config)
        ranges = None
        from trt_model import calibration

        if calibration.wants_calibration(self._trt, config) and network._onnx is not None:
            inputs = calibration.calibration_inputs(network, config)
            if isinstance(inputs, str):
                self._error(inputs)
                return None
            ranges = calibration.calibrate(self._trt, config, inputs, self._trt._memory, plan.run_all, self._error)
            if ranges is None:
                return None
        from trt_model import tactics

        verbose = self._trt.ILogger.Severity.VERBOSE
        layers = tactics.choose_tactics(self._trt, config, plan.layer_infos(), self._error,
                                        lambda message: self._logger.log(verbose, message))
        if layers is None:
            return None
        return plan.serialize(layers, ranges)


def _network_errors(network: Any, config: Any) -> list[str]:
    errors = []
    dynamic = [t for t in network._inputs if not t.is_shape_tensor and any(d < 0 for d in t.shape)]
    shape_inputs = [t for t in network._inputs if t.is_shape_tensor]
    # a profile is needed "if the network has dynamic or shape input tensors": NvInfer.h@v10.7.0:L9171
    if (dynamic or shape_inputs) and not config._profiles:
        errors.append("Network has dynamic or shape inputs, but no optimization profile has been defined.")
    for index, profile in enumerate(config._profiles):
        for tensor in shape_inputs:
            # values must be set for every shape-tensor input, as many as dims[0] (1 for a scalar):
            # NvInferRuntime.h@v10.7.0:L2664-2669
            want = tensor.shape[0] if tensor.shape else 1
            got = profile._values.get(tensor.name)
            if got is None or any(len(v) != want for v in got):
                errors.append(f"{tensor.name}: optimization profile {index} is missing values for shape input")
        for tensor in dynamic:
            shapes = profile._shapes.get(tensor.name)
            if shapes is None:
                errors.append(f"{tensor.name}: dynamic input is missing dimensions in profile {index}.")
            elif any(len(s) != len(tensor.shape) or any(d >= 0 and d != v for d, v in zip(tensor.shape, s)) for s in shapes):
                # a profile's shapes must match the input's static dims: NvInferRuntime.h@v10.7.0 setDimensions
                errors.append(f"{tensor.name}: profile {index} shapes {list(shapes)} do not match input dims {list(tensor.shape)}")
    for tensor in network._outputs:
        layer = tensor._layer
        # loop-body tensors cannot be network outputs (Polygraphy backend/trt/util.py mark_layerwise: "Layers
        # within loops cannot be marked as network outputs"); nor outputs of SHAPE/CONSTANT layers (same code)
        if layer is not None and (layer._in_loop or layer.type.name in ("SHAPE", "CONSTANT")):
            errors.append(f"{tensor.name} cannot be a network output")
    return errors


class _Plan:
    """What a build makes of a parsed network: the graph to run, its IO and profiles."""

    def __init__(self, trt: Any, network: Any, config: Any) -> None:
        self.trt, self.network, self.config = trt, network, config
        self._all_tensors: Any = None  # the session run_all uses, made for the first batch

    def layer_infos(self) -> list[Any]:
        from trt_model.tactics import LayerInfo

        def io(tensors: list[Any]) -> list[tuple[str, tuple[int, ...], str]]:
            return [(t.name, self._opt_shape(t), t.dtype.name) for t in tensors if t is not None]

        ranges = {name: shapes for name, shapes in (self.config._profiles[0]._shapes.items() if self.config._profiles else ())}
        return [LayerInfo(i, layer.name, layer.type.name, io(layer._inputs), io(layer._outputs), ranges)
                for i, layer in enumerate(self.network._layers)]

    def _opt_shape(self, tensor: Any) -> tuple[int, ...]:
        profiles = self.config._profiles
        if profiles and tensor.name in profiles[0]._shapes:
            return tuple(profiles[0]._shapes[tensor.name][1])
        return tuple(tensor.shape)

    def run_all(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every tensor's value for one batch (calibration)."""
        if self._all_tensors is None:
            import onnxruntime as ort

            model = _with_outputs(self.network._onnx, [t._onnx_name for layer in self.network._layers for t in layer._outputs
                                                       if t is not None and not layer._in_loop])
            self._all_tensors = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        session = self._all_tensors
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, {self._onnx_name(n): a for n, a in feeds.items()})))

    def _onnx_name(self, name: str) -> str:
        return next((t._onnx_name for t in self.network._inputs if t.name == name), name)

    def serialize(self, layers: list[dict[str, Any]], ranges: dict[str, float] | None) -> bytes:
        trt, network, config = self.trt, self.network, self.config
        if network._onnx is None:  # a network a test made layer by layer: an engine with nothing to run
            return serialize_engine(trt, layers, config.profiling_verbosity.name)
        debug = list(network._debug)
        if network._unfused_debug:
            debug += [t for layer in network._layers if not layer._in_loop and layer.type.name not in ("SHAPE", "CONSTANT")
                      for t in layer._outputs if t is not None and t not in debug]
        model = _with_outputs(network._onnx, [t._onnx_name for t in network._outputs + debug])
        io = {t.name: ["INPUT", t.dtype.name, list(t.shape), t.is_shape_tensor, t._onnx_name] for t in network._inputs}
        for t in network._outputs:
            io[t.name] = ["OUTPUT", t.dtype.name, list(t.shape), t.is_shape_tensor, t._onnx_name]
        data = {
            "version": trt.__version__,
            "name": network.name,
            "onnx": base64.b64encode(model.SerializeToString()).decode(),
            "io": io,
            "debug": {t.name: t._onnx_name for t in debug},
            "shape_profiles": [{k: [list(s) for s in v] for k, v in p._shapes.items()} for p in config._profiles],
            "value_profiles": [{k: [list(s) for s in v] for k, v in p._values.items()} for p in config._profiles],
            "layers": layers,
            "verbosity": config.profiling_verbosity.name,
            "fp16": hasattr(trt.BuilderFlag, "FP16") and config.get_flag(trt.BuilderFlag.FP16),  # 11.x has no FP16 flag
            "ranges": ranges,
            # bytes of weights a WEIGHT_STREAMING build can stream: the graph's initializers
            "streamable": sum(len(t.raw_data) or 4 * len(t.float_data) for t in network._onnx.graph.initializer)
            if config.get_flag(trt.BuilderFlag.WEIGHT_STREAMING) else 0,
        }
        return MAGIC + json.dumps(data).encode()


def serialize_engine(trt: Any, layers: list[dict[str, Any]], verbosity: str) -> bytes:
    """Engine bytes with these inspector ``layers`` and no graph to run (for tests of what a build recorded)."""
    data = {"version": trt.__version__, "name": "Unnamed Network 0", "onnx": "", "io": {}, "debug": {},
            "shape_profiles": [], "value_profiles": [], "layers": layers, "verbosity": verbosity, "fp16": False, "ranges": None}
    return MAGIC + json.dumps(data).encode()


def _with_outputs(model: Any, names: list[str]) -> Any:
    """``model`` with ``names`` (in order, once each) as its graph outputs, typed from shape inference."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    known = {v.name: v for v in [*model.graph.value_info, *model.graph.output, *model.graph.input]}
    del out.graph.output[:]
    for name in dict.fromkeys(names):
        value = onnx.ValueInfoProto()
        if name in known:
            value.CopyFrom(known[name])
        else:
            value.name = name
        out.graph.output.append(value)
    return out


# ---- running -------------------------------------------------------------------------------------------------
class Runtime:
    def __init__(self, logger: Any) -> None:
        self._logger = logger

    def deserialize_cuda_engine(self, serialized_engine: Any) -> Any:
        """None, after logging why, for bytes that are not an engine of this version: the binding returns the
        nullptr ``deserializeCudaEngine`` gives (pyCore.cpp@v10.7.0:L164-170), and TensorRT refuses plans
        another version built (NvInferRuntime.h@v10.7.0 IRuntime::deserializeCudaEngine: "the engine was built
        with a different TensorRT version")."""
        raw = memoryview(serialized_engine).tobytes()
        error = self._trt.ILogger.Severity.ERROR
        if not raw.startswith(MAGIC):
            self._logger.log(error, "IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization "
                                    "assertion magicTagRead == kMAGIC_TAG failed.Magic tag does not match)")
            return None
        data = json.loads(raw[len(MAGIC):])
        if data["version"] != self._trt.__version__:
            self._logger.log(error, "IRuntime::deserializeCudaEngine: Error Code 6: API Usage Error (The engine plan "
                                    f"file is not compatible with this version of TensorRT, expecting library version "
                                    f"{self._trt.__version__} got {data['version']}, please rebuild.)")
            return None
        cuda_engine = self._trt.ICudaEngine._new(_program(data), self._trt._memory)
        cuda_engine._detailed = data["verbosity"] == "DETAILED"
        cuda_engine._serialized, cuda_engine._name = raw, data["name"]
        cuda_engine._logger = self._logger
        cuda_engine._streamable = data.get("streamable", 0)
        cuda_engine._runtime = self
        return cuda_engine

    def load_runtime(self, path: str) -> Any:
        """Another runtime from a shared library (IRuntime::loadRuntime, NvInferRuntime.h@v10.7.0): the model takes any
        existing file as one; None, after logging why, for a path that is no file."""
        import os

        if not os.path.isfile(path):
            self._logger.log(self._trt.ILogger.Severity.ERROR, f"IRuntime::loadRuntime: Error Code 1: cannot load {path}")
            return None
        runtime = self._trt.Runtime(self._logger)
        runtime._loaded_from = path
        return runtime


def _program(data: dict[str, Any]) -> Program:
    import onnx

    model = onnx.load_from_string(base64.b64decode(data["onnx"])) if data["onnx"] else None
    io = {name: (mode, dtype, tuple(shape), shape_io) for name, (mode, dtype, shape, shape_io, _) in data["io"].items()}
    onnx_names = {name: spec[4] for name, spec in data["io"].items()} | data["debug"]
    if model is None:
        return Program({}, [], [], lambda context: "not modelled: running an engine of a network the model's ONNX parser did not read",
                       layers=data["layers"])
    runner = _OnnxRunner(model, data, onnx_names)
    return Program(io, [{k: tuple(tuple(s) for s in v) for k, v in p.items()} for p in data["shape_profiles"]],
                   [{k: tuple(tuple(s) for s in v) for k, v in p.items()} for p in data["value_profiles"]],
                   runner.compute, runner.output_shape, layers=data["layers"], debug=list(data["debug"]))


class _OnnxRunner:
    def __init__(self, model: Any, data: dict[str, Any], onnx_names: dict[str, str]) -> None:
        self.model, self.data, self.onnx_names = model, data, onnx_names
        self.session: Any = None
        self.shapes: dict[tuple, dict[str, Any]] = {}

    def _session(self) -> Any:
        if self.session is None:
            import onnxruntime as ort

            self.session = ort.InferenceSession(self.model.SerializeToString(), providers=["CPUExecutionProvider"])
        return self.session

    def _inputs(self, context: Any) -> dict[str, np.ndarray] | None:
        feeds = {}
        for name, (mode, dtype, _, shape_io) in context._engine._program.io.items():
            if mode != "INPUT":
                continue
            if shape_io:
                values = context._shape_values(name)
                if values is None:
                    return None
                feeds[name] = np.array(values, numpy_dtype(dtype)).reshape(context._shapes.get(name, context._io(name)[2]))
            else:
                feeds[name] = context._read(name, numpy_dtype(dtype))
        return feeds

    def compute(self, context: Any) -> Any:
        feeds = self._inputs(context)
        if feeds is None:
            return "a shape tensor's values are not in host memory"
        program = context._engine._program
        outputs = [n for n, spec in program.io.items() if spec[0] == "OUTPUT"]
        debug = [n for n in program.debug if context._debug_all or context._debug_states.get(n)]
        wanted = [*outputs, *(d for d in debug if d not in outputs)]
        if self.data["fp16"]:
            feeds = {n: _through_half(a) for n, a in feeds.items()}
        session = self._session()
        try:
            values = session.run([self.onnx_names[n] for n in wanted], {self.onnx_names[n]: a for n, a in feeds.items()})
        except Exception as exc:  # noqa: BLE001 - an enqueue that fails returns False after logging
            return f"execution failed: {exc}"
        results = dict(zip(wanted, values))
        if self.data["fp16"]:
            results = {n: _through_half(a) for n, a in results.items()}
        if self.data.get("ranges"):
            from trt_model.calibration import quantize

            ranges = {n: self.data["ranges"][self.onnx_names[n]] for n in results if self.onnx_names[n] in self.data["ranges"]}
            results.update(quantize({n: results[n] for n in ranges}, ranges))
        out = {n: np.asarray(results[n]).astype(numpy_dtype(program.io[n][1]), copy=False) for n in outputs}
        return out, [(n, np.asarray(results[n]), "DEVICE") for n in debug]

    def output_shape(self, context: Any, name: str) -> Any:
        """The output's shape from the bound input shapes and shape-tensor values, or None (data dependent)."""
        program = context._engine._program
        key, shapes, values = [], {}, {}
        for input_name, (mode, _, static, shape_io) in program.io.items():
            if mode != "INPUT":
                continue
            shapes[input_name] = tuple(context._shapes.get(input_name, static))
            if shape_io:
                values[input_name] = context._shape_values(input_name)
                if values[input_name] is None:
                    return None
            key.append((input_name, shapes[input_name], tuple(values.get(input_name) or ())))
        key = tuple(key)
        if key not in self.shapes:
            self.shapes[key] = _infer_output_shapes(self.model, {self.onnx_names[n]: s for n, s in shapes.items()},
                                                    {self.onnx_names[n]: v for n, v in values.items()})
        return self.shapes[key].get(self.onnx_names.get(name, name))


def _infer_output_shapes(model: Any, shapes: dict[str, tuple], values: dict[str, list[int]]) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper

    slim = onnx.ModelProto()
    slim.CopyFrom(model)
    graph = slim.graph
    for tensor in graph.initializer:  # dims are what inference needs; drop large payloads
        if np.prod(tensor.dims) > 64:
            tensor.ClearField("raw_data")
            for f in ("float_data", "int32_data", "int64_data", "double_data"):
                tensor.ClearField(f)
    for value in list(graph.input):
        if value.name in values:
            graph.input.remove(value)
            dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            graph.initializer.append(numpy_helper.from_array(np.array(values[value.name], dtype).reshape(shapes[value.name]), value.name))
        elif value.name in shapes:
            dims = value.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[value.name]):
                dim.Clear()
                dim.dim_value = size
    del graph.value_info[:]
    for output in graph.output:
        output.type.tensor_type.ClearField("shape")
    try:
        inferred = onnx.shape_inference.infer_shapes(slim, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - what inference cannot size is data dependent
        return {}
    out = {}
    for output in inferred.graph.output:
        t = output.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] if t.HasField("shape") else None
        out[output.name] = None if dims is None or None in dims else tuple(dims)
    return out


def _through_half(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    return array.astype(np.float16).astype(np.float32) if array.dtype == np.float32 else array


class EngineInspector:
    def _init(self, cuda_engine: Any) -> None:
        self._engine = cuda_engine

    def get_layer_information(self, layer_index: int, format: Any) -> str:  # noqa: A002
        layer = self._engine._program.layers[layer_index]
        # the tactic is named only for DETAILED builds (sampleEditableTimingCache.cpp@v11.0:L540-542)
        return json.dumps(layer if self._engine._detailed else layer["Name"])

    def get_engine_information(self, format: Any) -> str:  # noqa: A002
        # IEngineInspector::getEngineInformation: "Layers" and "Bindings" (NvInferRuntime.h@v10.7.0 IEngineInspector)
        layers = [layer if self._engine._detailed else layer["Name"] for layer in self._engine._program.layers]
        return json.dumps({"Layers": layers, "Bindings": list(self._engine._program.io)})


class ICudaEngine:
    def _init(self, program: Program, memory: Any) -> None:
        self._program, self._memory, self._detailed = program, memory, False
        self._logger: Any = None  # the runtime's, for enqueue errors
        self._serialized, self._name = None, "Unnamed Network 0"
        self._streamable = 0  # weight bytes a WEIGHT_STREAMING build can stream

    name = property(lambda self: self._name)
    num_layers = property(lambda self: len(self._program.layers))
    num_io_tensors = property(lambda self: len(self._program.io))
    num_optimization_profiles = property(lambda self: max(1, len(self._program.shape_profiles), len(self._program.value_profiles)))
    device_memory_size = property(lambda self: 0)  # the model's engines need no scratch memory
    device_memory_size_v2 = property(lambda self: 0)

    def serialize(self) -> bytes:
        if self._serialized is None:
            raise NotImplementedError("not modelled: serializing an engine a test made from a Program")
        return self._serialized

    def create_engine_inspector(self) -> Any:
        return self._trt.EngineInspector._new(self)

    def get_tensor_name(self, index: int) -> str:
        return list(self._program.io)[index]

    def get_tensor_mode(self, name: str) -> Any:
        if name not in self._program.io:
            return self._trt.TensorIOMode.NONE  # "NONE if the name is not an IO tensor": NvInferRuntime.h@v10.7.0
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
        profiles = self._program.shape_profiles
        return list(profiles[profile_index].get(name, (shape, shape, shape)) if profiles else (shape, shape, shape))

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

    streamable_weights_size = property(lambda self: self._streamable)

    def get_weight_streaming_automatic_budget(self) -> int:
        return self._streamable  # the model's GPU holds every weight

    def get_device_memory_size_for_profile_v2(self, profile_index: int) -> int:
        return 0  # the model's engines need no scratch memory

    def create_execution_context(self, *args: Any, **kwargs: Any) -> Any:
        # every context starts with profile 0: profiles are shared between contexts from TensorRT 10 on
        # (NvInferRuntime.h@v10.7.0 IExecutionContext::getOptimizationProfile; PreviewFeature.PROFILE_SHARING_0806)
        strategy = kwargs.get("strategy", args[0] if args else None)
        if "runtime_config" in kwargs or (strategy is not None and not isinstance(strategy, self._trt.ExecutionContextAllocationStrategy)):
            raise NotImplementedError("not modelled: create_execution_context with a runtime config")
        context = self._trt.IExecutionContext._new(self)
        # USER_MANAGED: "the user supplies" the activation memory with setDeviceMemory before enqueue
        # (NvInferRuntime.h@v10.7.0 ExecutionContextAllocationStrategy::kUSER_MANAGED)
        context._user_memory = strategy is not None and strategy.name == "USER_MANAGED"
        return context


class IExecutionContext:
    def _init(self, cuda_engine: Any) -> None:
        self._engine, self._profile = cuda_engine, 0
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, int] = {}
        self._allocators: dict[str, Any] = {}
        self._listener: Any = None
        self._debug_all = False
        self._debug_states: dict[str, bool] = {}
        self._unfused_debug = False
        self._errors: list[str] = []
        self._user_memory, self._device_memory = False, None

    # helpers for Programs (not TensorRT API)
    def _error(self, message: str) -> None:
        """An enqueue error: to the runtime's logger, as TensorRT does without an error recorder ("messages will be
        sent to the global log stream", NvInferRuntime.h@v10.7.0:L4283), and kept for tests."""
        self._errors.append(message)
        logger = getattr(self._engine, "_logger", None)
        if logger is not None:
            logger.log(self._trt.ILogger.Severity.ERROR, f"IExecutionContext::enqueueV3: Error Code 1: {message}")

    def _io(self, name: str) -> tuple:
        return self._engine._program.io[name]

    def _read(self, name: str, dtype: Any) -> np.ndarray:
        """The array of ``dtype`` at the address bound to ``name``, in its bound shape (through the memory seam)."""
        shape = self._shapes.get(name, self._io(name)[2])
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.frombuffer(self._engine._memory.read(self._addresses[name], size), dtype=dtype).reshape(shape).copy()

    def _shape_values(self, name: str) -> list[int] | None:
        """The values of shape tensor ``name``, read from host memory as TensorRT does: NvInferRuntime.h@v10.7.0:L4446-4448
        (a kHOST tensor's pointer must point to a host buffer). A "device" pointer is refused here."""
        ptr = self._addresses.get(name)
        if ptr is None or self._engine._memory.is_device(ptr):
            return None
        count = int(np.prod(self._shapes.get(name, self._io(name)[2])))
        ctype = ctypes.c_int32 if self._io(name)[1] == "INT32" else ctypes.c_int64
        return [int(v) for v in np.ctypeslib.as_array((ctype * count).from_address(ptr))] if count else []

    engine = property(lambda self: self._engine)  # the engine that made it (pyCore.cpp: def_property_readonly("engine"))
    active_optimization_profile = property(lambda self: self._profile)  # getOptimizationProfile

    unfused_tensors_debug_state = property(lambda self: self._unfused_debug,
                                           lambda self, v: setattr(self, "_unfused_debug", bool(v)))

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        # false for an index out of range (NvInferRuntime.h@v10.7.0:L4362), which the binding raises as
        # RuntimeError("Error in set optimization profile async.") (pyCore.cpp@v10.7.0:L333-339)
        if not 0 <= profile_index < self._engine.num_optimization_profiles:
            raise RuntimeError("Error in set optimization profile async.")
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

    def set_tensor_debug_state(self, name: str, flag: bool) -> bool:
        # false unless the engine has ``name`` as a debug tensor (NvInferRuntime.h@v10.7.0 setTensorDebugState)
        if name not in self._engine._program.debug:
            return False
        self._debug_states[name] = flag
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        memory = self._engine._memory
        memory.enqueueing = True
        try:
            return self._execute(int(stream_handle))
        finally:
            memory.enqueueing = False

    def set_device_memory(self, memory: int, size: int) -> None:
        self._device_memory = (int(memory), int(size))

    def update_device_memory_size_for_shapes(self) -> int:
        return 0  # the model's engines need no scratch memory

    def _execute(self, stream: int) -> bool:
        if self._user_memory and self._device_memory is None:
            self._error("a USER_MANAGED context was given no device memory (setDeviceMemory)")
            return False
        program, memory = self._engine._program, self._engine._memory
        for name, (mode, _, _, shape_io) in program.io.items():
            if mode == "INPUT" and shape_io:
                values = self._shape_values(name)
                if values is None:
                    self._error(f"shape tensor {name!r} is not in host memory")
                    return False
                lo, _, hi = program.value_profiles[self._profile][name]
                if not all(a <= v <= b for v, a, b in zip(values, lo, hi)):
                    self._error(f"values of {name!r} {values} are outside profile {self._profile}")
                    return False
            elif name not in self._addresses and name not in self._allocators:
                # every IO tensor needs an address (or, for an output, an allocator): NvInferRuntime.h@v10.7.0 enqueueV3
                self._error(f"no address set for {name!r}")
                return False
        result = program.compute(self)
        if isinstance(result, str):
            self._error(result)
            return False
        outputs, debug = result
        if self._listener is not None:
            for name, array, location in debug:
                if not (self._debug_all or self._debug_states.get(name)):
                    continue
                array = np.require(array, requirements="C")  # keeps 0-d arrays 0-d
                if location == "DEVICE":
                    # a device tensor that lives only during the callback (NvInferRuntime.h@v10.7.0:L3983-3984)
                    ptr = memory.alloc_device(max(array.nbytes, 1))
                    memory.write(ptr, array.tobytes())
                else:
                    ptr = array.ctypes.data
                # pyCore.cpp@v10.7.0:L716: pyFunc(reinterpret_cast<size_t>(addr), location, type, shape, name,
                # reinterpret_cast<size_t>(stream)): addr and stream are plain ints
                dtype = {np.dtype(np.float32): "FLOAT", np.dtype(np.float16): "HALF", np.dtype(np.int64): "INT64",
                         np.dtype(np.int32): "INT32", np.dtype(np.bool_): "BOOL", np.dtype(np.int8): "INT8",
                         np.dtype(np.uint8): "UINT8"}[array.dtype]
                trampoline(self._listener, "process_debug_tensor", ptr, getattr(self._trt.TensorLocation, location),
                           getattr(self._trt.DataType, dtype), array.shape, name, stream)
                if location == "DEVICE":
                    memory.write(ptr, bytes(array.nbytes))
                    memory.free_device(ptr)
        for name, array in outputs.items():
            array = np.require(array, requirements="C")
            if name in self._allocators:
                allocator = self._allocators[name]
                # pyCore.cpp@v10.7.0:L563-565: reallocate_output_async(name, int(currentMemory), size, alignment,
                # int(stream)); an exception gives nullptr (L574-583), and enqueue fails without memory
                ptr = trampoline(allocator, "reallocate_output_async", name, 0, array.nbytes, 256, stream, default=None)
                if not ptr:
                    self._error("output allocator returned nullptr")
                    return False
                trampoline(allocator, "notify_shape", name, tuple(array.shape))  # pyCore.cpp@v10.7.0:L592
            else:
                ptr = self._addresses[name]
            if program.io[name][3]:  # shape-tensor outputs are written to host memory
                ctypes.memmove(int(ptr), array.ctypes.data, array.nbytes)
            else:
                memory.write(int(ptr), array.tobytes())
        return True
