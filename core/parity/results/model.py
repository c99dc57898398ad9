"""In-memory results: per runner, per iteration, output name -> array."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

# The file formats (parity.results.files) stand above these value types and import them, so this module imports no
# format: files.py hands its two functions to :meth:`RunResults.save`/:meth:`RunResults.load` when it is imported,
# and the package (``parity.results``, imported before any of its modules) imports it first.
_FILES: dict[str, Callable] = {}


def use_files(save: Callable[[RunResults, str | Path], None], load: Callable[[str | Path], RunResults]) -> None:
    """Set the functions :meth:`RunResults.save` and :meth:`RunResults.load` call (:mod:`parity.results.files` does)."""
    _FILES.update(save=save, load=load)


class IterationResult(dict[str, np.ndarray]):
    """One inference: ``{output name: array}`` plus the runner's name and its runtime in seconds."""

    def __init__(self, outputs: dict[str, np.ndarray] | None = None, runtime: float | None = None, runner_name: str = "") -> None:
        super().__init__(outputs or {})
        self.runtime = runtime
        self.runner_name = runner_name


class RunResults:
    """Ordered ``runner name -> [IterationResult, ...]``; what ``Comparator.run`` returns and files hold."""

    def __init__(self, runs: list[tuple[str, list[IterationResult]]] | None = None) -> None:
        self._runs: list[tuple[str, list[IterationResult]]] = list(runs or [])

    # mapping-like access ----------------------------------------------------------------------------
    def runners(self) -> list[str]:
        return [name for name, _ in self._runs]

    def items(self) -> list[tuple[str, list[IterationResult]]]:
        return list(self._runs)

    def __getitem__(self, key: str | int) -> list[IterationResult]:
        if isinstance(key, int):
            return self._runs[key][1]
        for name, iters in self._runs:
            if name == key:
                return iters
        raise KeyError(key)

    def __contains__(self, name: object) -> bool:
        return name in self.runners()

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[tuple[str, list[IterationResult]]]:
        return iter(self._runs)

    def add(self, runner_name: str, iterations: list[IterationResult]) -> None:
        if runner_name in self:
            raise ValueError(f"runner '{runner_name}' is already in these results")
        self._runs.append((runner_name, list(iterations)))

    def append_iteration(self, runner_name: str, result: IterationResult) -> None:
        if runner_name not in self:
            self._runs.append((runner_name, []))
        self[runner_name].append(result)

    def extend(self, other: RunResults, prefix: str = "") -> None:
        """Append ``other``'s runs, renaming any that collide (and prefixing, e.g. with the golden file name)."""
        for name, iters in other:
            name = f"{prefix}{name}"
            unique = name
            n = 1
            while unique in self:
                unique = f"{name}~{n}"
                n += 1
            self._runs.append((unique, iters))

    # files -----------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """:func:`parity.results.files.save_results`."""
        _FILES["save"](self, path)

    @classmethod
    def load(cls, path: str | Path) -> RunResults:
        """:func:`parity.results.files.load_results`."""
        return _FILES["load"](path)

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}: {len(i)} iteration(s)" for n, i in self._runs)
        return f"RunResults({parts})"
