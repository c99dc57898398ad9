"""Polygraphy's result containers (``polygraphy.comparator.struct``): ``IterationResult``, ``RunResults``,
``AccuracyResult`` and ``LazyArray``, with Polygraphy's shapes and methods.

``RunResults`` is Polygraphy's list of ``(runner_name, [IterationResult, ...])`` pairs with dict-like helpers;
its files are written and read by Parity's engine (:func:`parity.api.save_results`, atomic, Polygraphy's JSON
format for a ``.json`` path) and it converts to and from Parity's own :class:`parity.api.RunResults`.
"""

from __future__ import annotations

import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np

from parity import api as parity_api
from parity_polygraphy import config
from parity_polygraphy.exception import PolygraphyException
from parity_polygraphy.json import Decoder, Encoder, from_json, load_json, save_json, to_json

__all__ = ["LazyArray", "IterationResult", "RunResults", "AccuracyResult", "AccuracyResults"]

DEFAULT_RUNNER_NAME = "custom_runner"


def _swap_threshold_mb() -> int:
    """``POLYGRAPHY_ARRAY_SWAP_THRESHOLD_MB`` (Polygraphy's ``config.ARRAY_SWAP_THRESHOLD_MB``); -1: never swap."""
    return int(config.ARRAY_SWAP_THRESHOLD_MB)  # read each time: scripts and tests set it at run time


def _nbytes(arr: Any) -> int:
    if hasattr(arr, "nbytes"):
        return int(arr.nbytes)
    return int(arr.element_size() * arr.nelement())  # a torch tensor


class LazyArray:
    """An array kept in memory, or swapped to a temporary ``.npy`` file when it is larger than
    ``ARRAY_SWAP_THRESHOLD_MB`` (then ``arr`` is None and ``tmpfile`` names the file)."""

    def __init__(self, arr: Any) -> None:
        self.arr = None
        self.tmpfile = None
        threshold = _swap_threshold_mb()
        if threshold >= 0 and _nbytes(arr) > (threshold << 20):
            self.tmpfile = tempfile.NamedTemporaryFile(suffix=".npy")  # noqa: SIM115 - lives as long as this object; deleted with it
            self._torch = not isinstance(arr, np.ndarray)
            np.save(self.tmpfile, arr.numpy() if self._torch else arr, allow_pickle=False)
            self.tmpfile.flush()
        else:
            self.arr = arr

    def load(self) -> Any:
        """The array, read back from the temporary file when it was swapped out."""
        if self.arr is not None:
            return self.arr
        arr = np.load(self.tmpfile.name, allow_pickle=False)
        if self._torch:
            import torch

            return torch.from_numpy(arr)
        return arr


def _lazy(value: Any) -> LazyArray:
    return value if isinstance(value, LazyArray) else LazyArray(value)


def _arrays_equal(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a, b))


class IterationResult(MutableMapping):
    """One inference: output names mapped to arrays (in the runner's output order), with the ``runner_name``
    (default ``"custom_runner"``) and the ``runtime`` in seconds. Arrays are held as :class:`LazyArray` in ``dct``;
    indexing returns the arrays themselves."""

    def __init__(self, outputs: Mapping[str, Any] | None = None, runtime: float | None = None, runner_name: str | None = None) -> None:
        self.dct: OrderedDict[str, LazyArray] = OrderedDict((name, _lazy(arr)) for name, arr in (outputs or {}).items())
        self.runtime = runtime
        self.runner_name = DEFAULT_RUNNER_NAME if runner_name is None else runner_name

    def __getitem__(self, name: str) -> Any:
        return self.dct[name].load()

    def __setitem__(self, name: str, arr: Any) -> None:
        self.dct[name] = _lazy(arr)

    def __delitem__(self, name: str) -> None:
        del self.dct[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.dct)

    def __len__(self) -> int:
        return len(self.dct)

    def __contains__(self, name: object) -> bool:
        return name in self.dct

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IterationResult):
            return NotImplemented
        if self.runtime != other.runtime or self.runner_name != other.runner_name:
            return False
        return all(name in other and _arrays_equal(arr, other[name]) for name, arr in self.items())

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return f"IterationResult(runner_name={self.runner_name!r}, runtime={self.runtime!r}, outputs={list(self.dct)})"

    def to_parity(self) -> parity_api.IterationResult:
        """Parity's own :class:`parity.api.IterationResult` with the same arrays."""
        return parity_api.IterationResult({name: np.asarray(arr) for name, arr in self.items()}, self.runtime, self.runner_name)

    @classmethod
    def from_parity(cls, result: Mapping[str, Any]) -> IterationResult:
        return cls(dict(result), getattr(result, "runtime", None), getattr(result, "runner_name", None))


class RunResults:
    """Polygraphy's ``RunResults``: a list (``lst``) of ``(runner_name, [IterationResult, ...])`` pairs that can
    also be used like an ordered dict of runner names (which may repeat). ``results["trt-runner"][0]["out"]``.
    Like Polygraphy's, it is not a ``list`` subclass (so JSON encodes it as a ``RunResults``)."""

    def __init__(self, lst: Iterable[tuple[str, list[IterationResult]]] | None = None) -> None:
        self.lst: list[tuple[str, list[IterationResult]]] = list(lst or [])

    def __iter__(self) -> Iterator[tuple[str, list[IterationResult]]]:
        return iter(self.lst)

    def __len__(self) -> int:
        return len(self.lst)

    def append(self, item: tuple[str, list[IterationResult]]) -> None:
        self.lst.append(item)

    def extend(self, items: Iterable[tuple[str, list[IterationResult]]]) -> None:
        self.lst.extend(items)

    def items(self) -> Iterator[tuple[str, list[IterationResult]]]:
        yield from self.lst

    def keys(self) -> Iterator[str]:
        for name, _ in self.items():
            yield name

    def values(self) -> Iterator[list[IterationResult]]:
        for _, iteration_results in self.items():
            yield iteration_results

    def update(self, other: Mapping[str, list[IterationResult]] | RunResults) -> RunResults:
        for name, iteration_results in other.items():
            self[name] = iteration_results
        return self

    def add(self, out_list: Iterable[Mapping[str, Any]], runtime: float | None = None, runner_name: str | None = None) -> None:
        """Wrap each output dict as an :class:`IterationResult` of ``runner_name`` (default ``"custom_runner"``)."""
        runner_name = DEFAULT_RUNNER_NAME if runner_name is None else runner_name
        self[runner_name] = [IterationResult(out, runtime, runner_name) for out in out_list]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, slice)):
            return self.lst[key]
        for name, iteration_results in self.items():
            if name == key:
                return iteration_results
        raise PolygraphyException(f"{key!s:35} does not exist in this RunResults instance. Note: Available runners: {list(self.keys())}")

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, slice)):
            self.lst[key] = value
            return
        for index, name in enumerate(self.keys()):
            if name == key:
                self.lst[index] = (key, value)
                return
        self.append((key, value))

    def __contains__(self, val: object) -> bool:
        if isinstance(val, (str, bytes)):
            return val in list(self.keys())
        return val in self.lst

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunResults):
            return NotImplemented
        return len(self) == len(other) and all(r0 == r1 and list(i0) == list(i1) for (r0, i0), (r1, i1) in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def split(self) -> Iterator[RunResults]:
        """One single-iteration ``RunResults`` per iteration (runners with fewer iterations drop out)."""
        for index in range(max((len(its) for its in self.values()), default=0)):
            yield RunResults([(name, [its[index]]) for name, its in self.items() if index < len(its)])

    @staticmethod
    def concat(runs: Iterable[RunResults]) -> RunResults:
        """The iterations of ``runs`` (e.g. :meth:`split`'s) joined per runner, in order: :meth:`split` undone."""
        merged = RunResults()
        for run in runs:
            for name, its in run.items():
                if name in merged:
                    merged[name].extend(its)
                else:
                    merged.append((name, list(its)))
        return merged

    def __add__(self, other: Iterable) -> RunResults:
        return RunResults([*self, *other])

    def __repr__(self) -> str:
        return "RunResults(" + ", ".join(f"{name}: {len(its)} iteration(s)" for name, its in self.items()) + ")"

    # Parity's engine ------------------------------------------------------------------------------------
    def to_parity(self) -> parity_api.RunResults:
        """Parity's :class:`parity.api.RunResults` (what ``parity.api`` functions take) with the same arrays."""
        return parity_api.RunResults([(name, [_as_iteration(it, name).to_parity() for it in its]) for name, its in self.items()])

    @classmethod
    def from_parity(cls, results: Iterable[tuple[str, Iterable[Mapping[str, Any]]]]) -> RunResults:
        return cls([(name, [IterationResult.from_parity(it) for it in its]) for name, its in results])

    # JSON (Polygraphy's add_json_methods) --------------------------------------------------------------
    def to_json(self) -> str:
        return to_json(self)

    @classmethod
    def from_json(cls, src: str) -> RunResults:
        return _checked(from_json(src), cls)

    def save(self, dest: Any) -> None:
        """Write these results as Polygraphy's JSON, atomically: a ``.json`` path through Parity's streaming
        writer, any other path or an open file through :func:`parity_polygraphy.json.save_json` (Polygraphy
        writes JSON whatever the extension; Parity's writer would pick its archive)."""
        if not hasattr(dest, "write") and os.fspath(dest).endswith(".json"):
            parity_api.save_results(self.to_parity(), os.fspath(dest))
            return
        save_json(self, dest, description="inference results")

    @classmethod
    def load(cls, src: Any) -> RunResults:
        """Read results saved by :meth:`save`, by Polygraphy, or by ``parity run --save-outputs``."""
        if hasattr(src, "read"):  # from the file's start, as Polygraphy reads (a file just saved to is at its end)
            return _checked(load_json(src, description="inference results"), cls)
        return cls.from_parity(parity_api.load_results(os.fspath(src)))


def _as_iteration(value: Any, runner_name: str) -> IterationResult:
    return value if isinstance(value, IterationResult) else IterationResult(value, runner_name=runner_name)


def _checked(obj: Any, cls: type) -> Any:
    if isinstance(obj, cls):
        return obj
    raise PolygraphyException(f"Provided JSON cannot be decoded into a {cls.__name__}.\nNote: JSON was decoded into a {type(obj)}")


class AccuracyResult(OrderedDict):
    """``{(runner0, runner1): [{output name: result, ...} per iteration]}``; truthy iff every output of every
    iteration matched, or with ``aggregation="average"`` (``compare_accuracy(check_average=True)``) iff every
    output's statistics averaged over the iterations pass (:meth:`average_results`)."""

    def __init__(self, dct: Mapping | None = None, aggregation: str = "per_sample") -> None:
        super().__init__(dct or {})
        self.aggregation = aggregation

    @property
    def dct(self) -> AccuracyResult:
        return self

    def __bool__(self) -> bool:
        if self.aggregation == "average":
            return all(bool(result) for pair in self.keys() for result in self.average_results(pair).values())
        return all(bool(match) for outs in self.values() for out in outs for match in out.values())

    def average_results(self, runner_pair: tuple[str, str] | None = None) -> OrderedDict:
        """Per output: its statistics averaged over the iterations (NaN stays NaN and fails), checked against
        the thresholds its results carry. An iteration without statistics (a shape mismatch, an ``indices``
        verdict) makes the average meaningless: PolygraphyException."""
        iterations = self[self._get_runner_pair(runner_pair)]
        names = list(OrderedDict.fromkeys(name for iteration in iterations for name in iteration))
        averaged = OrderedDict()
        for name in names:
            results = [iteration[name] for iteration in iterations if name in iteration]
            if any(not hasattr(result, "averaged") for result in results):
                raise PolygraphyException(
                    f"Output: {name} | Cannot compute an averaged comparison because at least one iteration produced no comparable "
                    "metrics (e.g. a shape mismatch, or a compare function without statistics such as indices)"
                )
            values = {}
            for field in results[0].METRIC_FIELDS:
                present = [getattr(result, field) for result in results if getattr(result, field) is not None]
                values[field] = sum(present) / len(present) if present else None
            averaged[name] = results[0].averaged(values)
        return averaged

    def _get_runner_pair(self, runner_pair: tuple[str, str] | None) -> tuple[str, str]:
        return runner_pair if runner_pair is not None else next(iter(self.keys()))

    def percentage(self, runner_pair: tuple[str, str] | None = None) -> float:
        """The fraction (0.0 to 1.0) of iterations whose outputs all matched; 1.0 with nothing to compare."""
        if not len(self):  # not `not self`: that is the verdict
            return 1.0
        matched, _, total = self.stats(runner_pair)
        return float(matched) / float(total) if total else 1.0

    def stats(self, runner_pair: tuple[str, str] | None = None) -> tuple[int, int, int]:
        """``(matched, mismatched, total)`` iterations for ``runner_pair`` (default: the first pair)."""
        outs = self[self._get_runner_pair(runner_pair)]
        matched = sum(1 for out in outs if all(bool(v) for v in out.values()))
        return matched, len(outs) - matched, len(outs)


class AccuracyResults(list):
    """One :class:`AccuracyResult` per compare function (``compare_accuracy(compare_func=[f0, f1])``); truthy iff
    all are."""

    def __bool__(self) -> bool:
        return all(bool(result) for result in self)

    def output_names(self) -> list[str]:
        return list(OrderedDict.fromkeys(name for result in self for its in result.values() for it in its for name in it))


def _register_json() -> None:
    """Teach the compatibility package's JSON encoder Polygraphy's ``polygraphy_class`` names for these types."""
    Encoder.register(LazyArray, alias="LazyNumpyArray")(lambda lazy: {"values": lazy.load()})
    Decoder.register(LazyArray, alias="LazyNumpyArray")(lambda dct: LazyArray(dct["values"]))
    Encoder.register(IterationResult)(lambda it: {"outputs": it.dct, "runtime": it.runtime, "runner_name": it.runner_name})
    Decoder.register(IterationResult)(lambda dct: IterationResult(dct["outputs"], dct["runtime"], dct["runner_name"]))
    Encoder.register(RunResults)(lambda results: {"lst": [[name, its] for name, its in results.items()]})
    Decoder.register(RunResults)(lambda dct: RunResults([(name, its) for name, its in dct["lst"]]))


_register_json()
