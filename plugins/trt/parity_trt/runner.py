"""``TrtRunner``: runs a TensorRT engine with enqueueV3 (``execute_async_v3``) on a CUDA stream.

* One execution context per optimisation profile, made on first use; the profile is the one given, or the
  first whose [min, max] range holds the input shapes (profile switching between ``infer`` calls).
* Device buffers and pinned host buffers are reused across ``infer`` calls and only grow.
* Outputs with data-dependent shapes are allocated by TensorRT through an ``IOutputAllocator``.
* Debug tensors (``--mark-debug``, unfused tensors) are copied out by an ``IDebugListener`` and returned as
  extra outputs, so the layerwise comparison sees them like marked outputs.
* Shape tensors (``engine.is_shape_inference_io(name)``) live in host memory: TensorRT reads shape-tensor input
  values from, and writes shape-tensor outputs to, host buffers; profiles hold their values, not shapes.
* TensorRT swallows exceptions raised in the allocator and debug listener callbacks (it logs them and goes on);
  they are kept (``parity_trt.callbacks``) and raised after the inference as Parity's one-line error.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from parity.api import BackendError, BaseRunner, TensorMeta, UsageError, invoke_if_callable
from parity_trt import cuda, dtypes, versions
from parity_trt._trt import failure_reason, get_logger, import_trt
from parity_trt.callbacks import clear, guard, raise_pending
from parity_trt.dtypes import DTYPES, to_numpy_dtype

__all__ = ["DTYPES", "TrtRunner", "to_numpy_dtype"]  # DTYPES lives in parity_trt.dtypes; kept here for importers


def _make_output_allocator(trt: Any) -> Any:
    class OutputAllocator(trt.IOutputAllocator):
        """Grows one device buffer for a data-dependent output and records the final shape."""

        def __init__(self) -> None:
            trt.IOutputAllocator.__init__(self)
            self.buffer = cuda.DeviceArray()
            self.shape: tuple[int, ...] | None = None

        # pyCore.cpp (v10.0.1..v10.8.0, PyOutputAllocator): an exception here is logged and nullptr returned
        @guard("the output allocator's reallocate_output", default=0)
        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            return self.buffer.allocate(size)

        @guard("the output allocator's reallocate_output_async", default=0)
        def reallocate_output_async(self, tensor_name: str, memory: int, size: int, alignment: int, stream: int) -> int:
            return self.buffer.allocate(size)

        @guard("the output allocator's notify_shape")
        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shape = tuple(int(d) for d in shape)

    return OutputAllocator()


def _make_debug_listener(trt: Any, sink: dict[str, np.ndarray]) -> Any:
    class DebugListener(trt.IDebugListener):
        """Copies each debug tensor to the host on the engine's stream (ordered before our final sync)."""

        def __init__(self) -> None:
            trt.IDebugListener.__init__(self)

        # TensorRT calls this with addr and stream as plain ints (pyCore.cpp, PyDebugListener::processDebugTensor:
        # pyFunc(reinterpret_cast<size_t>(addr), location, type, shape, name, reinterpret_cast<size_t>(stream)) at
        # v10.0.1, v10.7.0 and v10.8.0; the manifest's "capsule" comes from the documentation-only binding). The
        # contents are valid only during the call (NvInferRuntime.h, IDebugListener), so the copy finishes here.
        @guard("the debug listener (process_debug_tensor)")
        def process_debug_tensor(self, addr: Any, location: Any, type: Any, shape: Any, name: str, stream: int) -> None:  # noqa: A002
            try:
                to_numpy_dtype(type, name)  # a type this mapping lacks (a newer TensorRT's) is skipped
            except BackendError as exc:
                warnings.warn(f"debug tensor skipped: {exc}", stacklevel=1)
                return
            dims = tuple(int(d) for d in shape)
            raw = np.empty(dtypes.device_nbytes(dims, type), dtype=np.uint8)  # INT4/FP4: two per byte
            if raw.nbytes:
                if _is_host(location):
                    ctypes.memmove(raw.ctypes.data, int(addr), raw.nbytes)
                else:
                    on = cuda.Stream.wrap(int(stream))
                    cuda.memcpy_device_to_host(raw, int(addr), on)
                    on.synchronize()
            sink[name] = dtypes.from_device_layout(raw, dims, type)

    return DebugListener()


def _is_host(location: Any) -> bool:
    """``TensorLocation.HOST`` (pyCore.cpp binds TensorLocation with members DEVICE and HOST)."""
    return str(getattr(location, "name", location)).split(".")[-1] == "HOST"


class TrtRunner(BaseRunner):
    """Run an engine. ``engine`` is an ``ICudaEngine``, serialized bytes, an ``IExecutionContext``, or a loader of one.

    ``optimization_profile``: run every inference with this profile (checked at activation); without it each
    ``infer`` picks the first profile whose range holds the input shapes, one execution context per profile.
    :meth:`set_profile` changes it while the runner is active.

    Given an ``IExecutionContext`` (``engine.create_execution_context()``), as in Polygraphy, the runner runs on that
    context alone and does not own it: every inference uses the context's profile (``optimization_profile`` sets it at
    each activation; :meth:`set_profile` sets it and it stays set on the context after deactivation). The runner's debug
    listener is attached to it as to the contexts it makes.
    """

    prefix = "trt"

    def __init__(self, engine: Any | Callable[[], Any], name: str | None = None, optimization_profile: int | None = None,
                 capture_debug: bool = True, allocation_strategy: str | None = None,
                 weight_streaming_budget: int | None = None, weight_streaming_percent: float | None = None) -> None:
        super().__init__(name)
        self.engine_source = engine
        self.optimization_profile = optimization_profile
        self.capture_debug = capture_debug
        if allocation_strategy not in (None, "static", "profile", "runtime"):
            raise UsageError(f"allocation_strategy must be static, profile or runtime; got {allocation_strategy!r}")
        # Polygraphy's TrtRunner arguments: activation memory per engine (static), per profile or per input shapes
        self.allocation_strategy = allocation_strategy
        self.weight_streaming_budget = weight_streaming_budget
        self.weight_streaming_percent = weight_streaming_percent

    # ---- lifecycle ------------------------------------------------------------------------------------
    def activate_impl(self) -> None:
        from parity_trt.engine import EngineFromBytes

        trt = import_trt()
        engine, _ = invoke_if_callable(self.engine_source)
        self.given_context = None  # an execution context the user gave: the runner's only one, not owned
        if isinstance(engine, (bytes, bytearray, memoryview)):
            engine = EngineFromBytes(engine)()
        elif isinstance(engine, trt.IExecutionContext):
            context = engine
            self.given_context, engine = context, context.engine
        self.engine = engine
        self._set_weight_streaming_budget()
        self.context_memory: cuda.DeviceArray | None = None  # with allocation_strategy profile/runtime
        self.stream = cuda.Stream()
        self.contexts: dict[int, Any] = {}
        self.profile = self.optimization_profile  # the profile every inference uses; None: chosen by shape
        self.names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in self.names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in self.names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self.dtypes = {n: engine.get_tensor_dtype(n) for n in self.names}
        # shape tensors: TensorRT reads/writes their values in host memory (NvInferRuntime.h, setTensorAddress)
        self.shape_io = {n for n in self.names if engine.is_shape_inference_io(n)}
        self.host_io: dict[str, np.ndarray] = {}  # host buffers of shape tensors, alive until the next infer
        self.device: dict[str, cuda.DeviceArray] = {}
        self.pinned: dict[str, cuda.PinnedBuffer] = {}
        self.allocators: dict[str, Any] = {}
        self.debug_tensors: dict[str, np.ndarray] = {}
        self.listener = _make_debug_listener(trt, self.debug_tensors) if self.capture_debug else None
        if self.optimization_profile is not None and not 0 <= self.optimization_profile < engine.num_optimization_profiles:
            raise UsageError(f"--optimization-profile {self.optimization_profile}: the engine has {engine.num_optimization_profiles} profile(s)")
        if self.given_context is not None:
            self._prepare(self.given_context)
            if self.profile is None:
                self.profile = self.given_context.active_optimization_profile
            else:
                self._switch(self.given_context, self.profile)

    def _set_weight_streaming_budget(self) -> None:
        """``ICudaEngine.weight_streaming_budget_v2`` from the budget in bytes (-1: TensorRT's automatic budget, -2: all
        weights on the GPU) or the percentage of streamable weights kept on the GPU, as Polygraphy's TrtRunner."""
        if self.weight_streaming_budget is None and self.weight_streaming_percent is None:
            return
        trt = import_trt()
        versions.require(trt, "ICudaEngine.weight_streaming_budget_v2", "--weight-streaming-budget")
        streamable = self.engine.streamable_weights_size
        if not streamable:
            raise UsageError("--weight-streaming-budget: the engine streams no weights (build it with --weight-streaming)")
        budget = self.weight_streaming_budget
        if budget == -2:
            budget = streamable
        elif budget == -1:
            budget = self.engine.get_weight_streaming_automatic_budget()
        elif budget is None:
            budget = int(streamable * float(self.weight_streaming_percent or 0) / 100)
        self.engine.weight_streaming_budget_v2 = int(budget)

    def set_profile(self, index: int) -> None:
        """Run the following inferences with optimization profile ``index`` (Polygraphy's ``TrtRunner.set_profile``).

        Needs an active runner; a context given to the runner keeps the profile after deactivation, a runner that made
        its own contexts goes back to ``optimization_profile`` (or choosing by shape) when activated again."""
        if not self.is_active:
            raise UsageError(f"{self.name}: set_profile({index}) needs an active runner (activate it first, or give "
                             "TrtRunner(..., optimization_profile=...))")
        count = self.engine.num_optimization_profiles
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise UsageError(f"{self.name}: set_profile({index!r}): the engine has {count} optimization profile(s) (0..{count - 1})")
        if self.given_context is not None:
            self._switch(self.given_context, index)
        self.profile = index

    def _switch(self, context: Any, index: int) -> None:
        """Select profile ``index`` on ``context`` and wait for the switch (it is enqueued on the runner's stream)."""
        if context.active_optimization_profile != index:
            if not context.set_optimization_profile_async(index, self.stream.ptr):
                raise BackendError(f"TensorRT could not select optimization profile {index} on the execution context")
            self.stream.synchronize()

    def deactivate_impl(self) -> None:
        for buffer in [*self.device.values(), *self.pinned.values()]:
            buffer.free()
        for allocator in self.allocators.values():
            allocator.buffer.free()
        if self.context_memory is not None:
            self.context_memory.free()
        self.contexts.clear()
        self.given_context = None
        self.allocators.clear()
        self.host_io.clear()
        self.stream.free()
        del self.engine

    # ---- metadata -----------------------------------------------------------------------------------
    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        meta = {}
        for name in self.inputs:
            shape = tuple(None if d < 0 else int(d) for d in self.engine.get_tensor_shape(name))
            meta[name] = TensorMeta(to_numpy_dtype(self.dtypes[name], name), shape)
        return meta

    def profile_ranges(self, index: int) -> dict[str, tuple[tuple[int, ...], ...]]:
        """``{input: (min, opt, max)}`` of one profile: shapes of dynamic inputs, and the VALUES of shape-tensor
        inputs (``engine.get_tensor_profile_values``; a static shape tensor still has a range of values)."""
        ranges = {}
        for name in self.inputs:
            if name in self.shape_io:
                # pyCore.cpp (v10.0.1..v10.8.0) binds the lambda (self, profileIndex, tensorName) with the argument
                # names ("name", "profile_index") swapped, so only the positional order (index, name) is right;
                # it returns [] when the profile holds no values for the tensor.
                values = self.engine.get_tensor_profile_values(index, name)
                if values:
                    ranges[name] = tuple(tuple(int(v) for v in vs) for vs in values)
            elif -1 in tuple(self.engine.get_tensor_shape(name)):
                ranges[name] = tuple(tuple(s) for s in self.engine.get_tensor_profile_shape(name, index))
        return ranges

    def _profile_key(self, name: str, array: np.ndarray) -> tuple[int, ...]:
        """What a profile range bounds: the shape, or for a shape-tensor input its values."""
        if name in self.shape_io:
            return tuple(int(v) for v in np.asarray(array).reshape(-1))
        return tuple(array.shape)

    def select_profile(self, feed: Mapping[str, np.ndarray]) -> int:
        """The profile to run ``feed`` with; a feed outside it (or outside all, when none was chosen) is bad input.

        A chosen profile is checked here too: TensorRT checks a dynamic input's shape in ``set_input_shape``, but a
        shape-tensor input's VALUES only at enqueue, where a failure reads as TensorRT's, not the feed's."""
        if self.profile is not None:
            index = self.profile
            if not self._admits(index, feed):
                how = ("the runner runs on the execution context it was given: select another profile with set_profile(index)"
                       if self.given_context is not None else "leave out the profile index to pick one by shape")
                raise UsageError(f"input shapes {self._describe_feed(feed)} are outside optimization profile {index} "
                                 f"({self._describe_profile(index)}); {how}")
            return index
        for index in range(self.engine.num_optimization_profiles):
            if self._admits(index, feed):
                return index
        available = "; ".join(self._describe_profile(i) for i in range(self.engine.num_optimization_profiles))
        raise UsageError(f"input shapes {self._describe_feed(feed)} fit no optimization profile of the engine ({available})")

    def _admits(self, index: int, feed: Mapping[str, np.ndarray]) -> bool:
        return all(n in feed and _fits(self._profile_key(n, feed[n]), lo, hi) for n, (lo, _, hi) in self.profile_ranges(index).items())

    def _describe_feed(self, feed: Mapping[str, np.ndarray]) -> str:
        return ", ".join(f"{n}:{'values ' if n in self.shape_io else ''}{list(self._profile_key(n, a))}" for n, a in feed.items())

    def _describe_profile(self, index: int) -> str:
        return f"profile {index}: " + ", ".join(
            f"{n} {'values ' if n in self.shape_io else ''}{list(lo)}..{list(hi)}" for n, (lo, _, hi) in self.profile_ranges(index).items()
        )

    def _context(self, index: int) -> Any:
        if self.given_context is not None:  # its profile is self.profile (set at activation or by set_profile)
            return self.given_context
        if index in self.contexts:
            return self.contexts[index]
        if self.allocation_strategy in ("profile", "runtime"):  # the runner gives each context its activation memory
            context = self.engine.create_execution_context(import_trt().ExecutionContextAllocationStrategy.USER_MANAGED)
        else:
            context = self.engine.create_execution_context()
        if context is None:
            raise BackendError("TensorRT could not create an execution context (out of GPU memory?)")
        if index or self.engine.num_optimization_profiles > 1:
            context.set_optimization_profile_async(index, self.stream.ptr)
        self._prepare(context)
        self.contexts[index] = context
        return context

    def _prepare(self, context: Any) -> None:
        """Report debug tensors to the runner's listener (they come back as extra outputs)."""
        trt = import_trt()
        if self.listener is not None:
            context.set_debug_listener(self.listener)
            context.set_all_tensors_debug_state(True)
            if versions.has(trt, "IExecutionContext.unfused_tensors_debug_state"):
                context.unfused_tensors_debug_state = True

    # ---- inference ------------------------------------------------------------------------------------
    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feed = {n: dtypes.contiguous(a) for n, a in feed_dict.items()}
        context = self._context(self.select_profile(feed))
        self.debug_tensors.clear()
        self.host_io.clear()
        clear(self.listener, *self.allocators.values())  # nothing left over from an interrupted call
        for name in self.inputs:
            array = feed[name]
            if not context.set_input_shape(name, tuple(array.shape)):
                raise UsageError(f"TensorRT rejected shape {list(array.shape)} for input '{name}'")
            if name in self.shape_io:  # host memory; TensorRT reads the values at enqueue, so keep it alive
                self.host_io[name] = array
                context.set_tensor_address(name, array.ctypes.data)
                continue
            device_bytes = dtypes.to_device_layout(array, self.dtypes[name])  # packed for INT4/FP4
            buffer = self.device.setdefault(name, cuda.DeviceArray()).copy_from(device_bytes, self.stream)
            context.set_tensor_address(name, buffer.ptr)
        static: dict[str, tuple[int, ...]] = {}
        for name in self.outputs:
            shape = tuple(context.get_tensor_shape(name))
            if name in self.shape_io:  # a shape-tensor output: TensorRT writes its values to host memory
                host = self.host_io[name] = np.zeros(shape, dtype=to_numpy_dtype(self.dtypes[name], name))
                context.set_tensor_address(name, host.ctypes.data)
                continue
            if any(d < 0 for d in shape):  # data-dependent shape: TensorRT allocates through our allocator
                if name not in self.allocators:
                    self.allocators[name] = _make_output_allocator(import_trt())
                context.set_output_allocator(name, self.allocators[name])
                continue
            static[name] = shape
            buffer = self.device.setdefault(name, cuda.DeviceArray()).resize((dtypes.device_nbytes(shape, self.dtypes[name]),), np.uint8)
            context.set_tensor_address(name, buffer.ptr)
        callbacks = [self.listener, *self.allocators.values()]
        self._give_device_memory(context)
        mark = get_logger().logged_errors
        if not context.execute_async_v3(self.stream.ptr):
            raise_pending(*callbacks)  # a callback's exception explains the failure better than TensorRT's log
            # TensorRT logs why (its logger keeps errors rather than printing them: parity_trt._trt.get_logger)
            raise BackendError(f"TensorRT execute_async_v3 failed: {failure_reason(mark)} "
                               "(PARITY_TRT_LOG=verbose shows more)")
        hosts = {}
        for name in self.outputs:
            if name in self.shape_io:
                continue
            if name in static:
                source, shape = self.device[name], static[name]
            else:
                allocator = self.allocators[name]
                source, shape = allocator.buffer, allocator.shape or ()
            nbytes = dtypes.device_nbytes(shape, self.dtypes[name])
            source.shape, source.dtype = (nbytes,), np.dtype(np.uint8)
            host = self.pinned.setdefault(name, cuda.PinnedBuffer()).view((nbytes,), np.uint8)
            source.copy_to(host, self.stream)
            hosts[name] = (host, tuple(shape))
        self.stream.synchronize()
        raise_pending(*callbacks)
        # copies: pinned buffers are reused by the next infer call
        outputs = {name: dtypes.from_device_layout(host, shape, self.dtypes[name]).copy() for name, (host, shape) in hosts.items()}
        for name in self.outputs:
            if name in self.shape_io:
                outputs[name] = self.host_io[name].copy()
        outputs = {name: outputs[name] for name in self.outputs}
        for name, array in self.debug_tensors.items():
            outputs.setdefault(name, array)
        return outputs


    def _give_device_memory(self, context: Any) -> None:
        """``allocation_strategy`` profile: what the active profile needs; runtime: what these input shapes need."""
        if self.allocation_strategy not in ("profile", "runtime") or self.given_context is not None:
            return
        versions.require(import_trt(), "IExecutionContext.set_device_memory", f"--allocation-strategy {self.allocation_strategy}")
        if self.allocation_strategy == "profile":
            size = self.engine.get_device_memory_size_for_profile_v2(context.active_optimization_profile)
        else:
            size = context.update_device_memory_size_for_shapes()
        if self.context_memory is None:
            self.context_memory = cuda.DeviceArray()
        buffer = self.context_memory.resize((max(int(size), 1),), np.uint8)
        context.set_device_memory(buffer.ptr, int(size))


def _fits(shape: tuple[int, ...], lo: tuple[int, ...], hi: tuple[int, ...]) -> bool:
    return len(shape) == len(lo) and all(a <= s <= b for s, a, b in zip(shape, lo, hi))
