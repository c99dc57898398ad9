"""See ``cuda/__init__.py``: a model of cuda-python for tests, not CUDA."""

from trt_model.install import process_memory

runtime = process_memory()
