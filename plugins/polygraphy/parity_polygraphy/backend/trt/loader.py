"""``CreateNetwork``: an empty TensorRT network and the builder that owns it."""

from __future__ import annotations

from typing import Any

from parity_trt.api import import_trt

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


create_network = twin(CreateNetwork)
