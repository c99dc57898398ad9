"""``CreateNetwork``: an empty TensorRT network and the builder that owns it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from parity_trt.api import import_trt

from parity.api import invoke_if_callable
from parity_polygraphy.backend._funcify import twin
from parity_polygraphy.backend.base import BaseLoader
from parity_polygraphy.backend.trt.util import get_trt_logger
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
        trt = import_trt()
        data, _ = invoke_if_callable(self._model_bytes)
        builder, network = create_network(strongly_typed=self.strongly_typed)
        parser = trt.OnnxParser(network, get_trt_logger())
        for flag in self.flags:
            parser.set_flag(flag)
        if self.plugin_instancenorm and hasattr(trt.OnnxParserFlag, "NATIVE_INSTANCENORM"):
            parser.clear_flag(trt.OnnxParserFlag.NATIVE_INSTANCENORM)
        if not parser.parse(bytes(data)):
            errors = "\n".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise PolygraphyException(f"Failed to parse ONNX model. Does the model file exist and contain a valid ONNX model?\n{errors}")
        return builder, network, parser


create_network = twin(CreateNetwork)
network_from_onnx_bytes = twin(NetworkFromOnnxBytes)
