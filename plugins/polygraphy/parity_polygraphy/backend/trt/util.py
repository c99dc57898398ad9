"""``polygraphy.backend.trt.util``: the TensorRT logger that forwards TensorRT's messages to ``G_LOGGER``, and
``get_all_tensors`` (a network's tensors by name)."""

from __future__ import annotations

from typing import Any

from parity_trt.api import import_trt

from parity_polygraphy.logger import G_LOGGER

_LOGGER: tuple[Any, Any] | None = None  # (the tensorrt module, its logger): one logger per TensorRT imported


def get_trt_logger() -> Any:
    """The process's one ``trt.ILogger``: TensorRT's errors, warnings and info go to ``G_LOGGER``."""
    global _LOGGER
    trt = import_trt()
    if _LOGGER is not None and _LOGGER[0] is trt:
        return _LOGGER[1]

    class _Forward(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            levels = {
                trt.Logger.INTERNAL_ERROR: G_LOGGER.error,
                trt.Logger.ERROR: G_LOGGER.error,
                trt.Logger.WARNING: G_LOGGER.warning,
                trt.Logger.INFO: G_LOGGER.verbose,
            }
            try:
                levels.get(severity, G_LOGGER.extra_verbose)(msg)
            except Exception:  # noqa: BLE001, S110 - TensorRT calls this from C++: it must never raise
                pass

    _LOGGER = (trt, _Forward())
    return _LOGGER[1]


def get_all_tensors(network: Any) -> dict[str, Any]:
    """Every tensor of a TensorRT network by name: the inputs and outputs of its layers (an omitted optional
    input, which TensorRT gives as None, left out) and the network's inputs."""
    tensors = [network.get_input(i) for i in range(network.num_inputs)]
    for layer in (network.get_layer(i) for i in range(network.num_layers)):
        tensors += [layer.get_input(i) for i in range(layer.num_inputs)]
        tensors += [layer.get_output(i) for i in range(layer.num_outputs)]
    return {tensor.name: tensor for tensor in tensors if tensor is not None}
