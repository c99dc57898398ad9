"""``parity debug build``: rebuild an engine until a check says good/bad (or N times), sorting each build's
tactic replay and timing cache into ``<artifacts-dir>/good`` or ``/bad`` for ``inspect diff-tactics``.

Runs on the core debug engine (:class:`parity.debug.session.DebugSession`: ``--check``, ``--until``,
``--artifacts``, state/resume, progress). Each iteration: remove the previous build's replay and timing
cache -> build the engine into ``--iter-artifact`` with the TensorRT plugin (the recorder comes in as its
build extension when ``--save-tactics`` is given) -> check -> the session copies ``--artifacts`` plus this
build's timing cache into good/ or bad/. As in Polygraphy, a build that fails is bad without running the check.
The builder is a parameter, so other builders can reuse the loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.api import (
    DebugSession,
    ExitCode,
    Iteration,
    Outcome,
    ParityError,
    Summary,
    check_model_path,
    check_output_path,
    file_fingerprint,
    refuse_overwrite,
    write_debug_report,
)
from parity.commands import make_check, session_from_options

DEFAULT_ITER_ARTIFACT = "parity_debug.engine"
Build = Callable[[str, str, Mapping[str, Any]], None]  # (model, engine path, options)


def timing_cache_path(iter_artifact: str) -> str:
    """One build's timing cache, beside its engine: ``parity_debug.engine`` -> ``parity_debug.timing.cache``."""
    path = Path(iter_artifact)
    return str(path.with_name(f"{path.stem}.timing.cache"))


def trt_build(model: str, engine_path: str, options: Mapping[str, Any]) -> None:
    """Build with the TensorRT plugin's builder options; our recorder comes in as its build extension."""
    from parity_trt.api import convert  # here: only a TensorRT build needs the TensorRT plugin's builder

    convert(model, engine_path, options)


@dataclass
class BuildResult:
    verdicts: list[bool]  # True: bad
    summary: Summary
    build_errors: dict[int, str] = field(default_factory=dict)  # iteration -> first line of the build error
    outcomes: list[str] = field(default_factory=list)  # good / bad / unresolved per iteration
    session: DebugSession | None = None  # the finished session (every check's verdict: session.records)

    @property
    def good(self) -> int:
        """Builds whose check passed (an unresolved check is not a pass)."""
        return self.outcomes.count("good") if self.outcomes else self.verdicts.count(False)

    @property
    def unresolved(self) -> int:
        return self.outcomes.count("unresolved")

    @property
    def bad(self) -> int:
        return self.verdicts.count(True)

    @property
    def exit_code(self) -> ExitCode:
        """``debug build``'s: 1 if a build was bad; 3 if none was bad but some checks were unresolved; else 0."""
        if self.bad:
            return ExitCode.MISMATCH
        return ExitCode.FAILURE if self.unresolved else ExitCode.PASSED


def debug_build(
    model: str,
    until: str | int,
    check: Sequence[str] | Callable[[Iteration], Outcome] | None = None,
    build: Build = trt_build,
    report: str | None = None,
    **params: Any,
) -> BuildResult:
    """The Python API of ``parity debug build``; ``params`` are its options by their Python names
    (``save_tactics``, ``artifacts``, ``artifacts_dir``, ``iter_artifact``, ``fp16``, ...).

    ``check`` is the command line (exit status judged as ``--fail-code``/``--fail-regex`` say) or a
    callable ``check(iteration) -> Outcome``; ``None`` asks at the terminal. ``report``: write the
    ``--report`` JSON there (format parity-build-report, schema ``parity_tactics/schemas/build-report.schema.json``).
    """
    started = time.perf_counter()
    check_model_path(model)  # missing or a directory: exit 2
    if report:
        refuse_overwrite(model, report)
        check_output_path(report, "--report")
    params["iter_artifact"] = params.get("iter_artifact") or DEFAULT_ITER_ARTIFACT
    cache = timing_cache_path(params["iter_artifact"])
    artifacts = [*dict.fromkeys([*(params.get("artifacts") or ()), cache])]
    options = {**params, "save_timing_cache": cache}
    if build is trt_build:  # fail before the session starts (and leaves a state file) when nothing can build
        # here: only a TensorRT build needs the TensorRT plugin (a custom build= does not)
        from parity_trt.api import check_options, import_trt

        check_options(options)
        import_trt()
    errors: dict[int, str] = {}

    def make_artifact(it: Iteration) -> None:
        own = options
        if not it.exclusive:  # --jobs: each concurrent build writes its own timing cache and tactic replay
            own = {**options, "save_timing_cache": it.slot_path(cache)}
            if params.get("save_tactics"):
                own["save_tactics"] = it.slot_path(params["save_tactics"])
        for stale in (own["save_timing_cache"], own.get("save_tactics")):  # the timing cache merges into an existing file
            if stale and os.path.exists(stale):
                os.unlink(stale)
        try:
            build(model, it.artifact, own)
        except ParityError as exc:
            if exc.exit_code == ExitCode.USAGE or "is not installed" in str(exc):
                raise  # bad options or no TensorRT: every build would fail the same way
            errors[it.index] = (str(exc).splitlines() or [type(exc).__name__])[0]

    argv = None if callable(check) else check
    inner = check if callable(check) else make_check({**params, "check": argv})

    def judged(it: Iteration) -> Outcome:
        if it.index in errors:
            return Outcome(True, note=f"build failed: {errors[it.index]}")
        return inner(it)

    session = session_from_options(
        {**params, "check": argv, "artifacts": artifacts},
        label="build",
        fingerprint={"model": file_fingerprint(model), "until": str(until), "check": argv},
        check=judged,
    )
    fields: dict[str, Any] = {"name": "parity-build-report", "command": "debug build", "model": model, "started": started, "check": argv}
    try:
        outcomes = session.repeat_judged(make_artifact, until)
    except ParityError as exc:
        if report:
            write_debug_report(report, session, exit_code=exc.exit_code, error=str(exc), **fields)
        raise
    result = BuildResult([v == "bad" for v in outcomes], session.finish(), errors, list(outcomes), session)
    if report:
        found = {
            "until": str(until),
            "builds": len(outcomes),
            "good": result.good,
            "bad": result.bad,
            "unresolved": result.unresolved,
            "build_errors": {str(i): text for i, text in sorted(errors.items())},
            "artifacts_dir": str(params.get("artifacts_dir") or "parity_artifacts"),
            "save_tactics": params.get("save_tactics"),
        }
        write_debug_report(report, session, exit_code=result.exit_code, output=found["artifacts_dir"], result=found, **fields)
    return result
