"""Networks, optimisation profiles and the ONNX parser of the TensorRT model (see ``trt_model/__init__.py``; NOT
TensorRT). The parser keeps the ONNX graph it read (``network._onnx``), so the model's builder can make engines that
execute it with onnxruntime (``trt_model/engine.py``).

Layers a script adds through the network API (``add_input``, ``add_constant``, ``add_elementwise``, ``add_identity``)
become ONNX nodes of that same graph (a network built through the API alone gets a new one), so their engines run too.

Simplifications (not TensorRT): one layer per ONNX node, named after the node (the ONNX parser names layers after
nodes); tensor shapes and dtypes come from onnx's shape inference; a ``Loop`` node becomes a ``TRIP_LIMIT`` layer,
its body's nodes as layers inside the loop, and a ``LOOP_OUTPUT`` layer producing the node's outputs. An operator
outside ``OP_LAYERS`` fails to parse, with onnx-tensorrt's message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# ONNX element type -> DataType member (pyFoundationalTypes.cpp@v10.16:L179-191 lists the members)
ONNX_DTYPES = {1: "FLOAT", 10: "HALF", 3: "INT8", 6: "INT32", 7: "INT64", 2: "UINT8", 9: "BOOL", 16: "BF16",
               17: "FP8", 22: "INT4", 23: "FP4"}

# ONNX operator -> the LayerType of the layer the parser adds for it (names from NvInfer.h@v10.7.0 LayerType)
OP_LAYERS = {
    **dict.fromkeys(("Conv",), "CONVOLUTION"), **dict.fromkeys(("ConvTranspose",), "DECONVOLUTION"),
    **dict.fromkeys(("Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "Softplus", "HardSigmoid", "Clip",
                     "ThresholdedRelu", "Softsign", "HardSwish", "Gelu"), "ACTIVATION"),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Greater", "Less", "And", "Or",
                     "Xor", "Mod", "GreaterOrEqual", "LessOrEqual", "Sum", "Mean"), "ELEMENTWISE"),
    **dict.fromkeys(("Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Neg", "Sin", "Cos", "Tan", "Sinh", "Cosh", "Asin",
                     "Acos", "Atan", "Asinh", "Acosh", "Atanh", "Ceil", "Floor", "Erf", "Not", "Sign", "Round",
                     "IsInf", "IsNaN"), "UNARY"),
    **dict.fromkeys(("MatMul", "Gemm"), "MATRIX_MULTIPLY"),
    **dict.fromkeys(("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "SpaceToDepth", "DepthToSpace"), "SHUFFLE"),
    **dict.fromkeys(("Concat",), "CONCATENATION"),
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"), "POOLING"),
    **dict.fromkeys(("Softmax", "LogSoftmax"), "SOFTMAX"),
    **dict.fromkeys(("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1",
                     "ArgMax", "ArgMin"), "REDUCE"),
    **dict.fromkeys(("Gather", "GatherElements", "GatherND"), "GATHER"),
    **dict.fromkeys(("Slice", "Split"), "SLICE"),
    **dict.fromkeys(("Pad",), "PADDING"), **dict.fromkeys(("Resize", "Upsample"), "RESIZE"),
    **dict.fromkeys(("BatchNormalization",), "SCALE"),
    **dict.fromkeys(("InstanceNormalization", "LayerNormalization", "GroupNormalization"), "NORMALIZATION"),
    **dict.fromkeys(("Cast",), "CAST"), **dict.fromkeys(("Identity", "Dropout"), "IDENTITY"),
    **dict.fromkeys(("Shape", "Size"), "SHAPE"), **dict.fromkeys(("Constant",), "CONSTANT"),
    **dict.fromkeys(("ConstantOfShape", "Range", "RandomUniformLike"), "FILL"),
    **dict.fromkeys(("Expand", "Tile"), "SLICE"), **dict.fromkeys(("Where",), "SELECT"),
    **dict.fromkeys(("NonZero",), "NON_ZERO"), **dict.fromkeys(("TopK",), "TOPK"),
    **dict.fromkeys(("ScatterND", "ScatterElements"), "SCATTER"), **dict.fromkeys(("PRelu",), "PARAMETRIC_RELU"),
    **dict.fromkeys(("QuantizeLinear",), "QUANTIZE"), **dict.fromkeys(("DequantizeLinear",), "DEQUANTIZE"),
    **dict.fromkeys(("Einsum",), "EINSUM"), **dict.fromkeys(("OneHot",), "ONE_HOT"),
    **dict.fromkeys(("If",), "CONDITIONAL_OUTPUT"),
}
# operands the ONNX parser needs as shape tensors: a network INPUT feeding one becomes a shape tensor
# (ITensor.is_shape_tensor, NvInfer.h@v10.7.0:L466-480: "a tensor used as a shape input of a layer")
SHAPE_OPERANDS = {"Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Tile": (1,), "Range": (0, 1, 2),
                  "Slice": (1, 2, 3, 4), "Resize": (3,), "Unsqueeze": (1,), "Squeeze": (1,)}


def dtype_of(trt: Any, elem_type: int) -> Any:
    return getattr(trt.DataType, ONNX_DTYPES.get(elem_type, "FLOAT"))


def onnx_type(dtype: Any) -> int:
    """The ONNX element type of a DataType member."""
    for code, name in ONNX_DTYPES.items():
        if name == dtype.name:
            return code
    raise NotImplementedError(f"not modelled: a {dtype.name} tensor in a network built through the network API")


# numpy dtype -> DataType member of Weights made from an array: utils::type (python/src/utils.cpp@v10.7.0) maps
# f4, f2, i1, i4, i8, b1, u1 and throws "Unsupported data type" for any other (float64 included)
_WEIGHT_TYPES = {"float32": "FLOAT", "float16": "HALF", "int8": "INT8", "int32": "INT32", "int64": "INT64", "bool": "BOOL",
                 "uint8": "UINT8"}


def weights_type(dtype: Any) -> str | None:
    """The DataType member name TensorRT gives Weights of this numpy dtype, or None where it has none."""
    import numpy as np

    return _WEIGHT_TYPES.get(np.dtype(dtype).name)


class Weights:
    """``Weights(type=FLOAT)`` (empty), ``Weights(type, ptr, count)``, ``Weights(a: numpy.ndarray)``
    (pyFoundationalTypes.cpp@v10.7.0: weights_datatype_constructor, weights_pointer_constructor, weights_numpy_constructor).
    From an array TensorRT keeps a pointer to its data, not a copy: the array must outlive the build."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        import numpy as np

        first = kwargs.get("a", kwargs.get("type", args[0] if args else None))
        if isinstance(first, np.ndarray):
            if not first.flags.c_contiguous:  # weights_numpy_constructor: PY_ASSERT_VALUE_ERROR on c_style
                raise ValueError("Could not convert non-contiguous NumPy array to Weights. "
                                 "Please use numpy.ascontiguousarray() to fix this.")
            kind = weights_type(first.dtype)
            if kind is None:  # utils::type: std::invalid_argument, which pybind11 raises as ValueError
                raise ValueError("Unsupported data type")
            self._array, self._type = first, getattr(self._trt.DataType, kind)
            return
        if len(args) + len(kwargs) > 1:
            raise NotImplementedError("not modelled: Weights(type, ptr, count)")
        self._type = first if first is not None else self._trt.DataType.FLOAT
        self._array = np.zeros((0,), np.float32)

    dtype = property(lambda self: self._type)
    size = property(lambda self: int(self._array.size))
    nbytes = property(lambda self: int(self._array.nbytes))

    def numpy(self) -> Any:
        return self._array

    def __len__(self) -> int:
        return int(self._array.size)


# ElementWiseOperation member -> the ONNX operator the model runs it as (NvInfer.h@v10.7.0 ElementWiseOperation);
# the logical operations (kAND, kOR, kXOR) and comparisons (kEQUAL, kGREATER, kLESS) give BOOL; FLOOR_DIV is not
# modelled
ELEMENTWISE_OPS = {"SUM": "Add", "PROD": "Mul", "MAX": "Max", "MIN": "Min", "SUB": "Sub", "DIV": "Div", "POW": "Pow",
                   "AND": "And", "OR": "Or", "XOR": "Xor", "EQUAL": "Equal", "GREATER": "Greater", "LESS": "Less"}
BOOL_RESULTS = {"AND", "OR", "XOR", "EQUAL", "GREATER", "LESS"}
# how a layer TensorRT names itself when nobody names it: "(Unnamed Layer* <index>) [<kind>]", its output that
# plus "_output" (the names TensorRT's logs and Polygraphy's inspect show)
LAYER_KINDS = {"IDENTITY": "Identity", "CONSTANT": "Constant", "ELEMENTWISE": "ElementWise"}
OPSET, IR_VERSION = 17, 10  # of the graph a network built through the API alone runs as (parity.testing's)


class ITensor:
    def _init(self, network: Any, name: str, shape: tuple[int, ...], is_shape_tensor: bool = False, dtype: Any = None) -> None:
        self._network, self._name, self._shape, self._layer = network, name, tuple(shape), None
        self._onnx_name = name  # renaming a tensor (ITensor.name is read-write) keeps what it computes
        self._dtype = dtype if dtype is not None else self._trt.DataType.FLOAT
        self._is_shape_tensor = is_shape_tensor

    name = property(lambda self: self._name, lambda self, v: setattr(self, "_name", v))
    shape = property(lambda self: self._shape, lambda self, v: setattr(self, "_shape", tuple(v)))
    dtype = property(lambda self: self._dtype, lambda self, v: setattr(self, "_dtype", v))
    is_shape_tensor = property(lambda self: self._is_shape_tensor)  # read-only: pyGraph.cpp@v10.7.0:L344
    is_execution_tensor = property(lambda self: not self._is_shape_tensor)
    is_network_input = property(lambda self: self in self._network._inputs)
    is_network_output = property(lambda self: self in self._network._outputs)


class ILayer:
    def _init(self, kind: Any, outputs: list[Any], in_loop: bool = False, name: str = "", inputs: list[Any] | None = None) -> None:
        self._type, self._outputs, self._inputs, self._name = kind, outputs, list(inputs or []), name
        self._in_loop = in_loop  # TensorRT keeps loop membership to itself
        for tensor in outputs:
            if tensor is not None:
                tensor._layer = self

    type = property(lambda self: self._type)  # ILayer.type, read-only: pyGraph.cpp@v10.7.0:L359
    name = property(lambda self: self._name, lambda self, v: setattr(self, "_name", v))
    num_outputs = property(lambda self: len(self._outputs))
    num_inputs = property(lambda self: len(self._inputs))

    def get_output(self, index: int) -> Any:
        # "The indexed output tensor, or nullptr if the index is out of range or the tensor is optional":
        # ILayer::getOutput, NvInfer.h@v10.7.0:L619-623; pybind11 turns nullptr into None (pyGraph.cpp@v10.7.0:L366)
        return self._outputs[index] if 0 <= index < len(self._outputs) else None

    def get_input(self, index: int) -> Any:
        return self._inputs[index] if 0 <= index < len(self._inputs) else None


class INetworkDefinition:
    def _init(self, flags: int = 0) -> None:
        self._flags, self._inputs, self._layers, self._outputs = flags, [], [], []
        self._debug: list[Any] = []  # tensors marked with mark_debug, in order
        self._unfused_debug = False
        self._onnx: Any = None  # the ModelProto the parser read (shape-inferred), for the model's builder
        self._name = "Unnamed Network 0"

    # model helpers (not TensorRT API): build a network layer by layer
    def _input(self, name: str, shape: tuple[int, ...], is_shape_tensor: bool = False, dtype: Any = None) -> Any:
        tensor = self._trt.ITensor._new(self, name, shape, is_shape_tensor, dtype)
        self._inputs.append(tensor)
        return tensor

    def _layer(self, kind: Any, *names: str | None, in_loop: bool = False, shape_output: bool = False,
               name: str = "", shapes: dict[str, tuple] | None = None, dtypes: dict[str, Any] | None = None,
               inputs: list[Any] | None = None, cls: str = "ILayer") -> Any:
        default = (2, 3) if shapes is None else ()  # tests' hand-made layers; a parsed tensor inference left unknown
        shapes, dtypes = shapes or {}, dtypes or {}
        outs = [None if n is None else self._trt.ITensor._new(self, n, shapes.get(n, default), shape_output, dtypes.get(n))
                for n in names]
        layer = getattr(self._trt, cls)._new(kind, outs, in_loop, name or f"layer{len(self._layers)}", inputs)
        self._layers.append(layer)
        return layer

    def _graph(self) -> Any:
        """The ONNX graph the model's engines run: the parser's, or for a network built through the API alone a new one."""
        if self._onnx is None:
            from onnx import helper

            self._onnx = helper.make_model(helper.make_graph([], "network", [], []), opset_imports=[helper.make_opsetid("", OPSET)])
            self._onnx.ir_version = IR_VERSION
        return self._onnx.graph

    def _api_layer(self, kind: str, cls: str, shape: tuple[int, ...], dtype: Any, inputs: list[Any]) -> Any:
        """A layer the network API adds, named as TensorRT names an unnamed one, with one output."""
        from onnx import helper

        name = f"(Unnamed Layer* {len(self._layers)}) [{LAYER_KINDS[kind]}]"
        layer = self._layer(getattr(self._trt.LayerType, kind), f"{name}_output", name=name, shapes={f"{name}_output": shape},
                            dtypes={f"{name}_output": dtype}, inputs=inputs, cls=cls)
        out = layer.get_output(0)
        self._graph().value_info.append(helper.make_tensor_value_info(out._onnx_name, onnx_type(dtype), _onnx_dims(shape)))
        return layer

    def _owns(self, *tensors: Any) -> None:
        for tensor in tensors:
            if getattr(tensor, "_network", None) is not self:
                raise NotImplementedError("not modelled: a layer input from another network")

    # ---- the network API ----------------------------------------------------------------------------------------
    def add_input(self, name: str, dtype: Any, shape: Any) -> Any:
        # INetworkDefinition::addInput (NvInfer.h@v10.7.0): a new network input of that name, type and shape (-1: dynamic)
        from onnx import helper

        if any(t.name == name for t in self._inputs):
            raise NotImplementedError(f"not modelled: a second network input named {name!r}")
        shape = tuple(int(d) for d in shape)
        tensor = self._input(name, shape, dtype=dtype)
        self._graph().input.append(helper.make_tensor_value_info(name, onnx_type(dtype), _onnx_dims(shape)))
        return tensor

    def add_constant(self, shape: Any, weights: Any) -> Any:
        # INetworkDefinition::addConstant: an output of ``shape`` holding the weights (their count must be its volume);
        # a numpy array arrives as Weights (py::implicitly_convertible, behaviour.IMPLICIT)
        import numpy as np
        from onnx import numpy_helper

        weights = weights if isinstance(weights, self._trt.Weights) else self._trt.Weights(weights)
        shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape) or len(weights) != int(np.prod(shape)):
            raise NotImplementedError(f"not modelled: add_constant of {len(weights)} weights with shape {list(shape)}")
        layer = self._api_layer("CONSTANT", "IConstantLayer", shape, weights.dtype, [])
        # simplification: the values are read here, where TensorRT reads the array when it builds
        array = np.asarray(weights.numpy()).reshape(shape)
        self._graph().initializer.append(numpy_helper.from_array(array, layer.get_output(0)._onnx_name))
        return layer

    def add_elementwise(self, input1: Any, input2: Any, op: Any) -> Any:
        # INetworkDefinition::addElementWise: inputs of one rank, each dim equal or 1 in one of them (broadcast)
        from onnx import helper

        self._owns(input1, input2)
        if op.name not in ELEMENTWISE_OPS:
            raise NotImplementedError(f"not modelled: ElementWiseOperation.{op.name}")
        a, b = input1.shape, input2.shape
        if len(a) != len(b) or any(x != y and 1 not in (x, y) and -1 not in (x, y) for x, y in zip(a, b)) or input1.dtype != input2.dtype:
            raise NotImplementedError(f"not modelled: add_elementwise of {list(a)} {input1.dtype.name} and {list(b)} {input2.dtype.name}")
        shape = tuple(_broadcast(x, y) for x, y in zip(a, b))
        dtype = self._trt.DataType.BOOL if op.name in BOOL_RESULTS else input1.dtype
        layer = self._api_layer("ELEMENTWISE", "IElementWiseLayer", shape, dtype, [input1, input2])
        self._graph().node.append(helper.make_node(ELEMENTWISE_OPS[op.name], [input1._onnx_name, input2._onnx_name],
                                                   [layer.get_output(0)._onnx_name], name=layer.name))
        return layer

    def add_identity(self, input: Any) -> Any:  # noqa: A002 - TensorRT's keyword name
        # INetworkDefinition::addIdentity: one output of the input's shape and type holding its values
        from onnx import helper

        self._owns(input)
        layer = self._api_layer("IDENTITY", "IIdentityLayer", tuple(input.shape), input.dtype, [input])
        self._graph().node.append(helper.make_node("Identity", [input._onnx_name], [layer.get_output(0)._onnx_name],
                                                   name=layer.name))
        return layer

    flags = property(lambda self: self._flags)
    name = property(lambda self: self._name, lambda self, v: setattr(self, "_name", v))
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
        # markDebug returns "True if tensor successfully marked (or was already marked)": NvInfer.h@v10.7.0:L7120
        if tensor not in self._debug:
            self._debug.append(tensor)
        return True

    def is_debug_tensor(self, tensor: Any) -> bool:
        return tensor in self._debug

    def mark_unfused_tensors_as_debug_tensors(self) -> bool:
        # every tensor TensorRT does not fuse away becomes a debug tensor (NvInfer.h@v10.16 markUnfusedTensorsAsDebugTensors);
        # the model fuses nothing, so that is every layer output outside loops
        self._unfused_debug = True
        return True


class IOptimizationProfile:
    def _init(self) -> None:
        self._shapes: dict[str, tuple] = {}
        self._values: dict[str, tuple] = {}

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002 - TensorRT's keyword names
        # pyCore.cpp@v10.7.0:L37-44 (opt_profile_set_shape): each of min/opt/max must agree with the others
        # (same rank, min <= opt <= max), else RuntimeError with this text
        shapes = (tuple(min), tuple(opt), tuple(max))
        for which, shape in zip(("min", "opt", "max"), shapes):
            if len(shape) != len(shapes[0]) or (which != "min" and any(a > b for a, b in zip(shapes[0], shape))) or \
                    (which == "max" and any(a > b for a, b in zip(shapes[1], shape))):
                raise RuntimeError(f"Shape provided for {which} is inconsistent with other shapes.")
        self._shapes[input] = shapes

    def get_shape(self, input: str) -> list[tuple[int, ...]]:  # noqa: A002
        # [] when no shapes were set for the input: pyCore.cpp@v10.7.0:L46-57 (opt_profile_get_shape)
        return list(self._shapes.get(input, ()))

    def set_shape_input(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002
        # VALUES of a shape-tensor input: pyCore.cpp@v10.7.0:L59-68 (std::vector<int32_t> each; int64 from 10.16)
        for which in (min, opt, max):
            if any(not isinstance(v, int) for v in which):
                raise TypeError("set_shape_input takes lists of ints")
        if not len(min) == len(opt) == len(max):
            raise RuntimeError("min input provided for shape tensor is inconsistent with other inputs.")
        self._values[input] = (tuple(min), tuple(opt), tuple(max))


class ParserError:
    """One ONNX parser error (pyOnnx.cpp@v10.7.0: ParserError with code(), desc(), node(), node_name(), ...)."""

    def _init(self, node: int, node_name: str, operator: str, desc: str) -> None:
        self._node, self._node_name, self._operator, self._desc = node, node_name, operator, desc

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node

    def node_name(self) -> str:
        return self._node_name

    def node_operator(self) -> str:
        return self._operator

    def __str__(self) -> str:
        return f"In node {self._node} with name: {self._node_name} and operator: {self._operator} {self._desc}"


class OnnxParser:
    """Reads an ONNX model into the network: inputs, one layer per node (see the module docstring), outputs."""

    def __init__(self, network: Any, logger: Any) -> None:
        self._network, self._logger, self._errors = network, logger, []
        # NATIVE_INSTANCENORM is ON by default (NvOnnxParser.h@v11.0 OnnxParserFlag); flags are a mask of 1 << flag
        self._flags = 1 << int(self._trt.OnnxParserFlag.NATIVE_INSTANCENORM)
        network._parser = self  # the network keeps the parser that filled it, for tests

    num_errors = property(lambda self: len(self._errors))
    flags = property(lambda self: self._flags, lambda self, value: setattr(self, "_flags", int(value)))  # pyOnnx.cpp:L193

    def set_flag(self, flag: Any) -> None:
        self._flags |= 1 << int(flag)

    def clear_flag(self, flag: Any) -> None:
        self._flags &= ~(1 << int(flag))

    def get_flag(self, flag: Any) -> bool:
        return bool(self._flags & (1 << int(flag)))

    def get_error(self, index: int) -> Any:
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors.clear()

    def parse_from_file(self, model: str) -> bool:
        import onnx

        try:
            proto = onnx.load(model)  # external data is found next to the file
        except Exception as exc:  # noqa: BLE001 - the parser reports, it does not raise
            self._errors.append(self._trt.ParserError._new(-1, "", "", f"Failed to parse ONNX model from file: {model}: {exc}"))
            return False
        return self._read(proto)

    def parse(self, model: Any, path: str | None = None) -> bool:
        import onnx

        try:
            proto = onnx.load_from_string(memoryview(model).tobytes())
            if path:
                from onnx.external_data_helper import load_external_data_for_model

                load_external_data_for_model(proto, str(Path(path).parent))
        except Exception as exc:  # noqa: BLE001
            self._errors.append(self._trt.ParserError._new(-1, "", "", f"Failed to parse ONNX model: {exc}"))
            return False
        return self._read(proto)

    def _read(self, proto: Any) -> bool:
        import onnx

        nodes = list(proto.graph.node)
        for index, node in enumerate(nodes):
            if node.domain not in ("", "ai.onnx") or (node.op_type not in OP_LAYERS and node.op_type != "Loop"):
                # onnx-tensorrt ModelImporter: "No importer registered for op: <op>" (an unsupported operator)
                self._errors.append(self._trt.ParserError._new(index, node.name, node.op_type,
                                                               f"No importer registered for op: {node.op_type}"))
        if self._errors:
            return False
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
        values = {v.name: v for v in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]}
        shape_of = {name: _dims(v) for name, v in values.items() if v.type.tensor_type.HasField("shape")}
        produced = [o for node in nodes for o in node.output if o]
        shape_of.update(_ranks(inferred, [o for o in produced if o not in shape_of]))
        dtype_of_name = {name: dtype_of(self._trt, v.type.tensor_type.elem_type) for name, v in values.items()}
        initializers = {t.name for t in proto.graph.initializer}
        shape_uses = {node.input[i] for node in nodes for i in SHAPE_OPERANDS.get(node.op_type, ()) if i < len(node.input)}
        network = self._network
        for value in proto.graph.input:
            if value.name in initializers:
                continue
            network._input(value.name, shape_of[value.name], value.name in shape_uses, dtype_of_name[value.name])
        tensors = {t.name: t for t in network._inputs}
        for index, node in enumerate(nodes):
            self._add(node, index, tensors, shape_of, dtype_of_name)
        for value in proto.graph.output:
            network.mark_output(tensors[value.name])
        network._onnx = inferred
        return True

    def _add(self, node: Any, index: int, tensors: dict, shape_of: dict, dtype_of_name: dict, in_loop: bool = False) -> None:
        trt, network = self._trt, self._network
        name = node.name or f"node_of_{node.output[0]}"  # onnx-tensorrt names a nameless node's layer after its output
        inputs = [tensors.get(i) for i in node.input if i]
        if node.op_type == "Loop":
            network._layer(trt.LayerType.TRIP_LIMIT, name=f"{name}_trip_limit", inputs=inputs[:1])
            body = next(a.g for a in node.attribute if a.name == "body")
            for inner in body.node:
                self._add(inner, index, tensors, shape_of, dtype_of_name, in_loop=True)
            layer = network._layer(trt.LayerType.LOOP_OUTPUT, *node.output, name=f"{name}_loop_output",
                                   shapes=shape_of, dtypes=dtype_of_name, in_loop=in_loop)
        else:
            kind = getattr(trt.LayerType, OP_LAYERS[node.op_type])
            outputs = [o or None for o in node.output]
            layer = network._layer(kind, *outputs, name=name, in_loop=in_loop, shape_output=node.op_type in ("Shape", "Size"),
                                   shapes=shape_of, dtypes=dtype_of_name, inputs=inputs)
        for tensor in layer._outputs:
            if tensor is not None:
                tensors[tensor.name] = tensor


def _ranks(model: Any, names: list[str]) -> dict[str, tuple[int, ...]]:
    """Shapes onnx's inference left unknown (a Loop's outputs, say): TensorRT always knows a tensor's rank, so the
    model learns it from one onnxruntime run on zeros (dynamic dims 1) and makes every dim dynamic (-1), which the
    model's engines then size at enqueue like data-dependent outputs (a simplification). (-1,) when that run fails."""
    if not names:
        return {}
    import numpy as np
    import onnxruntime as ort
    from onnx import helper

    try:
        probe = type(model)()
        probe.CopyFrom(model)
        del probe.graph.output[:]
        probe.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
        session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        initializers = {t.name for t in model.graph.initializer}
        feeds = {}
        for value in model.graph.input:
            if value.name in initializers:
                continue
            dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            feeds[value.name] = np.zeros([max(d, 1) for d in _dims(value)], dtype)
        return {n: tuple(-1 for _ in np.shape(a)) for n, a in zip(names, session.run(names, feeds))}
    except Exception:  # noqa: BLE001 - a probe that cannot run leaves the rank unknown
        return dict.fromkeys(names, (-1,))


def _broadcast(x: int, y: int) -> int:
    """One output dim of an elementwise layer: the larger, a 1 broadcast; a dynamic (-1) dim stays dynamic unless
    the other is fixed above 1."""
    if -1 in (x, y):
        other = y if x == -1 else x
        return other if other > 1 else -1
    return max(x, y)


def _onnx_dims(shape: tuple[int, ...]) -> list[Any]:
    return [d if d >= 0 else None for d in shape]


def _dims(value: Any) -> tuple[int, ...]:
    dims = value.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
