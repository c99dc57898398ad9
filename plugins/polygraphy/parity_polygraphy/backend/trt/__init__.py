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
from parity_polygraphy.backend.trt.calibrator import Calibrator
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
from parity_polygraphy.backend.trt.loader import (
    BufferFromEngine,
    BytesFromEngine,
    CreateNetwork,
    EngineFromPath,
    LoadPlugins,
    LoadRuntime,
    ModifyNetworkOutputs,
    NetworkFromOnnxBytes,
    NetworkFromOnnxPath,
    OnnxLikeFromNetwork,
    PostprocessNetwork,
    SetLayerPrecisions,
    SetTensorDatatypes,
    SetTensorFormats,
    buffer_from_engine,
    bytes_from_engine,
    create_network,
    engine_from_path,
    load_plugins,
    load_runtime,
    modify_network_outputs,
    network_from_onnx_bytes,
    network_from_onnx_path,
    onnx_like_from_network,
    postprocess_network,
    set_layer_precisions,
    set_tensor_datatypes,
    set_tensor_formats,
)
from parity_polygraphy.backend.trt.profile import Profile, ShapeTuple
from parity_polygraphy.backend.trt.runner import TrtRunner
from parity_polygraphy.backend.trt.util import get_trt_logger

__all__ = ["EngineBytesFromNetwork", "EngineFromBytes", "EngineFromNetwork", "TrtRunner", "engine_bytes_from_network", "engine_from_bytes", "engine_from_network"]
__all__ += ["CreateNetwork", "NetworkFromOnnxBytes", "Profile", "ShapeTuple", "create_network", "network_from_onnx_bytes", "util"]
__all__ += ["Algorithm", "TacticRecorder", "TacticReplayData", "TacticReplayer", "TensorInfo"]
__all__ += ["SaveEngine", "save_engine"]
__all__ += ["CreateConfig", "PostprocessConfig", "create_config", "postprocess_config"]
__all__ += ["BufferFromEngine", "BytesFromEngine", "EngineFromPath", "LoadPlugins", "LoadRuntime", "ModifyNetworkOutputs", "NetworkFromOnnxPath"]
__all__ += ["OnnxLikeFromNetwork", "PostprocessNetwork", "SetLayerPrecisions", "SetTensorDatatypes", "SetTensorFormats", "get_trt_logger"]
__all__ += ["buffer_from_engine", "bytes_from_engine", "engine_from_path", "load_plugins", "load_runtime", "modify_network_outputs"]
__all__ += ["network_from_onnx_path", "onnx_like_from_network", "postprocess_network", "set_layer_precisions", "set_tensor_datatypes", "set_tensor_formats"]
__all__ += ["Calibrator"]
