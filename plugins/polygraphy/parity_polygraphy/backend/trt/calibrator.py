"""``Calibrator``: Polygraphy's INT8 calibrator factory. It feeds batches from a data loader to TensorRT (copied to
device memory with :mod:`parity_polygraphy.cuda`) and reads/writes the calibration cache."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from typing import Any

from parity_trt.api import import_trt, unavailable

from parity_polygraphy import cuda
from parity_polygraphy.backend.base.util import check_inputs
from parity_polygraphy.datatype import DataType
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.logger import G_LOGGER
from parity_polygraphy.util import array
from parity_polygraphy.util.util import is_file_like, load_file, save_file

_CALIBRATION_DTYPES = ("float32", "int32", "int64", "bool")  # TensorRT wants other (non-index) inputs as float32


def _device_pointer(value: Any, name: str, device_buffers: dict[str, cuda.DeviceArray]) -> int:
    """The device address of one calibration input: an int is a pointer already, a DeviceView or CUDA torch
    tensor is used in place, host data is copied into this input's reused DeviceArray."""
    if isinstance(value, int):
        return value
    if isinstance(value, cuda.DeviceView):
        return value.ptr
    if array.is_torch(value) and array.is_on_gpu(value):
        return int(value.data_ptr())
    host = array.make_contiguous(value)
    buffer = device_buffers.get(name)
    if buffer is None:
        buffer = device_buffers[name] = cuda.DeviceArray(dtype=array.dtype(host))
    buffer.dtype = array.dtype(host)
    buffer.resize(array.shape(host))
    buffer.copy_from(host)
    return buffer.ptr


def _cache_size(cache: Any) -> int:
    if is_file_like(cache):
        position = cache.tell()
        size = cache.seek(0, os.SEEK_END)
        cache.seek(position)
        return size
    return os.path.getsize(cache) if os.path.exists(cache) else 0


def Calibrator(  # noqa: N802 - Polygraphy's name: a function that returns a calibrator instance
    data_loader: Iterable[Mapping[str, Any]],
    cache: Any = None,
    BaseClass: type | None = None,  # noqa: N803
    batch_size: int | None = None,
    quantile: float | None = None,
    regression_cutoff: float | None = None,
    algo: Any = None,
) -> Any:
    """A TensorRT INT8 calibrator (an instance of a subclass of ``BaseClass``, default
    ``trt.IInt8EntropyCalibrator2``) fed by ``data_loader`` (each item maps input names to NumPy arrays, torch
    tensors, ``cuda.DeviceView``s or device pointers; one item per batch). ``cache``: a path or file-like object
    the calibration cache is read from (when not empty) and written to. ``quantile``/``regression_cutoff``
    (default 0.5) are for ``IInt8LegacyCalibrator``, ``algo`` for a direct ``IInt8Calibrator`` subclass."""
    trt = import_trt()
    base = getattr(trt, "IInt8EntropyCalibrator2", None) if BaseClass is None else BaseClass
    if base is None:
        raise PolygraphyException(str(unavailable(trt, "IInt8EntropyCalibrator2", "Calibrator")))  # the CLI's words: removed in 11

    class CalibratorClass(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            base.__init__(self)  # TensorRT's trampoline classes must be initialised explicitly
            self.data_loader = data_loader
            self._cache = cache
            self.device_buffers: dict[str, cuda.DeviceArray] = {}
            self.input_metadata: Any = None
            self.batch_size = 1 if batch_size is None else batch_size
            self.is_polygraphy_calibrator = True
            self.make_func = Calibrator
            self.reset()

        def set_input_metadata(self, input_metadata: Any) -> None:
            """Input names, types and shapes: passed on to the data loader (``input_metadata``) and used to check
            each batch. Non-index inputs are expected as float32, as TensorRT calibrates them."""
            metadata = copy.deepcopy(input_metadata)
            for name, meta in metadata.items():
                if meta.dtype is not None and getattr(meta.dtype, "name", None) not in _CALIBRATION_DTYPES:
                    G_LOGGER.warning(f"TensorRT calibrates non-index inputs in float32: input {name} ({meta.dtype}) is expected as float32 by the calibrator.")
                    meta.dtype = DataType.FLOAT32
            self.input_metadata = metadata
            try:
                self.data_loader.input_metadata = metadata
            except AttributeError:  # a list or generator: nothing to tell
                pass

        def reset(self) -> None:
            """Rewind the data loader (generators cannot rewind) and look at the cache again."""
            self.data_loader_iter = iter(self.data_loader)
            self.num_batches = 0
            self.cache_contents: bytes | None = None

        def get_batch_size(self) -> int:
            return self.batch_size

        def get_batch(self, names: list[str]) -> list[int] | None:
            try:
                batch = next(self.data_loader_iter)
            except StopIteration:
                if not self.num_batches:
                    G_LOGGER.error("Calibrator data loader provided no data (empty, or a generator used a second time).")
                self.free()
                return None
            self.num_batches += 1
            try:
                if self.input_metadata is not None:
                    check_inputs(batch, self.input_metadata)
                return [_device_pointer(batch[name], name, self.device_buffers) for name in names]
            except (PolygraphyException, KeyError) as exc:
                # TensorRT would swallow an exception here: say what was wrong and end calibration instead
                G_LOGGER.error(f"Calibrator: bad calibration batch {self.num_batches}: {exc}")
                self.free()
                return None

        def read_calibration_cache(self) -> bytes | None:
            if self.cache_contents is not None:
                return self.cache_contents
            if self._cache is None or not _cache_size(self._cache):
                if self._cache is not None:
                    G_LOGGER.warning("Calibration cache was provided, but is empty. Will regenerate scales by running calibration.")
                return None
            try:
                if is_file_like(self._cache):
                    self._cache.seek(0)
                contents = load_file(self._cache, description="calibration cache")
            except Exception as exc:  # noqa: BLE001 - an unreadable cache means calibrating again, as in Polygraphy
                G_LOGGER.error(f"Could not read from calibration cache: {self._cache}: {exc}")
                return None
            self.cache_contents = bytes(contents) or None
            return self.cache_contents

        def write_calibration_cache(self, contents: Any) -> None:
            self.cache_contents = bytes(contents)
            if self._cache is None:
                return
            try:
                save_file(self.cache_contents, self._cache, description="calibration cache")
            except Exception as exc:  # noqa: BLE001 - TensorRT calls this from C++: report, never raise
                G_LOGGER.error(f"Could not write to calibration cache: {self._cache}: {exc}")

        def free(self) -> None:
            """Free the device buffers this calibrator allocated."""
            for buffer in self.device_buffers.values():
                buffer.free()
            self.device_buffers.clear()

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: object) -> None:
            self.free()

        if base is getattr(trt, "IInt8LegacyCalibrator", None):

            def get_quantile(self) -> float:
                return 0.5 if quantile is None else quantile

            def get_regression_cutoff(self) -> float:
                return 0.5 if regression_cutoff is None else regression_cutoff

            def read_histogram_cache(self, length: int) -> None:
                return None

            def write_histogram_cache(self, ptr: int, length: int) -> None:
                return None

        if base is getattr(trt, "IInt8Calibrator", None):

            def get_algorithm(self) -> Any:
                return trt.CalibrationAlgoType.ENTROPY_CALIBRATION_2 if algo is None else algo

        def __repr__(self) -> str:
            return f"Calibrator({data_loader!r}, cache={cache!r}, BaseClass={BaseClass!r})"

    return CalibratorClass()
