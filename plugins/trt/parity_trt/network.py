"""Network loaders: ONNX (path or bytes) through TensorRT's ONNX parser, empty networks, user scripts, and
output/debug-tensor marking. Each loader returns ``(builder, network, parser)`` (``parser`` may be ``None``)
except :class:`CreateNetwork`, which returns ``(builder, network)`` like Polygraphy's."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from parity.api import BaseLoader, ModelError, UsageError, did_you_mean, invoke_if_callable
from parity_trt import versions
from parity_trt._trt import get_logger, import_trt
from parity_trt.options import MARK_ALL, log_severity


def _network_flags(trt: Any, strongly_typed: bool) -> int:
    # TensorRT 10+ networks are always explicit-batch, so 0 is the default; 11 ignores STRONGLY_TYPED.
    flags = 0
    if strongly_typed:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    return flags


def apply_log_level() -> None:
    """Set the process's TensorRT logger to ``PARITY_TRT_LOG`` (verbose, info, warning, error, internal_error).

    Unset leaves the logger as it is. One logger serves every builder and runtime, so this reaches them all.
    """
    severity = log_severity()
    if severity is not None:
        trt = import_trt()
        logger = get_logger()
        logger.min_severity = getattr(trt.Logger, severity)


def load_plugin_libraries(paths: Sequence[str]) -> None:
    """Load TensorRT plugin libraries (``--plugins``) and the built-in plugins."""
    trt = import_trt()
    trt.init_libnvinfer_plugins(get_logger(), "")
    registry = trt.get_plugin_registry()
    for path in paths:
        if not Path(path).is_file():
            raise UsageError(f"--plugins: no such file '{path}'")
        if registry.load_library(str(path)) is None:
            raise ModelError(f"--plugins: TensorRT could not load plugin library '{path}'")


class CreateNetwork(BaseLoader):
    """An empty network to fill through the TensorRT network API; returns ``(builder, network)``."""

    def __init__(self, strongly_typed: bool = False) -> None:
        self.strongly_typed = strongly_typed

    def __call__(self) -> tuple[Any, Any]:
        trt = import_trt()
        apply_log_level()
        builder = trt.Builder(get_logger())
        network = builder.create_network(flags=_network_flags(trt, self.strongly_typed))
        return builder, network


def parser_errors(parser: Any) -> str:
    """Every parser error as ``node N (Op 'name'): message``, joined on one line."""
    lines = []
    for index in range(parser.num_errors):
        error = parser.get_error(index)
        where = f"node {error.node()}" if error.node() >= 0 else "model"
        if error.node_name() or error.node_operator():
            where += f" ({error.node_operator()} '{error.node_name()}')"
        lines.append(f"{where}: {error.desc()}")
    return "; ".join(lines) or "no details reported"


def set_parser_flags(trt: Any, parser: Any, flags: Sequence[str] | None, plugin_instancenorm: bool = False) -> None:
    """``--onnx-flags``: the parser's flags become exactly these (``parser.flags`` = a mask of ``1 << OnnxParserFlag``,
    as Polygraphy's NetworkFromOnnxPath sets it); ``--plugin-instancenorm`` clears NATIVE_INSTANCENORM, which
    TensorRT 10+ sets by default (NvOnnxParser.h, OnnxParserFlag)."""
    if flags:
        mask = 0
        for name in flags:
            mask |= 1 << int(versions.enum_member(trt, "OnnxParserFlag", name, "--onnx-flags"))
        parser.flags = mask
    if plugin_instancenorm:
        parser.clear_flag(trt.OnnxParserFlag.NATIVE_INSTANCENORM)


class _OnnxNetwork(BaseLoader):
    def __init__(self, strongly_typed: bool = False, plugins: Sequence[str] = (), flags: Sequence[str] | None = None,
                 plugin_instancenorm: bool = False) -> None:
        self.strongly_typed = strongly_typed
        self.plugins = tuple(plugins)
        self.flags = None if flags is None else list(flags)
        self.plugin_instancenorm = plugin_instancenorm

    def _parse(self, parse: Callable[[Any], bool], label: str) -> tuple[Any, Any, Any]:
        trt = import_trt()
        load_plugin_libraries(self.plugins)
        builder, network = CreateNetwork(self.strongly_typed)()
        parser = trt.OnnxParser(network, get_logger())
        set_parser_flags(trt, parser, self.flags, self.plugin_instancenorm)
        if not parse(parser):
            raise ModelError(f"TensorRT's ONNX parser failed on {label}: {parser_errors(parser)}")
        return builder, network, parser


class NetworkFromOnnxPath(_OnnxNetwork):
    """Parse an ONNX file (external data next to it is found by the parser)."""

    def __init__(self, path: str, strongly_typed: bool = False, plugins: Sequence[str] = (), flags: Sequence[str] | None = None,
                 plugin_instancenorm: bool = False) -> None:
        super().__init__(strongly_typed, plugins, flags, plugin_instancenorm)
        self.path = str(path)

    def __call__(self) -> tuple[Any, Any, Any]:
        if not Path(self.path).is_file():
            raise UsageError(f"no such model file: {self.path}")
        return self._parse(lambda parser: parser.parse_from_file(self.path), self.path)


class NetworkFromOnnxBytes(_OnnxNetwork):
    """Parse a serialized ONNX model (bytes or a loader of bytes); ``path`` locates external data."""

    def __init__(self, model: bytes | Callable[[], bytes], path: str | None = None, strongly_typed: bool = False,
                 plugins: Sequence[str] = (), flags: Sequence[str] | None = None, plugin_instancenorm: bool = False) -> None:
        super().__init__(strongly_typed, plugins, flags, plugin_instancenorm)
        self.model = model
        self.path = path

    def __call__(self) -> tuple[Any, Any, Any]:
        data, _ = invoke_if_callable(self.model)
        return self._parse(lambda parser: parser.parse(bytes(data), self.path), "the ONNX bytes")


class NetworkFromScript(BaseLoader):
    """A network built by user code: ``file.py[:load_network]`` returning ``(builder, network[, parser])``."""

    def __init__(self, spec: str, func: str | None = None) -> None:
        self.spec = spec if func is None or ":" in spec else f"{spec}:{func}"

    def __call__(self) -> tuple[Any, ...]:
        from parity_trt.script import load_function

        result = load_function(self.spec, "load_network", "--trt-network-func")()
        if not isinstance(result, tuple) or len(result) not in (2, 3):
            raise UsageError(f"--trt-network-func: {self.spec} must return (builder, network) or (builder, network, parser)")
        return result


def unpack(result: Any) -> tuple[Any, Any, Any]:
    """Normalize a network loader's result to ``(builder, network, parser-or-None)``."""
    if isinstance(result, tuple) and len(result) == 2:
        return result[0], result[1], None
    if isinstance(result, tuple) and len(result) == 3:
        return result
    raise UsageError("a network loader must return (builder, network) or (builder, network, parser)")


def tensors_by_name(network: Any) -> dict[str, Any]:
    """Every tensor of the network (inputs and layer outputs), by name."""
    found = {}
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        found[tensor.name] = tensor
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        for out in range(layer.num_outputs):
            tensor = layer.get_output(out)
            found[tensor.name] = tensor
    return found


def _lookup_tensors(network: Any, names: Sequence[str], option: str) -> list[Any]:
    known = tensors_by_name(network)
    missing = [n for n in names if n not in known]
    if missing:
        hint = did_you_mean(missing[0], known)
        raise UsageError(f"{option}: the network has no tensor '{missing[0]}'{hint} ({len(known)} tensors; see parity inspect model)")
    return [known[n] for n in names]


def mark_all_outputs(network: Any, exclude: Sequence[str] = ()) -> int:
    """Mark every layer output TensorRT allows as a network output; returns how many were marked.

    Skipped, as Polygraphy's ``mark_layerwise`` does (backend/trt/util.py): outputs of layers inside a loop
    (from a loop's first boundary layer, TRIP_LIMIT/ITERATOR/RECURRENCE, to its LOOP_OUTPUT layer; a loop-body
    tensor cannot be a network output, only a LOOP_OUTPUT's can), of SHAPE and CONSTANT layers, shape tensors,
    and optional outputs a layer left out (``get_output`` returns None for them: ILayer::getOutput,
    NvInfer.h@v10.7.0:L619-623). Loops are found by layer order, so the network must be topologically sorted
    (the ONNX parser's are); inside nested loops, layers after an inner loop's outputs are treated as outside.
    """
    trt = import_trt()
    loop_start = {trt.LayerType.TRIP_LIMIT, trt.LayerType.ITERATOR, trt.LayerType.RECURRENCE}
    never = {trt.LayerType.SHAPE, trt.LayerType.CONSTANT}
    count = 0
    skip = set(exclude)
    in_loop = False
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        kind = layer.type
        if kind in loop_start:
            in_loop = True
        elif kind == trt.LayerType.LOOP_OUTPUT:
            in_loop = False  # a loop output's tensor lives outside the loop
        if in_loop or kind in never:
            continue
        for out in range(layer.num_outputs):
            tensor = layer.get_output(out)
            if tensor is None or tensor.is_network_output or tensor.is_shape_tensor or tensor.name in skip:
                continue
            network.mark_output(tensor)
            count += 1
    return count


def set_outputs(network: Any, names: Sequence[str]) -> None:
    """Make exactly ``names`` the network outputs."""
    wanted = _lookup_tensors(network, names, "--trt-outputs")
    current = [network.get_output(i) for i in range(network.num_outputs)]
    for tensor in current:
        if tensor.name not in names:
            network.unmark_output(tensor)
    for tensor in wanted:
        if not tensor.is_network_output:
            network.mark_output(tensor)


def mark_debug(network: Any, names: Sequence[str] = (), unfused: bool = False) -> None:
    """Mark debug tensors: TensorRT keeps fusions and reports them through IDebugListener at run time."""
    trt = import_trt()
    for tensor in _lookup_tensors(network, names, "--mark-debug"):
        if not network.mark_debug(tensor):
            raise ModelError(f"--mark-debug: TensorRT refused to mark '{tensor.name}' as a debug tensor")
    if unfused:
        versions.require(trt, "INetworkDefinition.mark_unfused_tensors_as_debug_tensors", "--mark-unfused-tensors-as-debug-tensors")
        network.mark_unfused_tensors_as_debug_tensors()


class ModifyNetwork(BaseLoader):
    """Mark outputs / debug tensors and run user edits on a network loader's result.

    ``outputs``: a list of names (exactly these become outputs) or ``"mark-all"`` (every tensor; this changes
    the engine TensorRT builds and can break fusions, so prefer ``debug``/``unfused``).
    ``postprocess``: callables ``f(network)`` run last (``--trt-network-postprocess-script``).
    """

    def __init__(self, network: Any, outputs: Sequence[str] | str | None = None, exclude: Sequence[str] = (),
                 debug: Sequence[str] = (), unfused: bool = False, postprocess: Sequence[Callable[[Any], Any]] = (),
                 outputs_by_type: Sequence[str] = (), layer_precisions: Mapping[str, str] | None = None,
                 tensor_datatypes: Mapping[str, str] | str | None = None,
                 tensor_formats: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
                 decomposable_attentions: bool = False) -> None:
        self.network_loader = network
        self.outputs = outputs
        self.exclude = tuple(exclude)
        self.debug = tuple(debug)
        self.unfused = unfused
        self.postprocess = tuple(postprocess)
        self.outputs_by_type = tuple(outputs_by_type)
        self.layer_precisions = dict(layer_precisions or {})
        self.tensor_datatypes = tensor_datatypes
        self.tensor_formats = tensor_formats
        self.decomposable_attentions = decomposable_attentions

    def __call__(self) -> tuple[Any, Any, Any]:
        builder, network, parser = unpack(invoke_if_callable(self.network_loader)[0])
        if self.outputs == MARK_ALL:
            warnings.warn(
                "--trt-outputs mark all changes the engine (fusions break, memory grows); "
                "--mark-unfused-tensors-as-debug-tensors keeps the engine as built",
                stacklevel=2,
            )
            mark_all_outputs(network, self.exclude)
        elif self.outputs:
            set_outputs(network, list(self.outputs))
        if self.outputs_by_type:
            mark_outputs_by_type(network, self.outputs_by_type)
        mark_debug(network, self.debug, self.unfused)
        if self.layer_precisions:
            set_layer_precisions(network, self.layer_precisions)
        if self.tensor_datatypes:
            set_io_datatypes(network, self.tensor_datatypes)
        if self.tensor_formats:
            set_io_formats(network, self.tensor_formats)
        if self.decomposable_attentions:
            set_decomposable_attentions(network)
        for func in self.postprocess:
            func(network)
        return builder, network, parser


def mark_outputs_by_type(network: Any, layer_types: Sequence[str]) -> int:
    """Mark every output of the layers of these ``LayerType`` names (case-insensitive) as a network output, as
    Polygraphy's ``mark_by_layer_type``; an unknown name is refused with the close ones. Returns how many were marked."""
    trt = import_trt()
    kinds = {versions.enum_member(trt, "LayerType", name, "--trt-outputs-by-type") for name in layer_types}
    count = 0
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        if layer.type not in kinds:
            continue
        for out in range(layer.num_outputs):
            tensor = layer.get_output(out)
            if tensor is not None and not tensor.is_network_output:
                network.mark_output(tensor)
                count += 1
    if not count:
        warnings.warn(f"--trt-outputs-by-type: the network has no layer of type {', '.join(layer_types)}", stacklevel=2)
    return count


def data_type(trt: Any, name: str, option: str) -> Any:
    """A ``DataType`` from its alias (``float16``, ``int8``: ``trt.float16``...) or member name (``HALF``)."""
    alias = getattr(trt, name.strip().lower(), None)
    if isinstance(alias, trt.DataType):
        return alias
    return versions.enum_member(trt, "DataType", name, option)


def _check_names(wanted: Sequence[str], known: Sequence[str], option: str, what: str) -> None:
    missing = [n for n in wanted if n not in known]
    if missing:
        raise UsageError(f"{option}: the network has no {what} '{missing[0]}'{did_you_mean(missing[0], known)}")


def set_layer_precisions(network: Any, precisions: Mapping[str, str]) -> None:
    """``ILayer.precision`` for each named layer (Polygraphy's SetLayerPrecisions); TensorRT 10 only."""
    trt = import_trt()
    versions.require(trt, "ILayer.precision", "--layer-precisions")
    layers = {network.get_layer(i).name: network.get_layer(i) for i in range(network.num_layers)}
    _check_names(list(precisions), list(layers), "--layer-precisions", "layer")
    for name, dtype in precisions.items():
        layers[name].precision = data_type(trt, dtype, "--layer-precisions")


def io_tensors(network: Any) -> dict[str, Any]:
    """The network's input and output tensors, by name."""
    found = {network.get_input(i).name: network.get_input(i) for i in range(network.num_inputs)}
    found.update({network.get_output(i).name: network.get_output(i) for i in range(network.num_outputs)})
    return found


def set_io_datatypes(network: Any, datatypes: Mapping[str, str] | str) -> None:
    """``ITensor.dtype`` of the named I/O tensors, or of every one for a single type (Polygraphy's SetTensorDatatypes)."""
    trt = import_trt()
    tensors = io_tensors(network)
    wanted = dict.fromkeys(tensors, datatypes) if isinstance(datatypes, str) else dict(datatypes)
    _check_names(list(wanted), list(tensors), "--tensor-datatypes", "input or output")
    for name, dtype in wanted.items():
        tensors[name].dtype = data_type(trt, dtype, "--tensor-datatypes")


def set_io_formats(network: Any, formats: Mapping[str, Sequence[str]] | Sequence[str]) -> None:
    """``ITensor.allowed_formats`` (a mask of ``1 << TensorFormat``) of the named I/O tensors, or of every one."""
    trt = import_trt()
    tensors = io_tensors(network)
    wanted = dict(formats) if isinstance(formats, Mapping) else dict.fromkeys(tensors, list(formats))
    _check_names(list(wanted), list(tensors), "--tensor-formats", "input or output")
    for name, names in wanted.items():
        mask = 0
        for fmt in names:
            mask |= 1 << int(versions.enum_member(trt, "TensorFormat", fmt, "--tensor-formats"))
        tensors[name].allowed_formats = mask


def set_decomposable_attentions(network: Any) -> int:
    """Mark every attention decomposable (``IAttention.decomposable``, reached from its ATTENTION_INPUT layer as
    Polygraphy's SetDecomposableAttentions does); TensorRT 10.16+. Returns how many were marked."""
    trt = import_trt()
    versions.require(trt, "IAttention.decomposable", "--decomposable-attentions")
    count = 0
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        if layer.type == trt.LayerType.ATTENTION_INPUT:
            attention_input: Any = layer  # typed by the conformance walk's receiver name, not by ILayer
            attention_input.__class__ = trt.IAttentionInputLayer  # get_layer gives an ILayer; downcast as Polygraphy does
            attention_input.attention.decomposable = True
            count += 1
    if not count:
        warnings.warn("--decomposable-attentions: the network has no attention", stacklevel=2)
    return count


def network_from_onnx_path(path: str, strongly_typed: bool = False, plugins: Sequence[str] = ()) -> tuple[Any, Any, Any]:
    """Immediately parse an ONNX file: ``(builder, network, parser)``."""
    return NetworkFromOnnxPath(path, strongly_typed, plugins)()


def network_from_onnx_bytes(model: bytes, path: str | None = None, strongly_typed: bool = False) -> tuple[Any, Any, Any]:
    return NetworkFromOnnxBytes(model, path, strongly_typed)()


def create_network(strongly_typed: bool = False) -> tuple[Any, Any]:
    return CreateNetwork(strongly_typed)()


def network_inputs(network: Any) -> dict[str, tuple[int, ...]]:
    """``{input name: shape with -1 for dynamic dims}``."""
    shapes = {}
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        shapes[tensor.name] = tuple(tensor.shape)
    return shapes
