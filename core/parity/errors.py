"""Errors and the exit codes scripts can act on without regexes.

| code | meaning                                                        |
|------|----------------------------------------------------------------|
| 0    | passed                                                         |
| 1    | accuracy mismatch (or a debug check judged the model bad)      |
| 2    | usage error: bad flags, input files, names, shapes or dtypes   |
| 3    | a model or backend failure: load, build or inference           |
| 130  | interrupted (Ctrl-C)                                           |
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    PASSED = 0
    MISMATCH = 1
    USAGE = 2
    FAILURE = 3
    INTERRUPTED = 130


class ParityError(Exception):
    """An expected failure: the CLI prints its message as one line and exits with `exit_code`."""

    exit_code: ExitCode = ExitCode.FAILURE


class UsageError(ParityError):
    """The user asked for something impossible: bad option, unknown name, malformed file."""

    exit_code = ExitCode.USAGE


class ModelError(ParityError):
    """A model could not be read, parsed or loaded by a backend."""


class BackendError(ParityError):
    """A backend failed while building or running a model, or is not installed."""


class PluginError(ParityError):
    """A plugin is broken or two plugins claim the same name."""

    exit_code = ExitCode.USAGE


def missing_dependency(module: str, install: str) -> BackendError:
    """The one-line error for a backend whose library is not installed."""
    return BackendError(f"{module} is not installed; install it with: {install}")
