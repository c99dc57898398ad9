"""``polygraphy.backend.trt``, as far as it goes here: ``CreateNetwork`` (an empty TensorRT network with its
builder), ``NetworkFromOnnxBytes``, ``Profile`` and ``util.get_trt_logger``. TensorRT comes from ``parity_trt.api.import_trt()`` (the installed
TensorRT, or the error saying it is missing). Polygraphy's other TensorRT loaders and ``TrtRunner`` are not
mirrored yet: parity_trt's public module does not expose its network, config and engine loaders."""

from parity_polygraphy.backend.trt import util
from parity_polygraphy.backend.trt.loader import CreateNetwork, NetworkFromOnnxBytes, create_network, network_from_onnx_bytes
from parity_polygraphy.backend.trt.profile import Profile, ShapeTuple

__all__ = ["CreateNetwork", "NetworkFromOnnxBytes", "Profile", "ShapeTuple", "create_network", "network_from_onnx_bytes", "util"]
