"""The ``--report`` JSON file of the ``debug`` commands (``debug repeat``, and the plugins' ``debug reduce``,
``debug precision``, ``debug build``): one envelope for every command, built from a :class:`DebugSession`.

Each command names its own format (``parity-repeat-report``, ...), with its own version and JSON Schema
(docs/formats.md); the envelope is the same for all:

* ``format``, ``version``, ``command`` (``"debug reduce"``), ``model`` (the input, or null), ``check`` (the
  check command's argv; null for an interactive or Python check);
* ``exit_code`` and ``status``, the exit code's meaning (``passed``, ``mismatch``, ``usage``, ``failure``);
  ``error``: the one-line error when the command stopped with one (then ``result`` is empty), else null;
* ``output``: the result artifact (a model, a folder), null when none was written;
* ``seconds`` (the whole command), ``counts`` (checks used, resumed, bad, good, unresolved; cached repeats; the
  seconds of every check run; ``speculative``: checks run ahead that the search never used) and ``checks``: every
  check the search used, in the order its serial form asks for them (the same list for every ``--jobs`` and
  ``--executor``; ``iteration`` is the run number that names its artifacts), with its verdict (``good``,
  ``bad`` or ``unresolved``: an unresolved check is never reported as bad), whether it checked the unchanged
  input (``original``), its seconds (null when replayed from the state file), label, size and note;
  ``speculative``: the checks ``--jobs`` ran ahead whose verdicts went unused (same fields; they decide nothing);
* ``result``: what the command found (its fields are the command's, listed in its schema).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from parity.debug.session import DebugSession
from parity.errors import ExitCode
from parity.util.fs import write_text_atomic


def debug_report(
    session: DebugSession,
    *,
    name: str,
    version: int = 1,
    command: str,
    model: str | None,
    exit_code: int,
    output: str | None = None,
    result: Mapping[str, Any] | None = None,
    error: str | None = None,
    started: float | None = None,
    check: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The report as a dict. ``name``: the format (``parity-<command>-report``); ``started``: the command's
    ``time.perf_counter()`` at its start (default: when the session started); ``check``: the check command
    (default: the session's, when it is a command)."""
    check = check if check is not None else getattr(session.check, "argv", None)
    try:
        status = ExitCode(int(exit_code)).name.lower()
    except ValueError:
        status = "failure"
    summary = session.consumed_summary()

    def entry(r: Mapping[str, Any]) -> dict[str, Any]:
        return {**r, "seconds": None if r["seconds"] is None else round(r["seconds"], 6), "original": r["key"] == session.original_key}

    checks = [entry(r) for r in session.consumed]
    return {
        "format": name,
        "version": version,
        "command": command,
        "model": None if model is None else str(model),
        "check": [str(a) for a in check] if isinstance(check, Sequence) and not isinstance(check, str) else None,
        "exit_code": int(exit_code),
        "status": status,
        "error": error,
        "output": None if output is None else str(output),
        "seconds": round(time.perf_counter() - started if started is not None else session.elapsed(), 6),
        "counts": {
            "checks": summary.checks,
            "resumed": summary.resumed,
            "cached": summary.cached,
            "bad": summary.bad,
            "good": summary.good,
            "unresolved": summary.unresolved,
            "check_seconds": round(summary.check_seconds, 6),
            "speculative": summary.speculative,
        },
        "checks": checks,
        "speculative": [entry(r) for r in session.speculative()],
        "result": dict(result or {}),
    }


def write_debug_report(path: str, session: DebugSession, **fields: Any) -> dict[str, Any]:
    """Write :func:`debug_report` (``fields``: its keyword arguments) atomically as strict JSON; returns it."""
    report = debug_report(session, **fields)
    write_text_atomic(path, json.dumps(report, indent=1, allow_nan=False) + "\n")
    return report
