"""A model of cuda-python (trt_model.host_cuda: "device" memory in host buffers), NOT CUDA, for processes a test
started without a GPU (``trt_model.install``)."""
