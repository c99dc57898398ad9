"""``--executor ray``: debug checks in long-lived Ray actors, ``--jobs N`` of them in flight.

* One actor per job slot, created when the executor is built and kept for the whole run. An actor holds
  ``--gpus-per-check`` GPUs and ``--cpus-per-check`` CPUs (Ray's ``num_gpus``/``num_cpus``); Ray sets its
  ``CUDA_VISIBLE_DEVICES``, so each check sees only its GPUs. ``parity run`` checks (without
  ``--check-timeout``) run inside the actor's own process, like the local in-process check; other checks run
  as subprocesses of the actor with the same process-group, timeout and sweep rules as locally
  (:func:`parity.api.run_check_job`).
* The session judges every check here (:meth:`CommandCheck.finish`), so verdicts are those of the local executor.
* Files: the check's files (the iteration's artifact, per-slot inputs, ``--iteration-info``) are used in place
  when the worker sees them at the same path with the same size and mtime (a local cluster, a shared file
  system); otherwise the worker fetches them from Ray's object store (the driver puts them there when it
  joined a cluster with nodes other than its own) into a directory of its own, and sends back the
  ``--artifacts`` the check wrote there.
* A worker lost mid-check (its actor process died, its node went away) is replaced and the check rerun once;
  lost again, the check is unresolved, never bad.
* Ctrl-C / SIGTERM (:meth:`RayExecutor.cancel`) kills the busy actors, and with them their checks.
* Without ``--ray-address`` a local Ray is started for the run (``ray.init``) and stopped by :meth:`close`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from parity.api import BackendError, CheckRun, Outcome, ThreadExecutor, UsageError, run_check_job, warn, write_bytes_atomic

T = TypeVar("T")
R = TypeVar("R")

# (driver path, size, mtime_ns, object ref or None) per argv token naming one of the iteration's files
Shipped = dict[str, tuple[str, int, int, Any]]


def run_job(job: Any, shipped: list[Shipped]) -> CheckRun:
    """The worker's side: run ``job`` where its files are (in place, or fetched into a directory of its own)."""
    files = shipped[0]
    cwd_ok = job.cwd is None or os.path.isdir(job.cwd)
    if cwd_ok and all(_same_file(path, size, mtime) for path, size, mtime, _ in files.values()):
        return run_check_job(job)
    workdir = tempfile.mkdtemp(prefix="parity-ray-")
    try:
        mapping = {}
        for token, (path, _size, _mtime, ref) in files.items():
            if ref is None:  # judged like a check that cannot find its input: unresolved
                return CheckRun(127, f"{path}: No such file or directory (not visible on this Ray worker, {socket.gethostname()})")
            import ray

            dest = os.path.join(workdir, os.path.basename(token))
            Path(dest).write_bytes(ray.get(ref))
            mapping[token] = dest
        cwd = job.cwd if cwd_ok else workdir
        run = run_check_job(replace(job, argv=[mapping.get(t, t) for t in job.argv], cwd=cwd))
        if cwd == workdir:  # the --artifacts the check wrote here go back to the driver
            for name in job.collect:
                path = os.path.join(workdir, name)
                if not os.path.isabs(name) and os.path.isfile(path):
                    run.files[name] = Path(path).read_bytes()
        return run
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _same_file(path: str, size: int, mtime: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_size == size and st.st_mtime_ns == mtime


class CheckWorker:
    """A long-lived Ray actor that runs checks one at a time (Ray runs an actor's calls in order)."""

    def where(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def run(self, job: Any, shipped: list[Shipped]) -> CheckRun:
        return run_job(job, shipped)


_DEVICES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR")


def _machine_specific(name: str) -> bool:
    """Variables a Ray worker sets for itself (its devices, Ray's own) or that name this process."""
    return name in _DEVICES or name.startswith(("RAY_", "PARITY_CHECK_")) or name in ("PWD", "OLDPWD", "SHLVL", "_")


def _lost_errors() -> tuple[type[BaseException], ...]:
    import ray.exceptions as rex

    names = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError")
    return tuple(getattr(rex, n) for n in names if isinstance(getattr(rex, n, None), type))


class RayExecutor:
    """The ``ray`` executor (see the module docstring)."""

    def __init__(self, jobs: int = 1, address: str | None = None, gpus_per_check: float = 0.0, cpus_per_check: float | None = None) -> None:
        self.requested = max(1, int(jobs))
        self.jobs = self.requested
        self.address = address
        self.gpus = float(gpus_per_check or 0)
        self.cpus = float(cpus_per_check) if cpus_per_check is not None else (0.0 if self.gpus else 1.0)
        self.lost = 0  # checks whose worker was lost (each rerun once)
        self.note: str | None = None  # why fewer jobs than asked run at once
        self._own = False
        self._closed = False
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._start()
        self._actors: list[Any] = [self._new_actor() for _ in range(self.jobs)]
        atexit.register(self.close)
        try:  # every worker up before the first check: the checks of a batch start together
            self.workers(timeout=300)
        except self._ray.exceptions.GetTimeoutError:
            self.close()
            raise BackendError("--executor ray: the Ray workers did not start within 300 s (is the cluster busy?)") from None

    # --- the cluster -------------------------------------------------------------------------------
    def _start(self) -> None:
        try:
            import ray
        except ImportError:
            raise UsageError('--executor ray needs ray: pip install "parity[ray]"') from None
        self._ray = ray
        settings: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
        if not ray.is_initialized():
            try:
                if self.address is None:  # a local Ray for this run: every job fits, whatever the cores
                    cpus = max(os.cpu_count() or 1, math.ceil(self.requested * self.cpus))
                    ray.init(num_cpus=cpus, **settings)
                    self._own = True
                else:
                    ray.init(address=self.address, **settings)
            except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
                where = f"join the Ray cluster at {self.address}" if self.address else "start a local Ray"
                raise BackendError(f"--executor ray: cannot {where} ({str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__})") from None
        resources = ray.cluster_resources()
        fits = []
        for name, per in (("GPU", self.gpus), ("CPU", self.cpus)):
            if per > 0:
                have = float(resources.get(name, 0))
                if have < per:
                    raise UsageError(f"--{name.lower()}s-per-check {per:g}: the Ray cluster has {have:g} {name}(s)")
                fits.append(int(have // per))
        if fits and min(fits) < self.jobs:
            self.jobs = min(fits)
            self.note = f"--jobs {self.requested}: the Ray cluster holds {self.jobs} check(s) at once with these --gpus/--cpus-per-check"
            warn(self.note)
        here = ray.util.get_node_ip_address()
        self.shared = all(n.get("NodeManagerAddress") == here for n in ray.nodes() if n.get("Alive"))  # one machine: paths are shared

    def _new_actor(self) -> Any:
        remote = self._ray.remote(CheckWorker).options(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0)
        return remote.remote()

    def workers(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Where each slot's actor runs: pid, host, CUDA_VISIBLE_DEVICES."""
        return self._ray.get([a.where.remote() for a in self._actors], timeout=timeout)

    # --- running checks ----------------------------------------------------------------------------
    def map(self, fn: Callable[[int, T], R], items: Sequence[T]) -> list[R]:
        self._cancelled.clear()
        # Ctrl-C, or one check's error: the checks in flight stop too (cancel), the others never start
        return ThreadExecutor(self.jobs, "parity-ray", on_error=self.cancel).map(fn, items)

    def run_check(self, check: Callable[[Any], Outcome], iteration: Any) -> Outcome:
        make_job = getattr(check, "job", None)
        if make_job is None:  # a Python predicate or a question at the terminal: here
            return check(iteration)
        ray = self._ray
        job = make_job(iteration)
        job.cwd = os.path.abspath(job.cwd or os.getcwd())
        if self.shared:  # one machine: the check sees Parity's environment, as locally (but its own GPUs)
            job.env = {**{k: v for k, v in os.environ.items() if not _machine_specific(k)}, **job.env}
        shipped: Shipped = {}
        for token in job.files:
            path = os.path.join(job.cwd, token)
            try:
                st = os.stat(path)
            except OSError:
                continue
            ref = None if self.shared else ray.put(Path(path).read_bytes())
            shipped[token] = (path, st.st_size, st.st_mtime_ns, ref)
        lost = _lost_errors()
        for attempt in range(2):
            if self._cancelled.is_set():
                raise KeyboardInterrupt
            actor = self._actor(iteration.slot)
            try:
                run = ray.get(actor.run.remote(job, [shipped]))
            except lost:
                if self._cancelled.is_set():
                    raise KeyboardInterrupt from None
                self._replace(iteration.slot, actor)
                with self._lock:
                    self.lost += 1
                continue
            for name, data in run.files.items():
                write_bytes_atomic(os.path.join(job.cwd, name), data)
            outcome = check.finish(job, run)  # type: ignore[attr-defined]
            if attempt:
                outcome.note = "; ".join(filter(None, [outcome.note, "rerun: its first Ray worker was lost mid-check"]))
            return outcome
        return Outcome(False, note="its Ray worker was lost mid-check twice (rerun once): no verdict", unresolved=True)

    def _actor(self, slot: int) -> Any:
        with self._lock:
            if self._actors[slot] is None:
                self._actors[slot] = self._new_actor()
            return self._actors[slot]

    def _replace(self, slot: int, dead: Any) -> None:
        with self._lock:
            if self._actors[slot] is dead:
                with contextlib.suppress(Exception):
                    self._ray.kill(dead, no_restart=True)
                self._actors[slot] = None

    def cancel(self) -> None:
        """Stop the checks in flight: kill every actor (its checks die with it); new ones start if needed."""
        self._cancelled.set()
        with self._lock:
            actors, self._actors = self._actors, [None] * len(self._actors)
        for actor in actors:
            if actor is not None:
                with contextlib.suppress(Exception):
                    self._ray.kill(actor, no_restart=True)

    def close(self) -> None:
        """The run ended: release the actors, and stop the local Ray started for it."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            actors, self._actors = self._actors, [None] * len(self._actors)
        ray = self._ray
        if not ray.is_initialized():
            return
        for actor in actors:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
        if self._own:
            with contextlib.suppress(Exception):
                ray.shutdown()
