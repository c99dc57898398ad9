"""``TrtRunner``: Polygraphy's TensorRT runner, on parity_trt's (``parity_trt.api.TrtRunner``: enqueueV3 on a CUDA
stream, one execution context per optimisation profile, data-dependent output shapes, debug tensors returned as
extra outputs). NumPy arrays in and out; torch tensors in give torch tensors out (on the host)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np
from parity_trt import api as trt_api

from parity.api import ParityError, invoke_if_callable
from parity_polygraphy import cuda
from parity_polygraphy.backend.base import BaseRunner
from parity_polygraphy.common import TensorMetadata
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.util import array


def _is_torch(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


def _get_array_on_cpu(arr: Any, name: str, host_buffers: dict[str, Any], stream: Any, nbytes: int, use_torch: bool) -> Any:
    """The first ``nbytes`` of device memory ``arr`` (a ``cuda.DeviceView`` or a CUDA torch tensor) copied to the
    host, as a flat uint8 array (a torch tensor with ``use_torch``). The host buffer is kept in
    ``host_buffers[name]`` and reused by later calls while it is big enough and of the same kind."""
    buffer = host_buffers.get(name)
    if buffer is None or _is_torch(buffer) != use_torch or buffer.shape[0] < nbytes:
        if use_torch:
            import torch

            buffer = torch.empty((nbytes,), dtype=torch.uint8, device="cpu")
        else:
            buffer = np.empty((nbytes,), dtype=np.uint8)
    buffer = buffer[:nbytes]
    host_buffers[name] = buffer
    if _is_torch(arr):  # a torch tensor on the GPU: torch copies it
        import torch

        buffer.copy_(arr.reshape(-1).view(torch.uint8)[:nbytes])
    else:
        cuda.wrapper().memcpy(array.data_ptr(buffer), arr.ptr, nbytes, cuda.MemcpyKind.DeviceToHost, None if stream is None else stream.ptr)
    if stream is not None:
        stream.synchronize()
    return buffer


class TrtRunner(BaseRunner):
    """Runs inference with TensorRT.

    ``engine``: a ``trt.ICudaEngine`` or ``trt.IExecutionContext`` (the runner then runs on that context and does
    not own it), serialized engine bytes, or a loader of one, called on activation.
    ``optimization_profile``: the profile every inference uses (changed with :meth:`set_profile`); without it each
    inference uses the first profile whose range holds the input shapes (Polygraphy uses profile 0).

    Refused rather than ignored (``PolygraphyException`` on activation): ``allocation_strategy`` other than
    ``"static"``, weight streaming (``weight_streaming_budget`` other than -2, ``weight_streaming_percent`` other than
    100) and a user ``debug_listener``: parity_trt's runner has none of them; ``return_raw_buffers`` in ``infer``.

    Inputs may be NumPy arrays, torch tensors or ``cuda.DeviceView``/``DeviceArray`` (copied to the host for
    parity_trt's runner; a shape tensor must be on the host). ``infer(..., copy_outputs_to_host=False)`` returns
    DeviceViews of device buffers the runner owns (valid until the next inference or deactivation): the outputs
    are copied there from the host, so it costs a copy rather than saving one."""

    def __init__(
        self,
        engine: Any,
        name: str | None = None,
        optimization_profile: int | None = None,
        allocation_strategy: str | None = None,
        weight_streaming_budget: int | None = None,
        weight_streaming_percent: float | None = None,
        debug_listener: Any = None,
    ) -> None:
        super().__init__(name=name, prefix="trt-runner")
        self._engine_or_context = engine
        self.optimization_profile = optimization_profile
        self.allocation_strategy = allocation_strategy
        self.weight_streaming_budget = weight_streaming_budget
        self.weight_streaming_percent = weight_streaming_percent
        self.debug_listener = debug_listener
        self._runner: Any = None
        self._device_outputs: dict[str, cuda.DeviceArray] = {}  # copy_outputs_to_host=False: outputs' device copies

    def _refuse_unsupported(self) -> None:
        unsupported = []
        if self.allocation_strategy not in (None, "static"):
            unsupported.append(f"allocation_strategy={self.allocation_strategy!r} (only 'static')")
        if self.weight_streaming_budget not in (None, -2):
            unsupported.append(f"weight_streaming_budget={self.weight_streaming_budget!r} (weight streaming)")
        if self.weight_streaming_percent not in (None, 100, 100.0):
            unsupported.append(f"weight_streaming_percent={self.weight_streaming_percent!r} (weight streaming)")
        if self.debug_listener is not None:
            unsupported.append("debug_listener (debug tensors come back as extra outputs instead)")
        if unsupported:
            raise PolygraphyException(f"{self.name}: TrtRunner does not support {', '.join(unsupported)}")

    @property
    def engine(self) -> Any:
        return self._runner.engine

    def activate_impl(self) -> None:
        self._refuse_unsupported()
        engine, _ = invoke_if_callable(self._engine_or_context)
        runner = trt_api.TrtRunner(engine, name=self.name, optimization_profile=self.optimization_profile)
        try:
            runner.activate()
        except ParityError as exc:
            raise PolygraphyException(str(exc)) from exc
        self._runner = runner

    def set_profile(self, index: int) -> None:
        """Run the following inferences with optimization profile ``index``."""
        if not self.is_active:
            raise PolygraphyException(f"{self.name:35} | Must be activated prior to calling set_profile()")
        try:
            self._runner.set_profile(index)
        except ParityError as exc:
            raise PolygraphyException(str(exc)) from exc

    def get_input_metadata_impl(self) -> Any:
        meta = TensorMetadata()
        for name, tensor in self._runner.get_input_metadata_impl().items():
            meta.add(name, dtype=tensor.dtype, shape=list(tensor.shape))  # dynamic dims are None
        return meta

    @property
    def context(self) -> Any:
        """The execution context inferences run on: the one given to the runner, else the one of the selected
        profile (profile 0 until one is selected or chosen by shape)."""
        if not self.is_active:
            raise PolygraphyException(f"{self.name:35} | Must be activated prior to accessing the context")
        inner = self._runner
        if inner.given_context is not None:
            return inner.given_context
        return inner._context(inner.profile or 0)  # made on first use, as the runner's inferences would

    def _host_input(self, name: str, value: Any) -> Any:
        """A feed value as the host array parity_trt's runner takes: device memory (a cuda.DeviceView or a CUDA
        torch tensor) is copied to the host; a shape tensor's values must already be on the host (TensorRT reads them there)."""
        if isinstance(value, cuda.DeviceView):
            if name in self._runner.shape_io:
                raise PolygraphyException(f"Input tensor: {name} is a shape tensor, so it must reside in host memory, not in a DeviceView")
            return value.numpy()
        return value.detach().cpu().numpy() if _is_torch(value) else value

    def _device_output(self, name: str, value: np.ndarray) -> cuda.DeviceView:
        """An output copied into the runner's device buffer for it (reused by later inferences, freed on
        deactivation), as a DeviceView: what ``copy_outputs_to_host=False`` returns."""
        buffer = self._device_outputs.get(name)
        if buffer is None:
            buffer = self._device_outputs[name] = cuda.DeviceArray(dtype=value.dtype)
        buffer.dtype = value.dtype
        buffer.resize(value.shape).copy_from(np.ascontiguousarray(value))
        return buffer.view()

    def infer_impl(self, feed_dict: Mapping[str, Any], copy_outputs_to_host: bool | None = None, return_raw_buffers: bool | None = None) -> OrderedDict[str, Any]:
        if return_raw_buffers:
            raise PolygraphyException(f"{self.name}: TrtRunner does not support return_raw_buffers (outputs come back shaped)")
        use_torch = any(_is_torch(value) for value in feed_dict.values())
        feed = {name: self._host_input(name, value) for name, value in feed_dict.items()}
        start = time.perf_counter()
        try:
            outputs = OrderedDict(self._runner.infer_impl(feed))
        except ParityError as exc:
            raise PolygraphyException(str(exc)) from exc
        self.inference_time = time.perf_counter() - start
        if use_torch:
            import torch

            outputs = OrderedDict((name, torch.from_numpy(value)) for name, value in outputs.items())
            if copy_outputs_to_host is False:  # on the GPU, as Polygraphy gives them (torch raises without CUDA)
                outputs = OrderedDict((name, value.cuda()) for name, value in outputs.items())
        elif copy_outputs_to_host is False:
            outputs = OrderedDict((name, self._device_output(name, value)) for name, value in outputs.items())
        return outputs

    def deactivate_impl(self) -> None:
        for buffer in self._device_outputs.values():
            buffer.free()
        self._device_outputs.clear()
        runner, self._runner = self._runner, None
        runner.deactivate()
