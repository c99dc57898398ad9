"""``parity debug build``: rebuild an engine until a check says good/bad (or N times), sorting each build's
tactic replay and timing cache into ``<artifacts-dir>/good`` or ``/bad`` for ``inspect diff-tactics``.

Loop (as Polygraphy's ``debug build``): build -> write the engine to ``--iter-artifact`` -> run ``--check``
(exit status 0 = good) -> move every ``--artifacts`` path (plus this build's timing cache) to
``good/`` or ``bad/`` with an ``_iterN`` suffix -> stop on ``--until``. A build that fails counts as bad
without running the check. The build step is a parameter so the core debug engine (``parity.debug``) can
drive it once that exists, and so other builders can reuse the sorting.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.errors import ParityError, UsageError

DEFAULT_ITER_ARTIFACT = "parity_debug.engine"
DEFAULT_ARTIFACTS_DIR = "parity_artifacts"
Build = Callable[[str, str, Mapping[str, Any]], None]  # (model, engine path, options)


def parse_until(text: str | int) -> str | int:
    """``good``, ``bad`` or a positive number of iterations."""
    value = str(text).strip().lower()
    if value in ("good", "bad"):
        return value
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise UsageError(f"--until: expected good, bad or a positive number of iterations, got '{text}'")


def timing_cache_path(iter_artifact: str) -> str:
    """Where one build's timing cache goes: beside the engine (``parity_debug.engine`` -> ``parity_debug.timing.cache``)."""
    path = Path(iter_artifact)
    return str(path.with_name(f"{path.stem}.timing.cache"))


def sort_artifacts(paths: Sequence[str], artifacts_dir: str, good: bool, iteration: int) -> list[Path]:
    """Move each existing path to ``artifacts_dir/good|bad/<stem>_iter<N><suffix>``; returns the new paths."""
    target = Path(artifacts_dir) / ("good" if good else "bad")
    moved = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            continue
        suffix = "".join(path.suffixes) if path.name.endswith(".timing.cache") else path.suffix
        stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
        dest = target / f"{stem}_iter{iteration}{suffix}"
        target.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), dest)
        moved.append(dest)
    return moved


def run_check(command: Sequence[str]) -> bool:
    """Run the check command; exit status 0 means good."""
    try:
        return subprocess.run(list(command), check=False).returncode == 0
    except FileNotFoundError:
        raise UsageError(f"--check: command not found: {command[0]}") from None
    except OSError as exc:
        raise UsageError(f"--check: cannot run {shlex.join(command)}: {exc}") from None


@dataclass
class Iteration:
    index: int
    good: bool
    build_error: str | None = None
    artifacts: list[Path] = field(default_factory=list)


@dataclass
class BuildReport:
    iterations: list[Iteration] = field(default_factory=list)

    @property
    def good(self) -> int:
        return sum(it.good for it in self.iterations)

    @property
    def bad(self) -> int:
        return len(self.iterations) - self.good


def trt_build(model: str, engine_path: str, options: Mapping[str, Any]) -> None:
    """Build with the TensorRT plugin (its builder options; our recorder comes in as a build extension)."""
    from parity_trt.factory import convert

    convert(model, engine_path, options)


def debug_build(
    model: str,
    options: Mapping[str, Any],
    check: Sequence[str] | Callable[[], bool] | None,
    until: str | int,
    artifacts: Sequence[str] = (),
    artifacts_dir: str = DEFAULT_ARTIFACTS_DIR,
    iter_artifact: str = DEFAULT_ITER_ARTIFACT,
    build: Build = trt_build,
    report: Callable[[Iteration], None] | None = None,
) -> BuildReport:
    """The Python API of ``parity debug build``; ``check`` is a command line or a callable returning good."""
    until = parse_until(until)
    if not Path(model).exists():
        raise UsageError(f"model not found: {model}")
    if check is None:
        raise UsageError("--check is required: give the command that judges each engine (exit 0 = good)")
    cache = timing_cache_path(iter_artifact)
    options = {**options, "save_timing_cache": cache}
    to_sort = [*dict.fromkeys([*artifacts, cache])]
    result = BuildReport()
    index = 0
    while True:
        index += 1
        for stale in (cache, *(options.get(k) for k in ("save_tactics",))):
            if stale and os.path.exists(stale):  # save_timing_cache merges into an existing file
                os.unlink(stale)
        iteration = Iteration(index, good=False)
        try:
            build(model, iter_artifact, options)
        except ParityError as exc:
            if getattr(exc, "exit_code", None) == 2 or "is not installed" in str(exc):
                raise  # bad options or no TensorRT: every iteration would fail the same way
            iteration.build_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if iteration.build_error is None:
            iteration.good = check() if callable(check) else run_check(check)
        iteration.artifacts = sort_artifacts(to_sort, artifacts_dir, iteration.good, index)
        result.iterations.append(iteration)
        if report is not None:
            report(iteration)
        if until == "good" and iteration.good or until == "bad" and not iteration.good:
            return result
        if isinstance(until, int) and index >= until:
            return result
