"""The session the shared ``debug`` options describe, from their parsed values.

The click options themselves (:func:`debug_options`, :func:`until_option`) are CLI: they live in
:mod:`parity.debug.cli` and are re-exported here, on first use, for the plugins that import them from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from parity.debug.check import CommandCheck, InteractiveCheck, Verdict
from parity.debug.executor import make_executor
from parity.debug.session import DebugSession, Reporter
from parity.errors import UsageError


def make_check(params: Mapping[str, Any]) -> Callable:
    argv = params.get("check")
    if not argv:
        if params.get("jobs", 1) > 1:
            raise UsageError("--jobs needs a --check command (interactive mode checks one candidate at a time)")
        return InteractiveCheck()
    verdict = Verdict(tuple(params.get("fail_code") or ()), tuple(params.get("ignore_fail_code") or ()), tuple(params.get("fail_regex") or ()))
    return CommandCheck(list(argv), verdict, params.get("check_timeout"), bool(params.get("show_output")), bool(params.get("hide_fail_output")))


def session_from_options(params: Mapping[str, Any], *, label: str, fingerprint: Mapping[str, Any], check: Callable | None = None) -> DebugSession:
    """A :class:`DebugSession` configured from the parsed :func:`debug_options`."""
    from parity.console import SETTINGS

    artifact = params.get("iter_artifact") or "parity_debug.onnx"
    state = params.get("state") or str(Path(artifact).with_name(Path(artifact).name + ".state.json"))
    options = {k: v for k, v in params.items() if k not in ("no_resume", "state", "jobs", "show_output", "hide_fail_output")}
    return DebugSession(
        check or make_check(params),
        iter_artifact=artifact,
        artifacts=list(params.get("artifacts") or ()),
        artifacts_dir=params.get("artifacts_dir") or "parity_artifacts",
        iteration_info=params.get("iteration_info"),
        state_path=state,
        fingerprint={"label": label, **fingerprint, "options": options},
        resume=not params.get("no_resume"),
        remove_intermediate=not params.get("no_remove_intermediate"),
        executor=make_executor(int(params.get("jobs") or 1)),
        reporter=Reporter(enabled=not SETTINGS["quiet"], label=label),
        label=label,
    )


_CLI_NAMES = ("debug_options", "until_option")


def __getattr__(name: str) -> Any:
    if name in _CLI_NAMES:  # moved to the CLI layer; kept importable from here
        from parity.debug import cli

        return getattr(cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
