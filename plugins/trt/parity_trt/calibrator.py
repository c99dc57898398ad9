"""Int8 entropy calibration for TensorRT 10 (TensorRT 11 removed implicit quantization).

``Calibrator(data, cache=path_or_file)`` (or Polygraphy's ``Calibrator(data_loader=..., cache=...)``) returns an
``IInt8EntropyCalibrator2`` that feeds each item of ``data``
(feed dicts) through device buffers it owns, and reads/writes the calibration cache (a path, or a binary
file-like object) so a later build skips calibration. ``data`` may be ``None`` to use the cache only.

What a build sees (TensorRT calls the methods; pyInt8.cpp@v10.7.0 is the protocol):

- ``read_calibration_cache`` first: the cache's bytes when the file exists and is not empty, else the cache this
  calibrator wrote in an earlier build (so a calibrator used twice calibrates once), else ``None``. Each build
  starts here, so the data is iterated afresh per build (a list can be reused; a generator cannot rewind).
- ``get_batch`` only when TensorRT has no usable cache. Each feed is checked against the network's inputs before
  anything is copied to the device: the dtype TensorRT READS (float32 for every input that is not
  FLOAT/INT32/INT64/BOOL: half, bf16, fp8 and int8 inputs included; feeds of the input's own type are converted)
  and the shape it reads (a dynamic input's shape is the calibration profile's OPT shape, set by
  :class:`~parity_trt.config.CreateConfig`; "MIN and MAX values will be overwritten by kOPT", NvInfer.h@v10.7.0:
  L9244-9252). A wrong dtype or shape is a one-line :class:`UsageError` naming the input. With no data to give, the
  error says why the cache could not be used (missing, empty, or not accepted by TensorRT).
- The device buffers are freed when the data ends or fails (the last batch has been read by then), and by
  ``with Calibrator(...) as calibrator:`` at the end of the block.
- ``write_calibration_cache`` writes the cache only after a calibration that did not fail: TensorRT ends
  calibration early when ``get_batch`` fails and would still hand over scales from the batches so far; they are
  dropped, and an existing cache file is left as it was.

TensorRT swallows exceptions raised in these methods (pyInt8.cpp logs them), so they are kept
(``parity_trt.callbacks``) and raised by the engine loader after the build.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from parity.api import UsageError, write_bytes_atomic
from parity_trt import versions
from parity_trt._trt import import_trt
from parity_trt.callbacks import guard, pending

# Inputs TensorRT reads calibration data for in their own type; every other input's batches are read as float32
# (Polygraphy 0.53.6 backend/trt/calibrator.py, set_input_metadata: "TensorRT requires non-index calibration
# inputs to be provided in float32").
_READ_AS_IS = frozenset(np.dtype(t) for t in (np.float32, np.int32, np.int64, np.bool_))


def calibration_dtype(dtype: Any) -> np.dtype:
    """The host dtype TensorRT reads an input's calibration batches as, given the input's host dtype."""
    dtype = np.dtype(dtype)
    return dtype if dtype in _READ_AS_IS else np.dtype(np.float32)


def _shape_text(shape: tuple[int, ...]) -> list[Any]:
    return [d if d >= 0 else "?" for d in shape]


def check_feed(feed: Mapping[str, Any], names: Iterable[str],
               expected: Mapping[str, tuple[np.dtype, tuple[int, ...]]],
               opt_shapes: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """The arrays TensorRT reads for ``names`` from one calibration feed, refused unless dtype and shape match.

    ``expected`` maps an input to the network's host dtype and shape (``-1`` for a dynamic dimension); inputs it
    lacks are not checked. A feed may hold the network's dtype or the dtype TensorRT reads
    (:func:`calibration_dtype`); it is converted to the latter. ``opt_shapes`` gives the shape TensorRT reads for
    dynamic inputs (the calibration profile's OPT); without one a dynamic dimension takes any size.
    """
    opt_shapes = opt_shapes or {}
    arrays = {}
    for name in names:
        if name not in feed:
            raise UsageError(f"calibration data has no input '{name}' (it has {', '.join(feed) or 'none'})")
        array = np.asarray(feed[name])
        if name in expected:
            dtype, shape = expected[name]
            read_as = calibration_dtype(dtype)
            if array.dtype not in (dtype, read_as):
                also = f" (TensorRT reads its calibration data as {read_as}; {read_as} is accepted too)" if read_as != dtype else ""
                raise UsageError(f"calibration data for input '{name}' has dtype {array.dtype}, but the network expects {np.dtype(dtype)}{also}")
            opt = opt_shapes.get(name) if any(d < 0 for d in shape) else None
            if opt is not None:
                if tuple(array.shape) != tuple(opt):
                    raise UsageError(
                        f"calibration data for input '{name}' has shape {list(array.shape)}, but TensorRT calibrates it "
                        f"at the calibration profile's OPT shape {list(opt)} (the network has {_shape_text(shape)})"
                    )
            elif len(array.shape) != len(shape) or any(d >= 0 and d != s for s, d in zip(array.shape, shape)):
                raise UsageError(f"calibration data for input '{name}' has shape {list(array.shape)}, but the network expects {_shape_text(shape)}")
            array = array.astype(read_as, copy=False)
        arrays[name] = array
    return arrays


def expect_network_inputs(calibrator: Any, expected: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> bool:
    """Tell a Parity calibrator the network's ``{input: (dtype, shape)}``; False for any other calibrator."""
    setter = getattr(calibrator, "_set_network_inputs", None)
    if setter is None:
        return False
    setter(expected)
    return True


def expect_calibration_shapes(calibrator: Any, opt_shapes: Mapping[str, tuple[int, ...]]) -> bool:
    """Tell a Parity calibrator the calibration profile's OPT shape per input; False for any other calibrator."""
    setter = getattr(calibrator, "_set_calibration_shapes", None)
    if setter is None:
        return False
    setter(opt_shapes)
    return True


def _describe(cache: Any) -> str:
    return f"'{cache}'" if isinstance(cache, (str, Path)) else "(the file object given)"


_UNSET: Any = object()  # no data given (``None`` is data too: calibrate from the cache only)

CalibrationData = Iterable[Mapping[str, np.ndarray]] | Callable[[Mapping[str, tuple[np.dtype, tuple[int, ...]]]], Iterable[Mapping[str, np.ndarray]]] | None


BASE_CLASSES = ("IInt8EntropyCalibrator2", "IInt8EntropyCalibrator", "IInt8MinMaxCalibrator", "IInt8LegacyCalibrator")


def Calibrator(data: CalibrationData = _UNSET, cache: Any = None, *, data_loader: CalibrationData = _UNSET,  # noqa: N802 - a class factory
               base_class: str = "IInt8EntropyCalibrator2", quantile: float | None = None, regression_cutoff: float | None = None) -> Any:
    """An int8 entropy calibrator. ``data``: feeds, or a function of the network's ``{input: (dtype, shape)}``
    (the calibration profile's OPT shape for dynamic inputs) returning feeds, called when calibration starts;
    ``None`` with a ``cache`` that TensorRT accepts. ``cache``: a path or a binary file object.

    ``data_loader=`` is Polygraphy's name for ``data`` (``Calibrator(data_loader=feeds(), cache="x.cache")``); give one
    of the two. ``base_class``: the TensorRT calibrator it subclasses (``--calibration-base-class``, one of
    ``BASE_CLASSES``); ``quantile``/``regression_cutoff``: IInt8LegacyCalibrator's (TensorRT's defaults 0.5 and 1.0)."""
    if data is not _UNSET and data_loader is not _UNSET:
        raise TypeError("Calibrator() takes data or data_loader (the same argument), not both")
    if data is _UNSET and data_loader is _UNSET:
        raise TypeError("Calibrator() needs the calibration data: Calibrator(data) or Calibrator(data_loader=...) "
                        "(None to calibrate from the cache only)")
    data = data_loader if data is _UNSET else data
    trt = import_trt()
    versions.require(trt, "IInt8EntropyCalibrator2", "--int8 calibration")
    names = {n.lower(): n for n in BASE_CLASSES}
    if base_class.lower() not in names:
        raise UsageError(f"--calibration-base-class: '{base_class}' is not a TensorRT calibrator; choices: {', '.join(BASE_CLASSES)}")
    base = versions.require(trt, names[base_class.lower()], "--calibration-base-class")

    class EntropyCalibrator(base):  # type: ignore[valid-type,misc]
        def __init__(self) -> None:
            base.__init__(self)
            self._data = data
            self._iterator: Any = None
            self._cache = str(cache) if isinstance(cache, Path) else cache
            self._cache_state = "none"  # what read_calibration_cache found: none, missing, empty, read, memory
            self._written: bytes | None = None  # the cache this calibrator wrote (reused by a later build)
            self._buffers: dict[str, Any] = {}
            self._expected: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
            self._opt_shapes: dict[str, tuple[int, ...]] = {}
            self.batches = 0

        def _set_network_inputs(self, expected: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> None:
            """``{input: (dtype, shape)}`` of the network being calibrated; feeds are checked against it."""
            self._expected = {n: (np.dtype(d), tuple(int(x) for x in s)) for n, (d, s) in expected.items()}

        def _set_calibration_shapes(self, opt_shapes: Mapping[str, tuple[int, ...]]) -> None:
            """The calibration profile's OPT shape per input: what TensorRT reads for a dynamic input."""
            self._opt_shapes = {n: tuple(int(x) for x in s) for n, s in opt_shapes.items()}

        def _reset(self) -> None:
            """Forget the cache this calibrator wrote, so the next build calibrates again (from ``data`` anew)."""
            self._written = None
            self._iterator = None

        def get_batch_size(self) -> int:
            return 1  # explicit-batch networks: the batch is part of each input's shape

        # pyInt8.cpp (v10.0.1..v10.8.0, getBatch): an exception is logged and false returned (calibration ends)
        @guard("the int8 calibrator's get_batch")
        def get_batch(self, names: list[str]) -> list[int] | None:
            try:
                pointers = self._next_batch(names)
            except BaseException:
                self._free()
                raise
            if pointers is None:
                self._free()  # TensorRT has read the last batch: it asks for the next one only when done with it
            return pointers

        def _next_batch(self, names: list[str]) -> list[int] | None:
            from parity_trt.cuda import DeviceArray

            if self._data is None:
                raise UsageError(self._no_data())
            if self._iterator is None:
                inputs = {n: (d, self._opt_shapes.get(n, s)) for n, (d, s) in self._expected.items()}
                self._iterator = iter(self._data(inputs) if callable(self._data) else self._data)
            try:
                feed = next(self._iterator)
            except StopIteration:
                if not self.batches:
                    raise UsageError(
                        "int8 calibration got no batches: the calibration data is empty (a generator can be "
                        "iterated only once; give a list, or a new Calibrator, to calibrate again)"
                    ) from None
                return None
            arrays = check_feed(feed, names, self._expected, self._opt_shapes)  # before anything reaches the device
            pointers = []
            for name in names:
                buffer = self._buffers.setdefault(name, DeviceArray())
                pointers.append(buffer.copy_from(arrays[name]).ptr)
            self.batches += 1
            return pointers

        def _no_data(self) -> str:
            where = _describe(self._cache)
            why = {
                "missing": f"the calibration cache {where} does not exist",
                "empty": f"the calibration cache {where} is empty",
                "read": f"TensorRT did not accept the calibration cache {where} (made by another TensorRT version "
                        "or calibration algorithm?)",
                "memory": "TensorRT did not accept the calibration cache from the last calibration",
            }.get(self._cache_state, "no calibration cache was given")
            return f"int8 calibration needs data: {why} and no calibration data was given (--data-loader-script or --load-inputs)"

        @guard("the int8 calibrator's read_calibration_cache")
        def read_calibration_cache(self) -> bytes | None:
            # each build starts here: calibrate from the data anew, and forget an earlier build's failure count
            self._iterator, self.batches = None, 0
            found = self._read_cache()
            if found:
                return found
            if self._written:
                self._cache_state = "memory"
                return self._written
            return None

        def _read_cache(self) -> bytes | None:
            target = self._cache
            if target is None:
                self._cache_state = "none"
                return None
            if hasattr(target, "read"):
                try:
                    target.seek(0)
                    found = bytes(target.read())
                except OSError as exc:
                    raise UsageError(f"cannot read the calibration cache {_describe(target)}: {exc}") from None
            else:
                path = Path(target)
                if not path.exists():
                    self._cache_state = "missing"
                    return None
                try:
                    found = path.read_bytes()
                except OSError as exc:
                    raise UsageError(f"cannot read the calibration cache {_describe(target)}: {exc.strerror or exc}") from None
            self._cache_state = "read" if found else "empty"
            return found or None

        @guard("the int8 calibrator's write_calibration_cache")
        def write_calibration_cache(self, cache: Any) -> None:
            if pending(self) is not None:
                return  # a failed calibration's scales: never cached, and an existing cache is left untouched
            data = memoryview(cache).tobytes()
            self._written = data
            target = self._cache
            if target is None:
                return
            try:
                if hasattr(target, "write"):
                    target.seek(0)
                    target.truncate()
                    target.write(data)
                    target.flush()
                else:
                    write_bytes_atomic(target, data)
            except OSError as exc:
                raise UsageError(f"cannot write the calibration cache {_describe(target)}: {exc.strerror or exc}") from None

        # (private names: a public method on a TensorRT subclass must be a TensorRT override; see conformance.py)
        def _free(self) -> None:
            """Free the device buffers that held calibration batches."""
            for buffer in self._buffers.values():
                buffer.free()
            self._buffers.clear()

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: object) -> None:
            self._free()

    if base is not trt.IInt8LegacyCalibrator:
        return EntropyCalibrator()

    class LegacyCalibrator(EntropyCalibrator):
        # IInt8LegacyCalibrator's parameters (NvInfer.h@v10.7.0 IInt8LegacyCalibrator: getQuantile, getRegressionCutoff,
        # and its histogram cache, kept in memory only)
        def get_quantile(self) -> float:
            return 0.5 if quantile is None else float(quantile)

        def get_regression_cutoff(self) -> float:
            return 1.0 if regression_cutoff is None else float(regression_cutoff)

        def read_histogram_cache(self, length: int) -> bytes | None:
            return self._histogram

        def write_histogram_cache(self, data: Any, length: int) -> None:
            self._histogram = memoryview(data).tobytes()

    calibrator = LegacyCalibrator()
    calibrator._histogram = None
    return calibrator
