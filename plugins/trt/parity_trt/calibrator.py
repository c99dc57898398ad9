"""Int8 entropy calibration for TensorRT 10 (TensorRT 11 removed implicit quantization).

``Calibrator(data, cache=path)`` returns an ``IInt8EntropyCalibrator2`` that feeds each item of ``data``
(feed dicts) through device buffers it owns, and reads/writes the calibration cache file so a later build
skips calibration.
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


def Calibrator(data: Iterable[Mapping[str, np.ndarray]] | None, cache: str | None = None) -> Any:  # noqa: N802 - a class factory
    trt = import_trt()
    versions.require(trt, "IInt8EntropyCalibrator2", "--int8 calibration")

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self._data = iter(data) if data is not None else iter(())
            self._cache = cache
            self._buffers: dict[str, Any] = {}
            self.batches = 0

        def get_batch_size(self) -> int:
            return 1  # explicit-batch networks: the batch is part of each input's shape

        def get_batch(self, names: list[str]) -> list[int] | None:
            from parity_trt.cuda import DeviceArray

            try:
                feed = next(self._data)
            except StopIteration:
                return None
            pointers = []
            for name in names:
                if name not in feed:
                    raise UsageError(f"calibration data has no input '{name}' (it has {', '.join(feed)})")
                buffer = self._buffers.setdefault(name, DeviceArray())
                pointers.append(buffer.copy_from(np.asarray(feed[name])).ptr)
            self.batches += 1
            return pointers

        def read_calibration_cache(self) -> bytes | None:
            if self._cache and Path(self._cache).is_file():
                return Path(self._cache).read_bytes()
            return None

        def write_calibration_cache(self, cache: Any) -> None:
            if self._cache:
                write_bytes_atomic(self._cache, bytes(cache))

        def _free(self) -> None:
            for buffer in self._buffers.values():
                buffer.free()
            self._buffers.clear()

    return EntropyCalibrator()
