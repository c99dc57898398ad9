"""The console every layer writes through: the ``-v``/``-q`` settings and the quiet-aware line printer.

The CLI sets :data:`SETTINGS` (``parity.cli.common`` re-exports this very dict); the engine modules never
print on their own: what they show goes through a reporter the caller supplies (:mod:`parity.reporting`),
and the CLI's reporters print with :func:`echo`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

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
