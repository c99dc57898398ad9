"""The console every layer writes through: the ``-v``/``-q`` settings and the quiet-aware line printer.

The CLI sets :data:`SETTINGS` (``parity.cli.common`` re-exports this very dict); the engine modules never
print on their own: what they show goes through a reporter the caller supplies (:mod:`parity.reporting`),
and the CLI's reporters print with :func:`echo`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

# verbose: -v (tracebacks, backend logs); quiet: -q (no stdout lines); warnings: False only when the Python API's
# G_LOGGER is set above WARNING (parity.logger)
SETTINGS = {"verbose": False, "quiet": False, "warnings": True}

# While a live progress display is shown (parity.cli.progress), lines go through it so they land above the bars.
_live_printer: list[Callable[[str, bool], bool]] = []


# The command line being run (parity.cli.main sets it, restoring the outer one when a check runs `parity run` in-process).
_command: list[list[str]] = []


def command_line() -> list[str]:
    """The ``parity`` command being run, as typed (reports show it); ``sys.argv`` outside ``parity.cli.main``."""
    return list(_command[-1]) if _command else list(sys.argv)


def set_live_printer(printer: Callable[[str, bool], bool] | None) -> None:
    """Route :func:`echo` through ``printer(message, err)`` (it returns False for a line it leaves to echo)."""
    _live_printer[:] = [printer] if printer else []


def echo(message: str = "", err: bool = False) -> None:
    """One line on stdout (stderr with ``err``); nothing on stdout with ``-q``."""
    if not SETTINGS["quiet"] or err:
        if _live_printer and _live_printer[0](message, err):
            return
        import click  # only when something is printed: engine code and plugins read SETTINGS without click

        click.echo(message, err=err)


# --- --log-file and --log-format (Polygraphy's logging flags) -------------------------------------------
# Polygraphy's logger writes each line to the terminal and, with --log-file, to that file as it goes (opened
# once, truncated, flushed line by line); its --log-format adds a timestamp and the printing file and line.
# Parity prints through several writers (click.echo, print, logging, tracebacks), so the copy and the
# prefixes are made where all of them meet: sys.stdout and sys.stderr, wrapped while the command runs.

LOG_FORMATS = ("timestamp", "line-info", "no-colors")

# frames of these modules print for someone else: line-info names the frame that called them
_PRINTERS = ("click", "logging", "traceback", "parity.console", "parity.util.text", "parity.logger", "rich")


class _LogState:
    def __init__(self) -> None:
        self.file: IO[str] | None = None
        self.path: str | None = None
        self.formats: set[str] = set()
        # (stdout, stderr, NO_COLOR, formats) before each installation, innermost last
        self.saved: list[tuple[Any, Any, str | None, set[str]]] = []


_log = _LogState()


class _Copying:
    """A text stream that writes to ``stream`` and copies each line to the log file, with the --log-format
    prefixes at the start of each line (on both). Not a terminal: a live progress display would fill the log
    with redrawn bars, so commands print plain lines while it is installed."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.at_start = True

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return getattr(self.stream, "errors", None) or "strict"

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # a text stream, as click asks (b"" must fail): bytes would skip the copy
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        out = self._prefixed(text) if (_log.formats - {"no-colors"}) else text
        self.stream.write(out)
        if _log.file is not None:
            _log.file.write(out)
            _log.file.flush()
        return len(text)

    def _prefixed(self, text: str) -> str:
        prefix = _prefix()
        parts = []
        for piece in text.splitlines(keepends=True):
            parts.append((prefix + piece) if self.at_start else piece)
            self.at_start = piece.endswith("\n")
        return "".join(parts)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, reconfigure, ...: the terminal stream's own
        if name == "buffer":  # what is written there would reach the terminal only, not the log
            raise AttributeError(name)
        return getattr(self.stream, name)


def _prefix() -> str:
    prefix = ""
    if "timestamp" in _log.formats:
        prefix += f"({time.strftime('%X')}) "
    if "line-info" in _log.formats:
        frame = sys._getframe(3)
        while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_PRINTERS):
            frame = frame.f_back
        if frame is not None:
            module = str(frame.f_globals.get("__name__", "?")).replace(".", "/")
            prefix += f"[{module}.py:{frame.f_lineno}] "
    return prefix


def set_log_format(formats: Iterable[str]) -> None:
    """``--log-format``: ``timestamp`` and ``line-info`` prefix every printed line, ``no-colors`` turns colours
    (and the coloured live progress display) off, as ``NO_COLOR`` does."""
    chosen = set(formats)
    if not chosen:
        return
    _install()
    if "no-colors" in chosen:
        os.environ["NO_COLOR"] = "1"
    _log.formats |= chosen


def open_log_file(path: str) -> None:
    """``--log-file PATH``: from now on every line Parity prints on stdout and stderr is also written to PATH
    (created with its folders, truncated, flushed line by line), the terminal getting the same lines."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    if _log.file is not None:
        _log.file.close()
    _log.file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close_logs()
    _log.path = path
    _install()


def _install() -> None:
    if not isinstance(sys.stdout, _Copying):
        _log.saved.append((sys.stdout, sys.stderr, os.environ.get("NO_COLOR"), set(_log.formats)))
        sys.stdout, sys.stderr = _Copying(sys.stdout), _Copying(sys.stderr)  # type: ignore[assignment]


def log_mark() -> int:
    """How many stream wrappings are in place: :func:`close_logs` undoes those made after this mark."""
    return len(_log.saved)


def close_logs(mark: int = 0) -> None:
    """End --log-file and --log-format set after ``mark``: the streams are given back, the log file closed."""
    if len(_log.saved) <= mark:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    sys.stdout, sys.stderr, no_color, _log.formats = _log.saved[mark]
    if no_color is None:
        os.environ.pop("NO_COLOR", None)
    else:
        os.environ["NO_COLOR"] = no_color
    del _log.saved[mark:]
    if _log.file is not None:
        _log.file.close()
    _log.file, _log.path = None, None
