"""Int8 entropy calibration for TensorRT 10 (TensorRT 11 removed implicit quantization).

``Calibrator(data, cache=path)`` returns an ``IInt8EntropyCalibrator2`` that feeds each item of ``data``
(feed dicts) through device buffers it owns, and reads/writes the calibration cache file so a later build
skips calibration.

Each feed is checked against the network's inputs (:func:`expect_network_inputs`, called by the engine loader
before the build) before anything is copied to the device: a wrong dtype or shape is a one-line :class:`UsageError`
naming the input. TensorRT swallows exceptions raised in ``get_batch`` (pyInt8.cpp logs them and ends
calibration), so they are kept (``parity_trt.callbacks``) and raised by the engine loader after the build.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parity.errors import UsageError
from parity.util.fs import write_bytes_atomic
from parity_trt import versions
from parity_trt._trt import import_trt
from parity_trt.callbacks import guard


def check_feed(feed: Mapping[str, Any], names: Iterable[str],
               expected: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    """The arrays for ``names`` from one calibration feed, refused unless dtype and shape match the network.

    ``expected`` maps an input to its NumPy dtype and shape (``-1`` for a dynamic dimension); inputs it lacks
    are not checked.
    """
    arrays = {}
    for name in names:
        if name not in feed:
            raise UsageError(f"calibration data has no input '{name}' (it has {', '.join(feed) or 'none'})")
        array = np.asarray(feed[name])
        if name in expected:
            dtype, shape = expected[name]
            if array.dtype != dtype:
                raise UsageError(f"calibration data for input '{name}' has dtype {array.dtype}, but the network expects {np.dtype(dtype)}")
            if len(array.shape) != len(shape) or any(d >= 0 and d != s for s, d in zip(array.shape, shape)):
                want = [d if d >= 0 else "?" for d in shape]
                raise UsageError(f"calibration data for input '{name}' has shape {list(array.shape)}, but the network expects {want}")
        arrays[name] = array
    return arrays


def expect_network_inputs(calibrator: Any, expected: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> bool:
    """Tell a Parity calibrator the network's ``{input: (dtype, shape)}``; False for any other calibrator."""
    setter = getattr(calibrator, "_set_network_inputs", None)
    if setter is None:
        return False
    setter(expected)
    return True


def Calibrator(data: Iterable[Mapping[str, np.ndarray]] | None, cache: str | None = None) -> Any:  # noqa: N802 - a class factory
    trt = import_trt()
    versions.require(trt, "IInt8EntropyCalibrator2", "--int8 calibration")

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self._data = iter(data) if data is not None else iter(())
            self._cache = cache
            self._buffers: dict[str, Any] = {}
            self._expected: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
            self.batches = 0

        def _set_network_inputs(self, expected: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> None:
            """``{input: (dtype, shape)}`` of the network being calibrated; feeds are checked against it."""
            self._expected = {n: (np.dtype(d), tuple(int(x) for x in s)) for n, (d, s) in expected.items()}

        def get_batch_size(self) -> int:
            return 1  # explicit-batch networks: the batch is part of each input's shape

        # pyInt8.cpp (v10.0.1..v10.8.0, getBatch): an exception is logged and false returned (calibration ends)
        @guard("the int8 calibrator's get_batch")
        def get_batch(self, names: list[str]) -> list[int] | None:
            from parity_trt.cuda import DeviceArray

            try:
                feed = next(self._data)
            except StopIteration:
                return None
            arrays = check_feed(feed, names, self._expected)  # before anything reaches the device
            pointers = []
            for name in names:
                buffer = self._buffers.setdefault(name, DeviceArray())
                pointers.append(buffer.copy_from(arrays[name]).ptr)
            self.batches += 1
            return pointers

        @guard("the int8 calibrator's read_calibration_cache")
        def read_calibration_cache(self) -> bytes | None:
            if self._cache and Path(self._cache).is_file():
                return Path(self._cache).read_bytes()
            return None

        @guard("the int8 calibrator's write_calibration_cache")
        def write_calibration_cache(self, cache: Any) -> None:
            if self._cache:
                write_bytes_atomic(self._cache, bytes(cache))

        def _free(self) -> None:
            for buffer in self._buffers.values():
                buffer.free()
            self._buffers.clear()

    return EntropyCalibrator()
