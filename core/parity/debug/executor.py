"""Where candidate checks run: serially here, or ``--jobs N`` at once.

The interface is one method so that a distributed engine (a queue of remote workers) can take it over:
``map(fn, items)`` calls ``fn(slot, item)`` for every item and returns the results in item order. ``slot``
(``0 <= slot < jobs``) names the worker, so each concurrent check gets its own artifact file.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    jobs: int

    def map(self, fn: Callable[[int, T], R], items: Sequence[T]) -> list[R]: ...


class SerialExecutor:
    """One check at a time, in this thread (the only choice for interactive and in-process checks)."""

    jobs = 1

    def map(self, fn: Callable[[int, T], R], items: Sequence[T]) -> list[R]:
        return [fn(0, item) for item in items]


class ThreadExecutor:
    """``jobs`` checks at once. Threads suffice: each check is a subprocess (or waits on one)."""

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, int(jobs))

    def map(self, fn: Callable[[int, T], R], items: Sequence[T]) -> list[R]:
        if self.jobs == 1 or len(items) <= 1:
            return [fn(0, item) for item in items]
        slots: queue.Queue[int] = queue.Queue()
        for slot in range(self.jobs):
            slots.put(slot)

        def run(item: T) -> R:
            slot = slots.get()
            try:
                return fn(slot, item)
            finally:
                slots.put(slot)

        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="parity-check") as pool:
            return list(pool.map(run, items))


def make_executor(jobs: int) -> Executor:
    return SerialExecutor() if jobs <= 1 else ThreadExecutor(jobs)
