"""Parity's TensorRT backend (TensorRT 10.x and 11.x).

Lazy loaders compose; nothing runs until the outermost one is called::

    from parity_trt import CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxPath, TrtRunner
    from parity_trt.options import build_profiles

    build = EngineBytesFromNetwork(NetworkFromOnnxPath("model.onnx"),
                                   CreateConfig(profiles=build_profiles(["x:[1,3]"], ["x:[4,3]"], ["x:[8,3]"])))
    with TrtRunner(build) as runner:
        outputs = runner.infer({"x": x})

Each loader has an immediately evaluated twin (``network_from_onnx_path``, ``create_config``,
``engine_bytes_from_network``, ``engine_from_path``, ``save_engine``, ...). Importing this package does not
import TensorRT. Another plugin that builds on this one imports :mod:`parity_trt.api` (and nothing else of it).
"""

from __future__ import annotations

from parity.api import lazy_attributes

_LAZY = {
    "CreateNetwork": "parity_trt.network",
    "NetworkFromOnnxPath": "parity_trt.network",
    "NetworkFromOnnxBytes": "parity_trt.network",
    "NetworkFromScript": "parity_trt.network",
    "ModifyNetwork": "parity_trt.network",
    "create_network": "parity_trt.network",
    "network_from_onnx_path": "parity_trt.network",
    "network_from_onnx_bytes": "parity_trt.network",
    "CreateConfig": "parity_trt.config",
    "create_config": "parity_trt.config",
    "register_build_extension": "parity_trt.config",
    "Calibrator": "parity_trt.calibrator",
    "EngineBytesFromNetwork": "parity_trt.engine",
    "EngineFromNetwork": "parity_trt.engine",
    "EngineFromBytes": "parity_trt.engine",
    "EngineFromPath": "parity_trt.engine",
    "BytesFromPath": "parity.api",  # the core's, re-exported
    "SaveEngine": "parity_trt.engine",
    "engine_bytes_from_network": "parity_trt.engine",
    "engine_from_network": "parity_trt.engine",
    "engine_from_bytes": "parity_trt.engine",
    "engine_from_path": "parity_trt.engine",
    "save_engine": "parity_trt.engine",
    "TrtRunner": "parity_trt.runner",
    "extend": "parity_trt.script",
    "describe_engine": "parity_trt.inspect",
    "Profile": "parity_trt.options",
    "build_profiles": "parity_trt.options",
}

__all__ = list(_LAZY)

__getattr__ = lazy_attributes(__name__, _LAZY)
