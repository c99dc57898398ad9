"""Makes plugins/trt/tests importable here, for trt_model (the model of TensorRT's documented behaviour, not TensorRT)."""

from __future__ import annotations

import sys
from pathlib import Path

TRT_TESTS = str(Path(__file__).resolve().parents[2] / "trt" / "tests")
if TRT_TESTS not in sys.path:
    sys.path.insert(0, TRT_TESTS)

from parity_tactics import trt_tactics  # noqa: E402
from trt_model.fixtures import trt_backend  # noqa: E402, F401 - fixture: each modelled TensorRT version, then the real one
from trt_model.install import FORGET  # noqa: E402

FORGET.append(trt_tactics._selector_class.cache_clear)  # its selector class, one per TensorRT module, goes with each model
