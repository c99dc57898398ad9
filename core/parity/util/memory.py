"""Garbage collections that scan only what an operation made.

Parity collects after releasing a session (a reference cycle must not keep its weights while the next one loads).
A full ``gc.collect`` walks every object of the process: 10 ms in a bare ``parity run``, 40-80 ms in a process that
has imported PyTorch or holds a test suite, per collection. :func:`frozen_heap` moves the objects alive when an
operation starts into the permanent generation (``gc.freeze``), which collections skip, and back afterwards
(``gc.unfreeze``), so each collection inside costs what the operation allocated.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """``with frozen_heap():`` collections inside scan only the objects made inside. Nested uses (and a caller
    that froze the heap itself) keep the outer freeze: only the outermost unfreezes."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
