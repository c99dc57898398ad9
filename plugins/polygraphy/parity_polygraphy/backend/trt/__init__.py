"""``polygraphy.backend.trt``, as far as it goes here: ``CreateNetwork`` (an empty TensorRT network with its
builder), ``NetworkFromOnnxBytes``, ``Profile``, the engine loaders (``EngineBytesFromNetwork``, ``EngineFromNetwork``,
``EngineFromBytes``, ``SaveEngine``), ``TrtRunner`` and ``util.get_trt_logger``/``util.get_all_tensors``. TensorRT comes from
``parity_trt.api.import_trt()`` (the installed TensorRT, or the error saying it is missing), on first use.
``CreateConfig``/``PostprocessConfig`` (config.py) build and modify the builder config. Tactic replay
(algorithm_selector.py): ``TensorInfo``, ``Algorithm``, ``TacticReplayData`` and the TensorRT 10 selectors
``TacticRecorder``/``TacticReplayer``. Polygraphy's other
TensorRT loaders are not mirrored yet."""

from parity_polygraphy.backend.trt import util
from parity_polygraphy.backend.trt.algorithm_selector import Algorithm, TacticRecorder, TacticReplayData, TacticReplayer, TensorInfo
from parity_polygraphy.backend.trt.config import CreateConfig, PostprocessConfig, create_config, postprocess_config
from parity_polygraphy.backend.trt.engine import (
    EngineBytesFromNetwork,
    EngineFromBytes,
    EngineFromNetwork,
    SaveEngine,
    engine_bytes_from_network,
    engine_from_bytes,
    engine_from_network,
    save_engine,
)
from parity_polygraphy.backend.trt.loader import CreateNetwork, NetworkFromOnnxBytes, create_network, network_from_onnx_bytes
from parity_polygraphy.backend.trt.profile import Profile, ShapeTuple
from parity_polygraphy.backend.trt.runner import TrtRunner

__all__ = ["EngineBytesFromNetwork", "EngineFromBytes", "EngineFromNetwork", "TrtRunner", "engine_bytes_from_network", "engine_from_bytes", "engine_from_network"]
__all__ += ["CreateNetwork", "NetworkFromOnnxBytes", "Profile", "ShapeTuple", "create_network", "network_from_onnx_bytes", "util"]
__all__ += ["Algorithm", "TacticRecorder", "TacticReplayData", "TacticReplayer", "TensorInfo"]
__all__ += ["SaveEngine", "save_engine"]
__all__ += ["CreateConfig", "PostprocessConfig", "create_config", "postprocess_config"]
