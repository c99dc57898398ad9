"""See ``cuda/__init__.py``: a model of cuda-python's runtime for tests, not CUDA."""

import sys

from trt_model.install import process_memory

sys.modules[__name__] = process_memory()  # type: ignore[assignment]
