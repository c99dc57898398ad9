"""The iteration engine every ``debug`` command uses.

A :class:`DebugSession` evaluates *candidates*. Each candidate has a ``key`` (same key, same verdict: the
result is cached) and a ``make_artifact(iteration)`` callable that writes the file the check looks at
(``iteration.artifact``). For each new key the session:

1. writes the artifact (``--iter-artifact``, default ``parity_debug.onnx`` / ``parity_debug.engine``) and the
   ``--iteration-info`` JSON, and records the key as *pending* in the state file;
2. runs the check (command, prompt or Python predicate) and takes its verdict: bad (still failing the way
   the original did), good, or unresolved (crashed, timed out, could not find its input, failed otherwise);
3. moves the ``--artifacts`` files to ``<artifacts-dir>/{good,bad,unresolved}/<name>_N<i><ext>``;
4. records the verdict in the state file (atomically), removes the intermediate files, updates progress.

:meth:`DebugSession.original` checks the unchanged input first: its failure signature is what "bad" means
for every later check, and a run whose original does not fail stops at once. When unresolved checks
dominate (more than 3 in 4, once 8 ran), the session stops with :class:`UnresolvedChecks` (exit 3).

One answer whatever the parallelism: a search *consumes* verdicts in the order its serial form asks for them
(:meth:`DebugSession.judge_many`); with ``--jobs`` it may also run checks ahead of time
(``judge_many(..., consume=False)``: speculation), whose verdicts are cached and count only once the search asks
for them. :attr:`DebugSession.consumed` (what ``--report`` lists) and every decision made from it are therefore
the same for every ``--jobs`` and ``--executor``; the speculative checks that went unused are listed apart.

Resuming: the state file maps keys to verdicts (``true`` bad, ``false`` good, ``"unresolved"``). A search strategy is deterministic, so after a crash or
Ctrl-C the same command replays the same keys and gets the recorded verdicts without running checks,
continuing exactly where it stopped. A check that was running when the run died is run again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.debug import procs
from parity.debug.check import BAD, GOOD, UNRESOLVED, Iteration, Outcome, indent_output, slot_path
from parity.debug.executor import Executor, SerialExecutor
from parity.debug.replay import check_replay_target, read_replay, skip_current_path, write_replay
from parity.errors import ExitCode, ParityError, UsageError
from parity.onnx_external import copy_with_data
from parity.reporting import DebugReporter, debug_reporter
from parity.util.fs import write_text_atomic

STATE_FORMAT = "parity-debug-state"
# Stop on dominating unresolved checks only once this many ran, and when more than 3 in 4 are unresolved: a
# region search (staged) legitimately meets a run of unresolved candidates (those missing a node the check
# needs to run at all) before it reaches the failing region; a check that tests nothing is unresolved every time.
MIN_CHECKS_FOR_STOP = 8


class UnresolvedChecks(ParityError):
    """Most checks neither reproduced the failure nor passed: the check is not testing the candidates."""

    exit_code = ExitCode.FAILURE


class OriginalNotFailing(ParityError):
    """The unchanged input does not fail the check (or its check is unresolved): nothing to search."""

    exit_code = ExitCode.USAGE


def _decode(value: Any) -> str:
    if value is True or value == BAD:
        return BAD
    if value is False or value == GOOD:
        return GOOD
    return UNRESOLVED


def _encode(verdict: str) -> Any:
    return {BAD: True, GOOD: False}.get(verdict, UNRESOLVED)


@dataclass
class Candidate:
    key: str
    make_artifact: Callable[[Iteration], Any]
    info: dict[str, Any] = field(default_factory=dict)
    payload: Any = None


@dataclass
class Summary:
    checks: int = 0  # checks run by this process
    resumed: int = 0  # verdicts replayed from the state file
    cached: int = 0  # repeated keys answered from memory
    bad: int = 0
    good: int = 0
    unresolved: int = 0
    seconds: float = 0.0
    check_seconds: float = 0.0
    speculative: int = 0  # checks run ahead (--jobs) whose verdicts the search never used; not in the counts above
    replayed: int = 0  # of ``resumed``: verdicts taken from --load-debug-replay

    @property
    def total(self) -> int:
        return self.checks + self.resumed

    def line(self) -> str:
        ran = self.checks + self.speculative
        per = f" | {self.check_seconds / ran:.3f}s per check" if ran else ""
        from_state = self.resumed - self.replayed
        resumed = f" ({from_state} resumed from the state file)" if from_state else ""
        resumed += f" ({self.replayed} from the debug replay)" if self.replayed else ""
        ahead = f" (+{self.speculative} run ahead in parallel, unused)" if self.speculative else ""
        counts = f"bad: {self.bad}, good: {self.good}, unresolved: {self.unresolved}"
        return f"Finished {self.total} check(s){resumed}{ahead} | {counts} | {self.seconds:.2f}s{per}"

    def pass_rate_line(self) -> str:
        """Polygraphy's summary of an iterating run (debug repeat, build), which scripts written for it read:
        ``Finished 5 iteration(s) | Passed: 5/5 | Pass Rate: 100.0%`` (passed: good; the rate as Polygraphy prints
        the float)."""
        total = self.total
        rate = float(self.good) * 100 / float(total) if total else 0.0
        return f"Finished {total} iteration(s) | Passed: {self.good}/{total} | Pass Rate: {rate}%"


class DebugSession:
    """Evaluates candidates with a check, caching and persisting verdicts (see the module docstring)."""

    def __init__(
        self,
        check: Callable[[Iteration], Outcome],
        *,
        iter_artifact: str = "parity_debug.onnx",
        artifacts: Sequence[str] = (),
        artifacts_dir: str = "parity_artifacts",
        iteration_info: str | None = None,
        state_path: str | None = None,
        fingerprint: Mapping[str, Any] | None = None,
        resume: bool = True,
        remove_intermediate: bool = True,
        executor: Executor | None = None,
        reporter: DebugReporter | None = None,
        label: str = "debug",
        identity: Mapping[str, Any] | None = None,
        load_replay: str | None = None,
        save_replay: str | None = None,
    ) -> None:
        self.check = check
        self.iter_artifact = iter_artifact
        self.artifacts = list(artifacts)
        self.artifacts_dir = Path(artifacts_dir)
        self.iteration_info = iteration_info
        self.state_path = Path(state_path) if state_path else None
        self.fingerprint = _digest(fingerprint or {})
        self.remove_intermediate = remove_intermediate
        self.executor = executor or SerialExecutor()
        self.reporter: DebugReporter = debug_reporter(reporter)
        self.label = label
        self.summary = Summary()
        self.verdicts: dict[str, str] = {}  # key -> good / bad / unresolved
        self._recorded: dict[str, str] = {}  # from the state file, not yet replayed
        self.last_outcome: Outcome | None = None
        self._run_unresolved = 0  # unresolved checks run by this process (for the stop rule)
        self.reference: tuple | None = None  # the original failure's signature (see original())
        self.repeat_verdicts: list[str] = []
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        self._next_index = 0
        self._pending: set[str] = set()
        self._resuming = False  # a matching state file exists: files an interrupted run left are ours
        self.history: list[tuple[int, str, bool]] = []  # (iteration, key, bad)
        # every check in the order it was judged, for --report: iteration, key, verdict (good / bad / unresolved),
        # seconds (None when replayed from the state file), resumed, the candidate's label and size, the check's note
        self.records: list[dict[str, Any]] = []
        self.original_key: str | None = None  # the key original() checked
        # the records the search consumed, in the order its serial form asked for them (see the module docstring)
        self.consumed: list[dict[str, Any]] = []
        self._consumed_keys: set[str] = set()
        self._by_key: dict[str, dict[str, Any]] = {}  # the latest record of each key
        self._consumed_run = 0  # consumed checks run by this process, and those unresolved (for the stop rule)
        self._consumed_unresolved = 0
        if self.state_path:
            _refuse_foreign(self.state_path, "--state", _is_state_file)
        # what the run searches (the model; not the check's options): a replay applies only to the same input
        self.input_id = _digest({"label": label, **(identity if identity is not None else fingerprint or {})})
        self.save_replay = save_replay
        self._replayed: set[str] = set()  # keys whose verdict came from --load-debug-replay
        if save_replay:
            check_replay_target(save_replay)
        if load_replay:
            self._load_replay(load_replay)
        if self.state_path and resume:
            self._load_state()
        if self.iteration_info and not self._resuming:
            _refuse_foreign(Path(self.iteration_info), "--iteration-info", _is_iteration_info)
        if not self._resuming and Path(self.iter_artifact).exists():
            raise UsageError(f"{self.iter_artifact} already exists; remove it or choose another --iter-artifact")
        procs.stopping.clear()
        self._restore_signals = procs.handle_termination(self.reporter.warn)  # SIGTERM/SIGHUP unwind like Ctrl-C

    # --- state -------------------------------------------------------------------------------------
    def _load_state(self) -> None:
        assert self.state_path is not None
        if not self.state_path.is_file():
            return
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            self.reporter.warn(f"ignoring unreadable state file {self.state_path}")
            return
        if state.get("format") != STATE_FORMAT or state.get("fingerprint") != self.fingerprint:
            self.reporter.warn(f"ignoring state file {self.state_path}: it is from a different command, model or check")
            return
        self._resuming = True
        self._recorded.update({k: _decode(v) for k, v in state.get("verdicts", {}).items()})
        self._next_index = int(state.get("next_index", len(self._recorded)))
        if state.get("reference"):
            self.reference = tuple(state["reference"])
        if self._recorded:
            self.reporter.note(f"resuming from {self.state_path}: {len(self._recorded)} verdict(s) recorded")

    def _load_replay(self, path: str) -> None:
        replay = read_replay(path, self.label, self.input_id)
        self._recorded.update(replay.verdicts)
        self._replayed = set(replay.verdicts)
        self._next_index = max(self._next_index, len(replay.verdicts))  # new checks number on after the replayed ones
        if replay.reference:
            self.reference = replay.reference
        self.reporter.note(f"loading iteration information from debug replay {path}: {len(replay.verdicts)} verdict(s)")

    def _write_replay(self, in_flight: Sequence[str] = ()) -> None:
        """--save-debug-replay: every verdict so far; with ``in_flight``, the _skip_current file (those unresolved)."""
        if not self.save_replay:
            return
        verdicts = {**self._recorded, **self.verdicts}
        if in_flight:
            write_replay(skip_current_path(self.save_replay), self.label, self.input_id, {**verdicts, **dict.fromkeys(in_flight, UNRESOLVED)}, self.reference)
        else:
            write_replay(self.save_replay, self.label, self.input_id, verdicts, self.reference)

    def _save_state(self) -> None:
        self._write_replay()
        if not self.state_path:
            return
        verdicts = {k: _encode(v) for k, v in {**self._recorded, **self.verdicts}.items()}
        state = {
            "format": STATE_FORMAT,
            "version": 1,
            "fingerprint": self.fingerprint,
            "label": self.label,
            "next_index": self._next_index,
            "pending": sorted(self._pending),
            "reference": list(self.reference) if self.reference else None,
            "verdicts": verdicts,
        }
        write_text_atomic(self.state_path, json.dumps(state, indent=0))

    def finish(self) -> Summary:
        """The run completed: print the summary and drop the state file (resume is for interrupted runs).
        The summary then counts the checks the search used (the same for every --jobs), and apart those run ahead."""
        self.summary.seconds = time.perf_counter() - self._started
        self.summary = self.consumed_summary()
        self.close()
        self.reporter.close()
        self._restore_signals()
        if self.state_path:
            with contextlib.suppress(FileNotFoundError):
                self.state_path.unlink()
        if self.save_replay:  # the replay stays; its crash-skipping twin is for runs that did not end
            with contextlib.suppress(FileNotFoundError):
                skip_current_path(self.save_replay).unlink()
        return self.summary

    def close(self) -> None:
        """Release the executor's workers (a Ray cluster started for the run stops); idempotent."""
        close = getattr(self.executor, "close", None)
        if close is not None:
            close()

    # --- evaluation --------------------------------------------------------------------------------
    def expect(self, remaining: int | None) -> None:
        """About ``remaining`` more checks are coming (None: the command cannot tell), for the reporter's count
        and time left."""
        self.reporter.expect(remaining)

    def known(self, key: str) -> str | None:
        """The verdict (good / bad / unresolved) for ``key`` if it is known without running a check."""
        if key in self.verdicts:
            return self.verdicts[key]
        return self._recorded.get(key)

    def evaluate(self, key: str, make_artifact: Callable[[Iteration], Any], info: Mapping[str, Any] | None = None, payload: Any = None) -> bool:
        """The verdict for one candidate: True if it is bad (the failure still shows)."""
        return self.evaluate_many([Candidate(key, make_artifact, dict(info or {}), payload)])[0]

    def evaluate_many(self, candidates: Sequence[Candidate]) -> list[bool]:
        """Bad or not, for independent candidates (unresolved is not bad). See :meth:`judge_many`."""
        return [v == BAD for v in self.judge_many(candidates)]

    def judge(self, key: str, make_artifact: Callable[[Iteration], Any], info: Mapping[str, Any] | None = None, payload: Any = None) -> str:
        """The verdict for one candidate: ``"good"``, ``"bad"`` or ``"unresolved"``."""
        return self.judge_many([Candidate(key, make_artifact, dict(info or {}), payload)])[0]

    def original(self, candidate: Candidate, what: str = "the original model", passing_ok: bool = False) -> str:
        """Check the unchanged input first. Its failure signature defines bad for every later check.
        If its check is unresolved, or it passes (unless ``passing_ok``: the caller reports that itself),
        stop with :class:`OriginalNotFailing` (exit 2) saying so."""
        before = self.summary.checks
        self.original_key = candidate.key
        verdict = self.judge_many([candidate], stop_rule=False)[0]
        outcome = self.last_outcome if self.summary.checks > before else None  # None: replayed from the state file
        if verdict == BAD:
            if outcome is not None:
                self.reference = outcome.signature
                with self._lock:
                    self._save_state()
            set_reference = getattr(self.check, "set_reference", None)
            if set_reference is not None:
                set_reference(Outcome(True, signature=self.reference))
            return verdict
        if verdict == GOOD and passing_ok:
            return verdict
        self._show_last_output()
        self.finish()  # an answer, not an interruption: no state file whose stale verdict a rerun would replay
        if verdict == GOOD:
            raise OriginalNotFailing(f"{what} does not fail the check: nothing to search (check the --check command and its --fail-* options)")
        why = outcome.note if outcome is not None and outcome.note else "recorded as unresolved"
        raise OriginalNotFailing(f"the check of {what} is unresolved ({why}): it does not fail as a failure to search; fix the --check command")

    def judge_many(self, candidates: Sequence[Candidate], stop_rule: bool = True, consume: bool = True) -> list[str]:
        """Verdicts for independent candidates, run through the executor (in parallel with ``--jobs``).
        ``consume``: the search uses these verdicts now, in this order (False: checks run ahead, kept for when the
        search asks for them; see the module docstring). Raises :class:`UnresolvedChecks` when unresolved
        checks dominate (among consumed checks)."""
        results: dict[str, str] = {}
        todo: list[Candidate] = []
        for cand in candidates:
            if cand.key in results or any(c.key == cand.key for c in todo):
                continue
            verdict = self._replay(cand, count_cached=consume)
            if verdict is None:
                todo.append(cand)
            else:
                results[cand.key] = verdict
        parallel = self.executor.jobs > 1 and len(todo) > 1
        with self._lock:  # iteration numbers in candidate order, whichever check ends first
            indices = {c.key: self._next_index + i for i, c in enumerate(todo)}
            self._next_index += len(todo)
            self._pending.update(indices)
            if todo:
                self._save_state()
                self._write_replay(in_flight=list(indices))
        try:
            judged = self.executor.map(lambda slot, c: self._run(c, slot, parallel, indices[c.key]), todo)
        except BaseException:  # Ctrl-C / SIGTERM while other jobs run: kill their checks too
            if parallel:
                procs.kill_all()
            cancel = getattr(self.executor, "cancel", None)
            if cancel is not None:
                cancel()
            raise
        for cand, verdict in zip(todo, judged):
            results[cand.key] = verdict
        if consume:
            self.consume([c.key for c in candidates], stop_rule)
        return [results[c.key] for c in candidates]

    def consume(self, keys: Sequence[str], stop_rule: bool = True) -> None:
        """The search uses these keys' verdicts now, in this order (each key once): they join :attr:`consumed`."""
        new = 0
        with self._lock:
            for key in keys:
                if key in self._consumed_keys or key not in self._by_key:
                    continue
                record = self._by_key[key]
                self._consumed_keys.add(key)
                self.consumed.append(record)
                if not record["resumed"]:
                    new += 1
                    self._consumed_run += 1
                    self._consumed_unresolved += record["verdict"] == UNRESOLVED
        if stop_rule and new:
            self._stop_if_unresolved_dominate()

    def consumed_summary(self) -> Summary:
        """:attr:`summary` over the consumed checks (cached, seconds and check seconds as they are), with the
        number of checks run ahead and never used."""
        done = self.summary
        ran = [r for r in self.consumed if not r["resumed"]]
        counts = {v: sum(r["verdict"] == v for r in self.consumed) for v in (BAD, GOOD, UNRESOLVED)}
        replayed = sum(r["resumed"] and r["key"] in self._replayed for r in self.consumed)
        return Summary(
            len(ran),
            len(self.consumed) - len(ran),
            done.cached,
            counts[BAD],
            counts[GOOD],
            counts[UNRESOLVED],
            done.seconds,
            done.check_seconds,
            len(self.speculative()),
            replayed,
        )

    def used(self, key: str) -> bool:
        """Whether the search has used (consumed) this key's verdict."""
        return key in self._consumed_keys

    @property
    def consumed_count(self) -> int:
        """Distinct checks the search used so far (resumed ones included): what ``--max-checks`` counts."""
        return len(self._consumed_keys)

    def speculative(self) -> list[dict[str, Any]]:
        """Checks run ahead (``--jobs``) whose verdicts the search never asked for, in run order."""
        return sorted((r for k, r in self._by_key.items() if k not in self._consumed_keys), key=lambda r: r["iteration"])

    def _stop_if_unresolved_dominate(self) -> None:
        # counted over consumed checks: the checks run ahead with --jobs must not change when the run stops
        ran, unresolved = self._consumed_run, self._consumed_unresolved
        if ran >= MIN_CHECKS_FOR_STOP and 4 * unresolved > 3 * ran:
            self._show_last_output()
            last = self.last_outcome.note if self.last_outcome is not None and self.last_outcome.note else "unresolved"
            raise UnresolvedChecks(
                f"{unresolved} of {ran} checks were unresolved (last: {last}); stopping: the check does not test the candidates (the state file keeps the verdicts)"
            )

    def _show_last_output(self) -> None:
        outcome = self.last_outcome
        if outcome is not None and outcome.output.strip():
            lines = outcome.output.rstrip().splitlines()[-5:]
            self.reporter.note("the check's last output:\n" + indent_output("\n".join(lines)).rstrip("\n"))

    def _replay(self, cand: Candidate, count_cached: bool = True) -> str | None:
        if cand.key in self.verdicts:
            if count_cached and cand.key in self._consumed_keys:  # a verdict run ahead is not a repeat
                self.summary.cached += 1
            return self.verdicts[cand.key]
        if cand.key in self._recorded:
            verdict = self._recorded[cand.key]
            self.verdicts[cand.key] = verdict
            self.summary.resumed += 1
            self._count(verdict)
            replayed = cand.key in self._replayed
            self.reporter.iteration(len(self.history), verdict, 0.0, cand.info, resumed=True, note="from the debug replay" if replayed else "")
            self._record(len(self.history), cand.key, verdict, None, cand.info, "")
            self.history.append((len(self.history), cand.key, verdict == BAD))
            return verdict
        return None

    def _record(self, index: int, key: str, verdict: str, seconds: float | None, info: Mapping[str, Any], note: str) -> None:
        label, size = info.get("label"), info.get("size")
        record = {"iteration": index, "key": key, "verdict": verdict, "seconds": seconds, "resumed": seconds is None}
        record |= {"label": None if label is None else str(label), "size": size if isinstance(size, int) else None, "note": note or None}
        self.records.append(record)
        self._by_key[key] = record

    def elapsed(self) -> float:
        """Seconds since the session started."""
        return time.perf_counter() - self._started

    def _count(self, verdict: str) -> None:
        setattr(self.summary, verdict, getattr(self.summary, verdict) + 1)

    def _run(self, cand: Candidate, slot: int, parallel: bool, index: int) -> str:
        artifact = slot_path(self.iter_artifact, slot, parallel)
        it = Iteration(index, cand.key, artifact, self.iter_artifact, slot, not parallel, dict(cand.info), payload=cand.payload)
        it.collect = [slot_path(name, slot, parallel) for name in self.artifacts if name != self.iter_artifact]
        info_path = None
        try:
            made = cand.make_artifact(it)
            if isinstance(made, (str, os.PathLike)):
                it.artifact = str(made)
            if self.iteration_info:
                info_path = it.slot_path(self.iteration_info)
                info = {"format": "parity-iteration-info", "version": 1, "iteration": index, "key": cand.key, "artifact": it.artifact, **_jsonable(it.info)}
                write_text_atomic(info_path, json.dumps(info, indent=2))
            run_check = getattr(self.executor, "run_check", None)  # a remote executor runs the check elsewhere
            outcome = run_check(self.check, it) if run_check is not None else self.check(it)
        except BaseException:  # Ctrl-C included: leave no intermediate files behind
            self._cleanup(it, info_path)
            raise
        verdict = outcome.verdict
        self._sort_artifacts(verdict, index, it)
        self._cleanup(it, info_path)
        with self._lock:
            self.verdicts[cand.key] = verdict
            self._pending.discard(cand.key)
            self.summary.checks += 1
            self.summary.check_seconds += outcome.seconds
            self._count(verdict)
            if verdict == UNRESOLVED:
                self._run_unresolved += 1
            self.last_outcome = outcome
            self._record(index, cand.key, verdict, outcome.seconds, it.info, outcome.note)
            self.history.append((index, cand.key, verdict == BAD))
            self._save_state()
            if outcome.show_output:
                self.reporter.check_output(outcome.output)
            self.reporter.iteration(index, verdict, outcome.seconds, it.info, note=outcome.note)
        return verdict

    def _sort_artifacts(self, verdict: str, index: int, it: Iteration) -> None:
        for name in self.artifacts:
            src = Path(it.substitutions.get(name, slot_path(name, it.slot, not it.exclusive)))
            if name == self.iter_artifact:
                src = Path(it.artifact)
            if not src.exists():
                continue
            dest_dir = self.artifacts_dir / verdict
            dest_dir.mkdir(parents=True, exist_ok=True)
            base = Path(name)
            dest = dest_dir / f"{base.stem}_N{index}{base.suffix}"
            n = 1
            while dest.exists():  # never overwrite an earlier run's artifact
                dest = dest_dir / f"{base.stem}_N{index}_{n}{base.suffix}"
                n += 1
            if src.is_dir():
                shutil.copytree(src, dest)
            elif not (src.suffix == ".onnx" and copy_with_data(src, dest)):  # a model keeps its external data
                shutil.copy2(src, dest)

    def _cleanup(self, it: Iteration, info_path: str | None) -> None:
        paths = [info_path] if info_path else []
        if self.remove_intermediate:
            paths += [it.artifact, *it.substitutions.values()]
        for path in paths:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(path)

    # --- repeat-style loops (debug repeat / debug build) --------------------------------------------
    def repeat(self, make_artifact: Callable[[Iteration], Any], until: str | int, info: Callable[[int], Mapping[str, Any]] | None = None) -> list[bool]:
        """Check ``until`` N iterations, or until the first ``good``/``bad`` one. Keys are ``N<i>``.
        True for bad; :attr:`repeat_verdicts` has the verdicts (good / bad / unresolved)."""
        return [v == BAD for v in self.repeat_judged(make_artifact, until, info)]

    def repeat_judged(self, make_artifact: Callable[[Iteration], Any], until: str | int, info: Callable[[int], Mapping[str, Any]] | None = None) -> list[str]:
        count, stop = _parse_until(until)
        verdicts: list[str] = self.repeat_verdicts
        verdicts.clear()
        i = 0
        self.expect(count)
        width = max(1, self.executor.jobs)
        while count is None or i < count:
            # a batch of iterations at once (--jobs); verdicts are taken in iteration order, so --until good/bad
            # stops at the first such verdict: later ones of its batch are recorded but do not count
            n = width if count is None else min(width, count - i)
            batch = [Candidate(f"N{j}", make_artifact, dict(info(j) if info else {}) | {"label": f"iteration {j}"}) for j in range(i, i + n)]
            stopped = False
            for cand, verdict in zip(batch, self.judge_many(batch, consume=False)):
                self.consume([cand.key])  # the iterations the serial loop runs; later ones of a stopped batch do not count
                verdicts.append(verdict)
                i += 1
                if stop is not None and verdict == stop:  # unresolved neither stops --until good nor --until bad
                    stopped = True
                    break
            if stopped or i >= 100000:  # safety stop for until good/bad that never comes
                break
        return verdicts


def _parse_until(until: str | int) -> tuple[int | None, str | None]:
    text = str(until).strip().lower()
    if text in ("good", "bad"):
        return None, text
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--until: expected a number, 'good' or 'bad', got '{until}'") from None
    if n < 1:
        raise UsageError("--until: the number of iterations must be at least 1")
    return n, None


def _digest(obj: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(_jsonable(obj), sort_keys=True).encode()).hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def file_fingerprint(path: str) -> str:
    """Cheap identity of an input file (size, mtime and the first MiB) for the state file's fingerprint."""
    p = Path(path)
    st = p.stat()
    with p.open("rb") as f:
        head = hashlib.sha1(f.read(1 << 20)).hexdigest()
    return f"{st.st_size}:{st.st_mtime_ns}:{head}"


def _refuse_foreign(path: Path, option: str, ours: Callable[[Path], bool]) -> None:
    """Parity writes, replaces and finally deletes the --state and --iteration-info files: an existing file it
    did not create (a model, a config) is refused before any work, never overwritten or removed."""
    if path.is_dir() or (path.exists() and not ours(path)):
        raise UsageError(f"{option} {path}: exists and is not a file Parity wrote; choose another path (Parity deletes this file when the run ends)")


def _read_json(path: Path) -> Any:
    try:
        if path.stat().st_size > 64 << 20:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _is_state_file(path: Path) -> bool:
    state = _read_json(path)
    return isinstance(state, dict) and state.get("format") == STATE_FORMAT


def _is_iteration_info(path: Path) -> bool:
    info = _read_json(path)
    return isinstance(info, dict) and {"iteration", "key", "artifact"} <= info.keys()
