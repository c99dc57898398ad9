"""``import tensorrt`` in a process a test started gives the TensorRT MODEL (trt_model), NOT TensorRT, of version
``$PARITY_TRT_MODEL_VERSION``. This folder is on PYTHONPATH only when a test asks for it (``trt_model.install``)."""

import os
import sys

from trt_model import make
from trt_model.install import process_memory

sys.modules[__name__] = make(os.environ["PARITY_TRT_MODEL_VERSION"], memory=process_memory())
