"""Polygraphy's logger: ``G_LOGGER`` with Polygraphy's severities, per-path severities (a trie of
``{path: severity}``), callbacks told of each change, a log file, line information, indentation, and Python's
:mod:`logging` as an optional sink.

The global ``G_LOGGER`` also steers Parity: changing its severity sets Parity's own logger (``parity.api.logger.G_LOGGER``)
to the matching level, so ``G_LOGGER.severity = G_LOGGER.VERBOSE`` shows the backends' logs as Polygraphy's does.
"""

from __future__ import annotations

import copy
import enum
import functools
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from parity import api as parity_api
from parity_polygraphy import config
from parity_polygraphy.exception import PolygraphyException, PolygraphyInternalException

__all__ = ["G_LOGGER", "LogMode", "Logger", "SeverityTrie"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TAB = " " * 4  # constants.TAB; not imported: constants imports config, this stays import-light


class LogMode(enum.IntEnum):
    """How often one message is logged."""

    EACH = 0
    """Every time."""
    ONCE = 1
    """The first time only."""


class SeverityTrie:
    """Severities per path (``{"": default, "backend/trt": VERBOSE}``): a path gets the severity of its longest
    prefix in the trie, the default (``""``) otherwise. Empty and repeated separators are ignored."""

    def __init__(self, severity_dict: Mapping[str, int]) -> None:
        if "" not in severity_dict:
            raise ValueError("a severity mapping needs a default severity under the key ''")
        self.trie: dict[str, Any] = {}
        for path, severity in severity_dict.items():
            node = self.trie
            for part in self._split_path(path):
                node = node.setdefault(part, {})
            node[""] = severity
        self.has_non_default_entries = len(self.trie) > 1

    @staticmethod
    def _split_path(path: str) -> list[str]:
        return [part for part in path.split(os.path.sep) if part]

    def get(self, path: str | None = None) -> int:
        """The severity for ``path`` (the default for None)."""
        default = self.trie[""]
        if path is None or not self.has_non_default_entries:
            return default
        node = self.trie
        for part in self._split_path(path):
            if part not in node:
                break
            node = node[part]
        return node.get("", default)

    def __str__(self) -> str:
        return str(self.trie)


class _Indent:
    def __init__(self, logger: Logger, indent: int) -> None:
        self.logger, self.indent, self.old = logger, indent, logger.logging_indent

    def __enter__(self) -> _Indent:
        self.logger.logging_indent = self.indent
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.logging_indent = self.old


class _Verbosity:
    def __init__(self, logger: Logger, severity: int | Mapping[str, int]) -> None:
        self.logger, self.severity, self.old = logger, severity, copy.copy(logger.module_severity)

    def __enter__(self) -> _Verbosity:
        self.logger.module_severity = self.severity
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.module_severity = self.old


class Logger:
    """Polygraphy's logging interface; use the global ``G_LOGGER`` rather than making one."""

    ULTRA_VERBOSE = -20
    SUPER_VERBOSE = -10
    EXTRA_VERBOSE = 0
    VERBOSE = 10
    INFO = 20
    START = 22
    FINISH = 28
    WARNING = 30
    ERROR = 40
    CRITICAL = 50

    SEVERITY_LETTER_MAPPING = {
        ULTRA_VERBOSE: "[U]",
        SUPER_VERBOSE: "[S]",
        EXTRA_VERBOSE: "[X]",
        VERBOSE: "[V]",
        INFO: "[I]",
        START: "[I]",
        FINISH: "[I]",
        WARNING: "[W]",
        ERROR: "[E]",
        CRITICAL: "[!]",
    }
    # colour names of the `colored` package, used only where it is installed
    SEVERITY_COLOR_MAPPING = {
        ULTRA_VERBOSE: "dark_gray",
        SUPER_VERBOSE: "medium_violet_red",
        EXTRA_VERBOSE: "medium_purple",
        VERBOSE: "light_magenta",
        INFO: None,
        START: "light_cyan",
        FINISH: "light_green",
        WARNING: "light_yellow",
        ERROR: "light_red",
        CRITICAL: "light_red",
    }
    # Python logging levels for the severities below logging's scale (use_python_logging_system)
    _PYTHON_LEVELS = {ULTRA_VERBOSE: 2, SUPER_VERBOSE: 4, EXTRA_VERBOSE: 6}

    def __init__(self, severity: int | Mapping[str, int] = INFO, colors: bool = True, letter: bool = True, timestamp: bool = False, line_info: bool = False) -> None:
        self.logging_indent = 0
        self.once_logged: set[int] = set()
        self.colors = colors
        self.letter = letter
        self.timestamp = timestamp
        self.line_info = line_info
        self.logger_callbacks: list[Callable[[SeverityTrie], Any]] = []
        self.log_file = None
        self.module_severity = severity
        self.use_python_logging_system = False

    # --- settings -------------------------------------------------------------------------------------------
    @property
    def log_file(self) -> str | None:
        """A path every message is also written to (truncated when set); None: none."""
        return self._log_path

    @log_file.setter
    def log_file(self, value: str | os.PathLike[str] | None) -> None:
        old = getattr(self, "_log_file", None)
        if old is not None:
            old.close()
        self._log_path = value
        self._log_file: TextIO | None = None
        if value:
            folder = os.path.dirname(os.fspath(value))
            if folder:
                os.makedirs(folder, exist_ok=True)
            self._log_file = open(value, "w")  # noqa: SIM115 (held open while the logger writes to it)

    @property
    def module_severity(self) -> SeverityTrie:
        """The severities per path, as a :class:`SeverityTrie`; set an int or a ``{path: severity}`` mapping."""
        return self._module_severity

    @module_severity.setter
    def module_severity(self, value: int | Mapping[str, int] | SeverityTrie) -> None:
        if not isinstance(value, SeverityTrie):
            mapping = dict(value) if isinstance(value, Mapping) else {"": value}
            mapping.setdefault("", Logger.INFO)
            value = SeverityTrie(mapping)
        self._module_severity = value
        for callback in self.logger_callbacks:
            callback(self._module_severity)

    @property
    def severity(self) -> int:
        """The default severity (Polygraphy's earlier name; setting it sets :attr:`module_severity`)."""
        return self._module_severity.get()

    @severity.setter
    def severity(self, value: int | Mapping[str, int]) -> None:
        self.module_severity = value

    @property
    def use_python_logging_system(self) -> bool:
        """Send messages to Python's ``logging`` (logger ``Polygraphy``) instead of stdout/stderr."""
        return self._use_python_logging_system

    @use_python_logging_system.setter
    def use_python_logging_system(self, value: bool) -> None:
        self._use_python_logging_system = bool(value)
        if value:
            self.python_logger = logging.getLogger("Polygraphy")

    def register_callback(self, callback: Callable[[SeverityTrie], Any]) -> None:
        """Call ``callback(module_severity)`` now and whenever the severity changes."""
        callback(self._module_severity)
        self.logger_callbacks.append(callback)

    def indent(self, level: int = 1) -> _Indent:
        """A context manager indenting the messages logged inside it by ``level`` more tabs."""
        return _Indent(self, level + self.logging_indent)

    def verbosity(self, severity: int | Mapping[str, int] = CRITICAL) -> _Verbosity:
        """A context manager using ``severity`` inside it (default CRITICAL: almost silent), then the one before."""
        return _Verbosity(self, severity)

    def module_path(self, path: str) -> str:
        """``path`` relative to this package's folder (``backend/onnx/loader.py``, as per-path severities name
        it), else to the working directory when under it, else past the prefix it shares with the package."""
        for base in (_PACKAGE_DIR, os.getcwd()):
            relative = os.path.relpath(path, base)
            if not relative.startswith(os.pardir):
                return relative
        return path[len(os.path.commonpath([_PACKAGE_DIR, path])) :].lstrip(os.path.sep)

    # --- logging --------------------------------------------------------------------------------------------
    def _caller(self, stack_depth: int) -> tuple[str, int]:
        frame = sys._getframe(stack_depth)  # 0: here, 1: log, 2: info/warning/..., 3: their caller
        # a frame of generated code (no file) reports the nearest caller that has one
        while frame.f_back is not None and not os.path.exists(frame.f_code.co_filename):
            frame = frame.f_back
        return self.module_path(frame.f_code.co_filename), frame.f_lineno

    def _format(self, message: str, severity: int, where: tuple[str, int] | None) -> str:
        prefix = ""
        if self.letter:
            prefix += self.SEVERITY_LETTER_MAPPING.get(severity, "[?]") + " "
        if self.timestamp:
            prefix += f"({time.strftime('%X')}) "
        if self.line_info and where is not None:
            prefix += f"[{where[0]}:{where[1]}] "
        tab = _TAB * self.logging_indent
        text = prefix + tab + ("\n" + tab + " " * len(prefix)).join(message.splitlines())
        color = self.SEVERITY_COLOR_MAPPING.get(severity)
        if self.colors and color and _colored() is not None and sys.stdout.isatty():
            colored = _colored()
            text = colored.stylize(text, colored.fore(color))
        return text

    def log(self, message: Any, severity: int, mode: LogMode = LogMode.EACH, stack_depth: int = 2, error_ok: bool = False) -> None:
        """Log ``message`` (or what the callable ``message`` returns, called only when shown) at ``severity``."""
        where = self._caller(stack_depth) if self.line_info or self._module_severity.has_non_default_entries else None
        if severity < self._module_severity.get(where[0] if where else None):
            return
        if mode == LogMode.ONCE:
            key = hash(message)
            if key in self.once_logged:
                return
            self.once_logged.add(key)
        if callable(message):
            try:
                message = message()
            except Exception as err:
                if not error_ok or config.INTERNAL_CORRECTNESS_CHECKS:
                    raise
                message = f"<Error while logging this message: {err}>"
        text = self._format(str(message), severity, where)
        if self._log_file is not None:
            self._log_file.write(text + "\n")
            self._log_file.flush()
        if self._use_python_logging_system:
            self.python_logger.log(self._PYTHON_LEVELS.get(severity, max(severity, 1)), text)
        else:
            print(text, file=sys.stdout if severity < Logger.CRITICAL else sys.stderr)

    def backtrace(self, depth: int = 0, limit: int | None = None, severity: int = ERROR) -> None:
        """Log the caller's stack (more frames at lower severities)."""
        limit = max(limit if limit is not None else (3 - self._module_severity.get() // 10) * 2, 0)
        self.log(" ".join(traceback.format_stack(f=sys._getframe(depth + 2), limit=limit)), severity=severity)

    def ultra_verbose(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.ULTRA_VERBOSE, mode=mode, stack_depth=3, error_ok=True)

    def super_verbose(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.SUPER_VERBOSE, mode=mode, stack_depth=3, error_ok=True)

    def extra_verbose(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.EXTRA_VERBOSE, mode=mode, stack_depth=3, error_ok=True)

    def verbose(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.VERBOSE, mode=mode, stack_depth=3, error_ok=True)

    def info(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.INFO, mode=mode, stack_depth=3)

    def start(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.START, mode=mode, stack_depth=3)

    def finish(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.FINISH, mode=mode, stack_depth=3)

    def warning(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.WARNING, mode=mode, stack_depth=3)

    def error(self, message: Any, mode: LogMode = LogMode.EACH) -> None:
        self.log(message, Logger.ERROR, mode=mode, stack_depth=3)

    def critical(self, message: Any, ExceptionType: type[BaseException] | None = None) -> None:  # noqa: N803 (Polygraphy's name)
        """Log ``message``, then raise ``ExceptionType`` (default :class:`PolygraphyException`) with it."""
        self.log(message, Logger.CRITICAL, stack_depth=3)
        raise (ExceptionType or PolygraphyException)(message) from None

    exit = critical

    def internal_error(self, message: Any) -> None:
        """With internal checks on (POLYGRAPHY_INTERNAL_CORRECTNESS_CHECKS=1): log and raise
        :class:`PolygraphyInternalException`; otherwise nothing."""
        if config.INTERNAL_CORRECTNESS_CHECKS:
            self.log(message, Logger.CRITICAL, stack_depth=3)
            raise PolygraphyInternalException(message)

    def module_info(self, module: Any, name: str | None = None, severity: int = VERBOSE) -> None:
        """Log a module's name, version and path, once."""
        parts = [name or f"Loaded Module: {getattr(module, '__name__', module)}"]
        if hasattr(module, "__version__"):
            parts.append(f"Version: {module.__version__}")
        if hasattr(module, "__path__"):
            parts.append(f"Path: {[os.path.realpath(p) for p in module.__path__]}")
        self.log(" | ".join(parts), severity=severity, stack_depth=3, mode=LogMode.ONCE)

    def log_exception(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: an exception other than PolygraphyException leaving ``func`` is logged as an error first."""
        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except PolygraphyException:
                raise
            except Exception as err:
                self.error(err)
                raise

        return wrapped


@functools.cache
def _colored() -> Any:
    try:
        import colored
    except ImportError:
        return None
    return colored


# Polygraphy's severities -> Parity's (parity.api.logger.G_LOGGER), so the global logger steers Parity's backends' logs too
_PARITY_LEVELS = ((Logger.ULTRA_VERBOSE, "ULTRA_VERBOSE"), (Logger.SUPER_VERBOSE, "SUPER_VERBOSE"), (Logger.EXTRA_VERBOSE, "EXTRA_VERBOSE"),
                  (Logger.VERBOSE, "VERBOSE"), (Logger.INFO, "INFO"), (Logger.START, "START"), (Logger.FINISH, "FINISH"),
                  (Logger.WARNING, "WARNING"), (Logger.ERROR, "ERROR"), (Logger.CRITICAL, "CRITICAL"))


def _steer_parity(trie: SeverityTrie) -> None:
    severity = trie.get()
    name = next((name for level, name in reversed(_PARITY_LEVELS) if severity >= level), "ULTRA_VERBOSE")
    parity_logger = parity_api.logger.G_LOGGER
    parity_logger.severity = getattr(parity_logger, name)


G_LOGGER = Logger()
# appended, not registered: importing this module leaves Parity's severity (the CLI's -v / -q) as it is
G_LOGGER.logger_callbacks.append(_steer_parity)
