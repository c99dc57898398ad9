"""Garbage collections that scan only what an operation made.

Parity collects after releasing a session (a reference cycle must not keep its weights while the next one loads).
A full ``gc.collect`` walks every object of the process: 10 ms in a bare ``parity run``, 40-80 ms in a process that
has imported PyTorch or holds a test suite, per collection. :func:`frozen_heap` moves the objects alive when an
operation starts into the permanent generation (``gc.freeze``), which collections skip, and back afterwards
(``gc.unfreeze``), so each collection inside costs what the operation allocated.

Nesting is counted here, not read from ``gc.get_freeze_count()``: some interpreters start with objects frozen
(375 in the GPU machine's Python 3.12), which must not pass for an operation already in progress. gc has no partial
unfreeze, so the outermost block's end also unfreezes what was frozen before it (the collector then scans those
objects again: slower collections, never a leak).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_depth = 0
_lock = threading.Lock()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """``with frozen_heap():`` collections inside scan only the objects made inside. Nested (and concurrent) uses
    share the outermost freeze: the last to end unfreezes."""
    global _depth
    with _lock:
        _depth += 1
        if _depth == 1:
            gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.unfreeze()
