"""Live progress on a terminal: counts, elapsed time and an estimate of what remains, drawn by rich.

Shown only to a person watching: stderr is a terminal, ``TERM`` is not ``dumb``, ``NO_COLOR`` is unset and
neither ``-q`` nor ``--silent`` was given (:func:`progress_wanted`). Otherwise nothing extra is printed, and
rich is never imported (start-up stays fast: tests/test_startup_imports.py). rich is Parity's only
terminal-rendering library; everything else Parity prints is plain lines, so it stays greppable.

The remaining time is rich's estimate (``TimeRemainingColumn``): the remaining count divided by the speed over
a sliding window of the latest updates, which follows a run whose steps speed up or slow down.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, TextIO

from parity.console import SETTINGS, set_live_printer

_FLUSH_SECONDS = 0.1


def progress_wanted(stream: TextIO | None = None) -> bool:
    """Whether a live display would reach a person: ``stream`` (stderr) is a terminal, and neither
    ``NO_COLOR``, ``TERM=dumb``, ``-q`` nor ``--silent`` asks for plain output."""
    stream = sys.stderr if stream is None else stream
    if SETTINGS["quiet"] or "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class LiveProgress:
    """Bars on stderr, one per named task, started at the first :meth:`update`; a no-op when disabled.

    ``update("iterations", 3, 10)`` shows ``3/10`` with the time left; a ``None`` total shows the count and
    the elapsed time only. :meth:`print` writes a line above the bars (or on stderr without them)."""

    def __init__(self, enabled: bool | None = None, console_file: TextIO | None = None) -> None:
        self.enabled = progress_wanted() if enabled is None else enabled
        self._file = console_file
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._pending: list[str] = []  # lines waiting to be printed above the bars
        self._flushed = 0.0

    def _start(self) -> Any:
        if self._progress is None:
            from rich.console import Console  # rich only when a bar is shown
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            console = Console(file=self._file or sys.stderr, force_terminal=True if self._file is not None else None)
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("elapsed,"),
                TimeRemainingColumn(),
                TextColumn("left  {task.fields[status]}"),
                console=console,
                redirect_stdout=False,  # Parity's own lines come through set_live_printer
                redirect_stderr=True,  # warnings printed by libraries land above the bars
                transient=True,  # the bars go when the work is done: the lines above them and the verdict stay
            )
            self._progress.start()
            set_live_printer(self._echo)
        return self._progress

    def _echo(self, message: str, err: bool) -> bool:
        # a line for the terminal the bars are on goes above them; stdout piped elsewhere is left to echo
        if err or sys.stdout.isatty():
            self._pending.append(message)
            self.flush(due_only=not err)
            return True
        return False

    def flush(self, due_only: bool = False) -> None:
        """Print the lines held for the terminal. Each print redraws the bars (about 1 ms), so lines are held
        and printed together at most every 0.1 s (``due_only``); a run printing thousands stays fast."""
        now = time.monotonic()
        if not self._pending or self._progress is None or (due_only and now - self._flushed < _FLUSH_SECONDS):
            return
        self._progress.console.print("\n".join(self._pending), markup=False, highlight=False, soft_wrap=True)
        self._pending.clear()
        self._flushed = now

    def update(self, name: str, done: int, total: int | None = None, status: str = "", label: str | None = None) -> None:
        """Task ``name`` has ``done`` of ``total`` (None: unknown) steps finished; ``status`` says what runs now."""
        if not self.enabled:
            return
        progress = self._start()
        task = self._tasks.get(name)
        if task is None:
            task = self._tasks[name] = progress.add_task(label or name, total=total, status=status)
        self.flush(due_only=True)
        # drawn by rich's refresh thread (10 a second); a finished task is drawn at once, so its end is seen
        progress.update(task, completed=done, total=total, status=status, refresh=total is not None and done >= total)

    def remove(self, name: str) -> None:
        """Task ``name`` is over: its bar goes (the others stay)."""
        task = self._tasks.pop(name, None)
        if task is not None and self._progress is not None:
            self._progress.remove_task(task)

    def print(self, text: str) -> None:
        """A line on stderr, above the bars when they are shown."""
        if self._progress is not None:
            self._pending.append(text)
            self.flush()
        else:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._progress is not None:
            self.flush()
            set_live_printer(None)
            self._progress.stop()
            self._progress = None
            self._tasks.clear()
