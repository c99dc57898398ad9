"""The console every layer writes through: the ``-v``/``-q`` settings and the quiet-aware line printer.

The CLI sets :data:`SETTINGS` (``parity.cli.common`` re-exports this very dict); the engine modules never
print on their own: what they show goes through a reporter the caller supplies (:mod:`parity.reporting`),
and the CLI's reporters print with :func:`echo`.
"""

from __future__ import annotations

SETTINGS = {"verbose": False, "quiet": False}


def echo(message: str = "", err: bool = False) -> None:
    """One line on stdout (stderr with ``err``); nothing on stdout with ``-q``."""
    if not SETTINGS["quiet"] or err:
        import click  # only when something is printed: engine code and plugins read SETTINGS without click

        click.echo(message, err=err)
