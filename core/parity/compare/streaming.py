"""Running several runners over the same data with one loaded at a time (:meth:`Comparator.stream`)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from parity.backend.base import BaseRunner
from parity.data.loader import DataLoader, as_feed
from parity.errors import ParityError
from parity.results.model import IterationResult
from parity.util.memory import frozen_heap
from parity.util.text import unique_labels


def runner_labels(runners: Sequence[BaseRunner]) -> list[str]:
    """The label each runner's results carry: its name, with a ``~N`` suffix where two runners share one
    (``[OnnxrtRunner(a), OnnxrtRunner(b)]`` -> ``onnxrt``, ``onnxrt~1``); the runners are not renamed."""
    return unique_labels(r.name for r in runners)


def stream(
    runners: Sequence[BaseRunner],
    data_loader: Iterable[Mapping[str, np.ndarray]] | None = None,
    on_step: Callable[[int, str], None] | None = None,
) -> Iterator[tuple[int, dict[str, np.ndarray], dict[str, IterationResult]]]:
    """``(index, feed, {label: result})`` per iteration, with one runner loaded at a time: each runner runs
    every iteration and is released (deactivated, its session collected) before the next one loads, so a run
    of two big models holds one of them, never both (Polygraphy's Comparator also runs runner by runner).
    The feeds and the outputs of the runners already done are kept (:class:`_Spill`), and the last runner
    streams: its iteration ``i`` is yielded with everyone's outputs of ``i``. A full disk where they are kept
    is one line, exit 3."""
    labels = runner_labels(runners)
    step = on_step or (lambda index, what: None)
    spill = _Spill()
    # the collection after each runner scans only what the run made: the caller's objects are frozen meanwhile
    with frozen_heap():
        try:
            feeds: list[list[tuple[str, str | None, Any]]] = []
            done: list[list[tuple[float | None, list[tuple[str, str | None, Any]]]]] = []
            for position, (runner, label) in enumerate(zip(runners, labels)):
                last = position == len(runners) - 1
                step(0, f"loading {label}")
                with runner:
                    if position == 0:
                        if data_loader is None:
                            data_loader = DataLoader(runner.get_input_metadata())
                        elif isinstance(data_loader, DataLoader) and not data_loader.input_metadata:
                            data_loader.input_metadata = runner.get_input_metadata()
                        source: Iterable[Any] = (as_feed(item, index) for index, item in enumerate(data_loader))
                    else:
                        source = (spill.get(entries, mapped=False) for entries in feeds)
                    mine = []
                    for index, feed in enumerate(source):
                        if position == 0 and not last:
                            feeds.append(spill.put(feed))
                        step(index, label)
                        outputs = runner.infer(feed)
                        result = IterationResult(outputs, runner.last_inference_time, label)
                        if not last:
                            mine.append((result.runtime, spill.put(result)))
                            del outputs, result
                            continue
                        results = {}
                        for earlier, runs in zip(labels, done):
                            runtime, entries = runs[index]
                            results[earlier] = IterationResult(spill.get(entries), runtime, earlier)
                        results[label] = result
                        yield index, feed, results
                        del outputs, result, results
                    done.append(mine)
                _collect()  # the released session's memory goes back before the next runner loads
        finally:
            spill.close()


def _collect() -> None:
    gc.collect()


class _Spill:
    """Arrays kept between runners (:func:`stream`): in memory up to ``IN_MEMORY`` bytes in all (a small
    model's run pays nothing), then one ``.npy`` file each in a private temporary folder, made when first needed;
    arrays NumPy cannot write without pickling (object dtype) stay in memory."""

    MAP_FROM = 1 << 20  # bytes: larger arrays come back memory-mapped (copy-on-write), smaller ones read
    IN_MEMORY = 256 << 20

    def __init__(self) -> None:
        self._dir: Any = None
        self._count = 0
        self._held = 0

    def put(self, arrays: Mapping[str, Any]) -> list[tuple[str, str | None, Any]]:
        import tempfile  # 4.5 ms at start-up: only outputs over 256 MiB need it, a tiny `parity run` never does

        entries: list[tuple[str, str | None, Any]] = []
        for name, value in arrays.items():
            array = np.asarray(value)
            if array.dtype.hasobject or self._held + array.nbytes <= self.IN_MEMORY:
                self._held += array.nbytes
                entries.append((name, None, value))
                continue
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="parity-run-")
            path = os.path.join(self._dir.name, f"{self._count}.npy")
            self._count += 1
            try:
                np.save(path, array, allow_pickle=False)
            except OSError as exc:
                raise ParityError(f"cannot keep the outputs of a runner while the next one runs: {self._dir.name}: {exc.strerror or exc}") from None
            entries.append((name, path, array.nbytes))
        return entries

    def get(self, entries: Sequence[tuple[str, str | None, Any]], mapped: bool = True) -> dict[str, Any]:
        out = {}
        for name, path, kept in entries:
            if path is None:
                out[name] = kept
            elif mapped and kept >= self.MAP_FROM:
                out[name] = np.asarray(np.load(path, mmap_mode="c", allow_pickle=False))
            else:
                out[name] = np.load(path, allow_pickle=False)
        return out

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
