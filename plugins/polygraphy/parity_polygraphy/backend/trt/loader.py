"""Polygraphy's TensorRT network loaders: ``CreateNetwork`` (an empty network and the builder that owns it),
``NetworkFromOnnxBytes``/``NetworkFromOnnxPath``, the network modifiers (``PostprocessNetwork``,
``SetLayerPrecisions``, ``SetTensorDatatypes``, ``SetTensorFormats``, ``ModifyNetworkOutputs``), ``EngineFromPath``,
``BytesFromEngine``/``BufferFromEngine``, ``LoadPlugins`` and ``LoadRuntime``, each with its immediately evaluated
twin. ``OnnxLikeFromNetwork`` exists for imports and refuses when called."""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parity_trt import api as trt_api
from parity_trt.api import import_trt

from parity.api import ParityError, invoke_if_callable
from parity_polygraphy.backend._funcify import twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.backend.trt.util import get_all_tensors, get_trt_logger
from parity_polygraphy.constants import MARK_ALL
from parity_polygraphy.exception import PolygraphyException


class CreateNetwork(BaseLoader):
    """``CreateNetwork()()`` -> ``(builder, network)``. ``explicit_batch``: default True before TensorRT 10 (where
    the flag exists); ``strongly_typed`` (default False); ``mark_unfused_tensors_as_debug_tensors`` (default False)."""

    def __init__(self, explicit_batch: bool | None = None, strongly_typed: bool | None = None, mark_unfused_tensors_as_debug_tensors: bool | None = None) -> None:
        self.explicit_batch = explicit_batch
        self.strongly_typed = bool(strongly_typed)
        self.mark_unfused_tensors_as_debug_tensors = bool(mark_unfused_tensors_as_debug_tensors)

    def call_impl(self) -> tuple[Any, Any]:
        trt = import_trt()
        explicit = self.explicit_batch
        if explicit is None:
            explicit = int(str(trt.__version__).split(".")[0]) < 10
        builder = trt.Builder(get_trt_logger())
        flags = 0
        for wanted, flag in ((explicit, "EXPLICIT_BATCH"), (self.strongly_typed, "STRONGLY_TYPED")):
            if wanted:
                if not hasattr(trt.NetworkDefinitionCreationFlag, flag):
                    raise PolygraphyException(f"CreateNetwork: this TensorRT version has no {flag} network flag")
                flags |= 1 << int(getattr(trt.NetworkDefinitionCreationFlag, flag))
        network = builder.create_network(flags=flags)
        if network is None:
            raise PolygraphyException("Invalid network. See logging output above for details.")
        if self.mark_unfused_tensors_as_debug_tensors:
            network.mark_unfused_tensors_as_debug_tensors()
        return builder, network


class NetworkFromOnnxBytes(BaseLoader):
    """``NetworkFromOnnxBytes(model_bytes)()`` -> ``(builder, network, parser)``: the ONNX model parsed into a new
    network (``model_bytes``: bytes or a loader of them). A model the parser refuses raises, with its errors."""

    def __init__(self, model_bytes: Any, flags: Sequence[Any] | None = None, plugin_instancenorm: bool | None = None, strongly_typed: bool | None = None) -> None:
        self._model_bytes = model_bytes
        self.flags = list(flags or ())
        self.plugin_instancenorm = bool(plugin_instancenorm)
        self.strongly_typed = bool(strongly_typed)

    def call_impl(self) -> tuple[Any, Any, Any]:
        data, _ = invoke_if_callable(self._model_bytes)
        builder, network = create_network(strongly_typed=self.strongly_typed)
        parser = _parser(network, self.flags, self.plugin_instancenorm)
        return _parsed(builder, network, parser, parser.parse(bytes(data)))


def _parser(network: Any, flags: Sequence[Any], plugin_instancenorm: bool) -> Any:
    trt = import_trt()
    parser = trt.OnnxParser(network, get_trt_logger())
    for flag in flags:
        parser.set_flag(flag)
    if plugin_instancenorm and hasattr(trt.OnnxParserFlag, "NATIVE_INSTANCENORM"):
        parser.clear_flag(trt.OnnxParserFlag.NATIVE_INSTANCENORM)
    return parser


def _parsed(builder: Any, network: Any, parser: Any, ok: bool) -> tuple[Any, Any, Any]:
    """``(builder, network, parser)`` if the parse succeeded, else the parser's errors raised."""
    if not ok:
        errors = "\n".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise PolygraphyException(f"Failed to parse ONNX model. Does the model file exist and contain a valid ONNX model?\n{errors}")
    return builder, network, parser


create_network = twin(CreateNetwork)
network_from_onnx_bytes = twin(NetworkFromOnnxBytes)


class NetworkFromOnnxPath(NetworkFromOnnxBytes):
    """``NetworkFromOnnxPath(path)()`` -> ``(builder, network, parser)``: the ONNX model at ``path`` (or a loader of
    the path) parsed from the file, so its external data next to it is found. Options as NetworkFromOnnxBytes."""

    def __init__(self, path: Any, flags: Sequence[Any] | None = None, plugin_instancenorm: bool | None = None, strongly_typed: bool | None = None) -> None:
        super().__init__(None, flags, plugin_instancenorm, strongly_typed)
        self.path = path

    def call_impl(self) -> tuple[Any, Any, Any]:
        path, _ = invoke_if_callable(self.path)
        if not os.path.exists(path):
            raise PolygraphyException(f"ONNX model does not exist: {path}")
        builder, network = create_network(strongly_typed=self.strongly_typed)
        parser = _parser(network, self.flags, self.plugin_instancenorm)
        return _parsed(builder, network, parser, parser.parse_from_file(str(path)))


class _NetworkModifier(BaseLoader):
    """A loader that takes ``(builder, network[, parser])`` (or a loader of it), changes the network and returns
    the same tuple. Subclasses implement ``modify(network)``."""

    def __init__(self, network: Any) -> None:
        self._network = network

    def call_impl(self) -> tuple[Any, ...]:
        loaded, _ = invoke_if_callable(self._network)
        if not isinstance(loaded, tuple) or len(loaded) not in (2, 3):
            raise PolygraphyException(f"{type(self).__name__}: expected (builder, network[, parser]), got {type(loaded).__name__}")
        self.modify(loaded[1])
        return loaded

    def modify(self, network: Any) -> None:
        raise NotImplementedError


class PostprocessNetwork(_NetworkModifier):
    """Calls ``func(network=network)`` on the loaded network (any changes it makes are kept)."""

    def __init__(self, network: Any, func: Callable[..., Any]) -> None:
        super().__init__(network)
        if not callable(func):
            raise PolygraphyException(f"Object {func!r} is not a callable.")
        self._func = func

    def modify(self, network: Any) -> None:
        self._func(network=network)


def _tensors_named(network: Any, names: Sequence[str], what: str) -> dict[str, Any]:
    """The network's tensors with these names; an unknown name is an error naming it (not silently skipped)."""
    tensors = get_all_tensors(network)
    missing = sorted(set(names) - set(tensors))
    if missing:
        raise PolygraphyException(f"{what}: no tensor named {', '.join(missing)} in the network")
    return {name: tensors[name] for name in names}


class SetLayerPrecisions(_NetworkModifier):
    """Sets the precision of each layer named in ``layer_precisions`` (name -> ``trt.DataType``)."""

    def __init__(self, network: Any, layer_precisions: Mapping[str, Any]) -> None:
        super().__init__(network)
        self.layer_precisions = dict(layer_precisions)

    def modify(self, network: Any) -> None:
        layers = {layer.name: layer for layer in (network.get_layer(i) for i in range(network.num_layers))}
        missing = sorted(set(self.layer_precisions) - set(layers))
        if missing:
            raise PolygraphyException(f"SetLayerPrecisions: no layer named {', '.join(missing)} in the network")
        for name, precision in self.layer_precisions.items():
            layers[name].precision = precision


class SetTensorDatatypes(_NetworkModifier):
    """Sets the data type of each tensor named in ``tensor_datatypes`` (name -> ``trt.DataType``)."""

    def __init__(self, network: Any, tensor_datatypes: Mapping[str, Any]) -> None:
        super().__init__(network)
        self.tensor_datatypes = dict(tensor_datatypes)

    def modify(self, network: Any) -> None:
        for name, tensor in _tensors_named(network, list(self.tensor_datatypes), "SetTensorDatatypes").items():
            try:
                tensor.dtype = self.tensor_datatypes[name]
            except AttributeError:  # TensorRT 11: networks are strongly typed, a tensor's type is not settable
                raise PolygraphyException(f"SetTensorDatatypes: TensorRT {import_trt().__version__} cannot set the data type of tensor {name}") from None


class SetTensorFormats(_NetworkModifier):
    """Sets the allowed formats of each tensor named in ``tensor_formats`` (name -> list of ``trt.TensorFormat``)."""

    def __init__(self, network: Any, tensor_formats: Mapping[str, Sequence[Any]]) -> None:
        super().__init__(network)
        self.tensor_formats = {name: list(formats) for name, formats in tensor_formats.items()}

    def modify(self, network: Any) -> None:
        for name, tensor in _tensors_named(network, list(self.tensor_formats), "SetTensorFormats").items():
            tensor.allowed_formats = functools.reduce(lambda mask, fmt: mask | 1 << int(fmt), self.tensor_formats[name], 0)


class ModifyNetworkOutputs(_NetworkModifier):
    """Replaces the network's outputs: ``outputs`` names the tensors to mark (``constants.MARK_ALL``: every layer
    output), ``exclude_outputs`` names tensors to leave unmarked. ``outputs=None`` keeps the current outputs."""

    def __init__(self, network: Any, outputs: Sequence[str] | str | None = None, exclude_outputs: Sequence[str] | None = None) -> None:
        super().__init__(network)
        self.outputs = outputs
        self.exclude_outputs = list(exclude_outputs or ())

    def modify(self, network: Any) -> None:
        current = [network.get_output(i) for i in range(network.num_outputs)]
        if self.outputs is None:
            wanted = {tensor.name: tensor for tensor in current}
        elif self.outputs == MARK_ALL:
            wanted = {}
            for layer in (network.get_layer(i) for i in range(network.num_layers)):
                for tensor in (layer.get_output(j) for j in range(layer.num_outputs)):
                    if tensor is not None and not tensor.is_network_input:
                        wanted[tensor.name] = tensor
        else:
            wanted = _tensors_named(network, list(self.outputs), "ModifyNetworkOutputs")
        for name in self.exclude_outputs:
            wanted.pop(name, None)
        for tensor in current:
            if tensor.name not in wanted:
                network.unmark_output(tensor)
        marked = {tensor.name for tensor in current}
        for name, tensor in wanted.items():
            if name not in marked:
                network.mark_output(tensor)


class EngineFromPath(BaseLoader):
    """Deserializes the engine saved at ``path`` (or a loader of the path); ``runtime``: the ``trt.Runtime`` to use
    (default: parity_trt's process-wide one)."""

    def __init__(self, path: Any, runtime: Any = None) -> None:
        self.path = path
        self._runtime = runtime

    def call_impl(self) -> Any:
        path, _ = invoke_if_callable(self.path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise PolygraphyException(f"Could not read engine file {path}: {exc.strerror}") from exc
        runtime, _ = invoke_if_callable(self._runtime)
        if runtime is None:
            try:
                return trt_api.EngineFromBytes(data)()
            except ParityError as exc:
                raise PolygraphyException(str(exc)) from exc
        engine = runtime.deserialize_cuda_engine(data)
        if engine is None:
            raise PolygraphyException(f"Could not deserialize engine from {path}. See logging output above for details.")
        return engine


class BytesFromEngine(BaseLoader):
    """The serialized engine as ``bytes`` (``engine``: a ``trt.ICudaEngine`` or a loader of one)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def call_impl(self) -> bytes:
        return bytes(BufferFromEngine(self._engine)())


class BufferFromEngine(BytesFromEngine):
    """The serialized engine as TensorRT returns it (a ``trt.IHostMemory``), without a copy."""

    def call_impl(self) -> Any:
        engine, _ = invoke_if_callable(self._engine)
        buffer = engine.serialize()
        if buffer is None:
            raise PolygraphyException("Failed to serialize the engine. See logging output above for details.")
        return buffer


class LoadPlugins(BaseLoader):
    """Loads the plugin libraries at ``plugins`` (paths) and TensorRT's own plugins, then returns ``obj``
    (called first if it is a loader); without ``obj``, returns None."""

    def __init__(self, plugins: Sequence[str] | None = None, obj: Any = None) -> None:
        self.plugins = list(plugins or ())
        self.obj = obj

    def call_impl(self) -> Any:
        trt = import_trt()
        for path in self.plugins:
            try:
                ctypes.CDLL(path)
            except OSError as exc:
                raise PolygraphyException(f"Could not load plugin library {path}: {exc}") from exc
        trt.init_libnvinfer_plugins(get_trt_logger(), "")
        obj, _ = invoke_if_callable(self.obj)
        return obj


class LoadRuntime(BaseLoader):
    """A ``trt.Runtime`` for the lean/dispatch runtime library at ``path`` (``Runtime.load_runtime``)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def call_impl(self) -> Any:
        trt = import_trt()
        runtime = trt.Runtime(get_trt_logger())
        if not hasattr(runtime, "load_runtime"):
            raise PolygraphyException(f"LoadRuntime: TensorRT {trt.__version__} cannot load a runtime library")
        loaded = runtime.load_runtime(self.path)
        if loaded is None:
            raise PolygraphyException(f"Could not load the TensorRT runtime library {self.path}. See logging output above for details.")
        return loaded


class OnnxLikeFromNetwork(BaseLoader):
    """Polygraphy's ONNX-like graph of a TensorRT network (for display) is not implemented here: calling this
    raises, rather than returning a different model."""

    def __init__(self, network: Any) -> None:
        self._network = network

    def call_impl(self) -> Any:
        raise PolygraphyException("OnnxLikeFromNetwork is not supported by parity_polygraphy (no ONNX-like export of TensorRT networks)")


network_from_onnx_path = twin(NetworkFromOnnxPath)
postprocess_network = twin(PostprocessNetwork)
set_layer_precisions = twin(SetLayerPrecisions)
set_tensor_datatypes = twin(SetTensorDatatypes)
set_tensor_formats = twin(SetTensorFormats)
modify_network_outputs = twin(ModifyNetworkOutputs)
engine_from_path = twin(EngineFromPath)
bytes_from_engine = twin(BytesFromEngine)
buffer_from_engine = twin(BufferFromEngine)
load_plugins = twin(LoadPlugins)
load_runtime = twin(LoadRuntime)
onnx_like_from_network = twin(OnnxLikeFromNetwork)
