"""``G_LOGGER``: the Python API's log level and log lines (``parity.api.logger``; a Polygraphy script's
``parity_polygraphy.logger.G_LOGGER`` steers it), on Python's logging.

It logs through the ``parity`` logger of :mod:`logging`, which has one handler writing ``[I] message`` lines to
stderr (remove ``G_LOGGER.handler`` from ``logging.getLogger("parity")`` to route records through your own
logging set-up). Its severity is the ``parity`` logger's level, and it steers Parity itself as the CLI's
``--verbosity`` does: VERBOSE or below shows backend logs (``-v``); above WARNING, Parity's warnings are hidden::

    with G_LOGGER.verbosity(G_LOGGER.VERBOSE):
        ...                     # TensorRT's and ONNX Runtime's own log lines are shown here
    G_LOGGER.severity = G_LOGGER.ERROR

``critical`` logs, then raises :class:`parity.errors.ParityError`, as Polygraphy's raises its exception.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from parity.console import SETTINGS
from parity.errors import ParityError

__all__ = ["G_LOGGER", "Logger"]

# Polygraphy's severities, placed on logging's scale (DEBUG 10, INFO 20, WARNING 30, ERROR 40, CRITICAL 50)
_LEVELS = {
    "ULTRA_VERBOSE": 5,
    "SUPER_VERBOSE": 6,
    "EXTRA_VERBOSE": 7,
    "VERBOSE": logging.DEBUG,
    "INFO": logging.INFO,
    "START": 21,
    "FINISH": 22,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "CRITICAL": logging.CRITICAL,
}
_LETTERS = {5: "U", 6: "S", 7: "X", 10: "V", 20: "I", 21: "I", 22: "I", 30: "W", 40: "E", 50: "!"}


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (a redirect, a live progress display, pytest's capture)."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[{_LETTERS.get(record.levelno, '?')}] {record.getMessage()}"


class Logger:
    """Severities as attributes (``G_LOGGER.VERBOSE``), one method per severity, :meth:`verbosity` for a block."""

    ULTRA_VERBOSE = _LEVELS["ULTRA_VERBOSE"]
    SUPER_VERBOSE = _LEVELS["SUPER_VERBOSE"]
    EXTRA_VERBOSE = _LEVELS["EXTRA_VERBOSE"]
    VERBOSE = _LEVELS["VERBOSE"]
    INFO = _LEVELS["INFO"]
    START = _LEVELS["START"]
    FINISH = _LEVELS["FINISH"]
    WARNING = _LEVELS["WARNING"]
    ERROR = _LEVELS["ERROR"]
    CRITICAL = _LEVELS["CRITICAL"]

    def __init__(self, name: str = "parity", severity: int = logging.INFO) -> None:
        self.logger = logging.getLogger(name)
        for level_name, level in _LEVELS.items():
            if logging.getLevelName(level).startswith("Level "):
                logging.addLevelName(level, level_name)
        self.handler = _Stderr()
        self.handler.setFormatter(_Format())
        self.logger.addHandler(self.handler)
        self.logger.propagate = False  # one line per message, also where the root logger has a handler
        self.logger.setLevel(severity)  # not the setter: importing this module leaves -v / -q as they are

    @property
    def severity(self) -> int:
        return self.logger.level

    @severity.setter
    def severity(self, value: int) -> None:
        value = int(value)
        self.logger.setLevel(value)
        SETTINGS["verbose"] = value <= self.VERBOSE
        SETTINGS["warnings"] = value <= self.WARNING

    @property
    def module_severity(self) -> int:
        """Polygraphy 0.4x's name for :attr:`severity`; a ``{path: severity}`` mapping sets its ``""`` entry."""
        return self.severity

    @module_severity.setter
    def module_severity(self, value: int | Mapping[str, int]) -> None:
        self.severity = value.get("", self.INFO) if isinstance(value, Mapping) else value

    @contextlib.contextmanager
    def verbosity(self, severity: int = CRITICAL) -> Iterator[Logger]:
        """Use ``severity`` inside the ``with`` block, then the one before."""
        old = self.severity
        self.severity = severity
        try:
            yield self
        finally:
            self.severity = old

    def log(self, message: str | Callable[[], str], severity: int) -> None:
        """``message`` may be a function returning it, called only when the severity is shown."""
        if self.logger.isEnabledFor(severity):
            self.logger.log(severity, message() if callable(message) else message)

    def ultra_verbose(self, message: Any) -> None:
        self.log(message, self.ULTRA_VERBOSE)

    def super_verbose(self, message: Any) -> None:
        self.log(message, self.SUPER_VERBOSE)

    def extra_verbose(self, message: Any) -> None:
        self.log(message, self.EXTRA_VERBOSE)

    def verbose(self, message: Any) -> None:
        self.log(message, self.VERBOSE)

    def info(self, message: Any) -> None:
        self.log(message, self.INFO)

    def start(self, message: Any) -> None:
        self.log(message, self.START)

    def finish(self, message: Any) -> None:
        self.log(message, self.FINISH)

    def warning(self, message: Any) -> None:
        self.log(message, self.WARNING)

    def error(self, message: Any) -> None:
        self.log(message, self.ERROR)

    def critical(self, message: Any) -> None:
        """Log ``message``, then raise :class:`ParityError` with it."""
        text = message() if callable(message) else str(message)
        self.log(text, self.CRITICAL)
        raise ParityError(text)


G_LOGGER = Logger()
