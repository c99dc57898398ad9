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
    """``jobs`` checks at once. Threads suffice: each check is a subprocess (or waits on one), or waits on a remote
    worker. ``on_error`` (an executor that can stop checks in flight, such as parity-ray's): called when a check
    raises or on Ctrl-C, and the checks not yet started are dropped; without it the others run to their end."""

    def __init__(self, jobs: int, thread_name: str = "parity-check", on_error: Callable[[], None] | None = None) -> None:
        self.jobs = max(1, int(jobs))
        self.thread_name = thread_name
        self.on_error = on_error

    def map(self, fn: Callable[[int, T], R], items: Sequence[T]) -> list[R]:
        try:
            if self.jobs == 1 or len(items) <= 1:
                return [fn(0, item) for item in items]
            return self._in_slots(fn, items)
        except BaseException:
            if self.on_error:
                self.on_error()
            raise

    def _in_slots(self, fn: Callable[[int, T], R], items: Sequence[T]) -> list[R]:
        slots: queue.Queue[int] = queue.Queue()  # each running check holds a slot: its artifact file, its worker
        for slot in range(self.jobs):
            slots.put(slot)

        def run(item: T) -> R:
            slot = slots.get()
            try:
                return fn(slot, item)
            finally:
                slots.put(slot)

        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix=self.thread_name)
        try:
            futures = [pool.submit(run, item) for item in items]
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=True, cancel_futures=self.on_error is not None)


def make_executor(jobs: int) -> Executor:
    return SerialExecutor() if jobs <= 1 else ThreadExecutor(jobs)
