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
* Models with external data (a ``*.onnx`` file whose weights are in data files, as ``debug reduce`` and
  ``debug precision`` write their candidates: graph-only files beside one shared copy of the weights): the
  driver (:class:`FileShipper`) ships each data file too, in chunks of :data:`CHUNK_BYTES` (one object each,
  never the whole file in memory), ONCE per run for each (path, size, mtime); a data file whose size or mtime
  changed (``debug precision``'s lowered weights grow during the run) is shipped again. The actor
  (:class:`DataCache`) keeps the data files in a folder of its own for its whole life, fetches a file again
  only when its (path, size, mtime) changed, and writes each check's model beside them under a name of its
  own (onnx and onnxruntime refuse linked data files and locations outside the model's folder), removed after
  the check; the folder goes with the actor (at the end of the run, or swept on its node when it is killed).
  A data file missing on the driver makes the check unresolved ("No such file or directory"), never bad.
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
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from parity.api import (
    BackendError,
    CheckRun,
    Outcome,
    ParityError,
    ThreadExecutor,
    UsageError,
    onnx_external,
    onnx_models,
    run_check_job,
    warn,
    write_bytes_atomic,
)

T = TypeVar("T")
R = TypeVar("R")

CHUNK_BYTES = 128 << 20  # a data file goes to the object store in pieces of this size: bounded memory both sides


@dataclass(frozen=True)
class DataFile:
    """One external data file of a shipped model: ``location`` relative to the model's folder, its driver path,
    size and mtime, and the object refs of its chunks (None: missing on the driver, ``reason`` says why)."""

    location: str
    path: str
    size: int
    mtime: int
    chunks: tuple[Any, ...] | None
    reason: str | None = None


@dataclass(frozen=True)
class ShippedFile:
    """An argv token's file as the driver saw it: path, size, mtime, the object ref of its bytes (None when the
    workers see the driver's files) and, for an ONNX model with external data, its data files."""

    path: str
    size: int
    mtime: int
    ref: Any
    data: tuple[DataFile, ...] = ()


# argv token -> the file it names (sent in a list, so Ray hands the worker the refs, not their values)
Shipped = dict[str, ShippedFile]


class FileShipper:
    """The driver's side: a check's files into Ray's object store, for workers that cannot see them.

    A file named ``*.onnx`` is read as a model (its graph only); when its weights are in external data files,
    those go too, in chunks of ``chunk_bytes`` (one ``put`` each: a multi-GiB file is never one bytes object),
    and ONCE per run for each (path, size, mtime): every candidate of ``debug reduce``/``precision`` shares one
    copy of the weights. A data file whose size or mtime changed (``debug precision``'s lowered weights grow
    during the run) is shipped again, as a new version. A data file missing here is shipped as missing: the
    worker answers like a check that cannot find its input (unresolved, never bad).
    """

    def __init__(self, put: Callable[[Any], Any], chunk_bytes: int = CHUNK_BYTES) -> None:
        self._put = put
        self.chunk_bytes = max(1, int(chunk_bytes))
        self.puts = 0  # data chunks put (tests, reports)
        self._lock = threading.Lock()
        self._path_locks: dict[str, threading.Lock] = {}
        self._data: dict[str, tuple[int, int, tuple[Any, ...]]] = {}  # path -> (size, mtime, chunk refs)

    def ship(self, job: Any, copy: bool = True) -> Shipped:
        """The files ``job`` names (``job.files``, relative to ``job.cwd``) that exist here; ``copy=False``
        (the workers see this machine's files) records only their size and mtime."""
        shipped: Shipped = {}
        for token in job.files:
            path = os.path.join(job.cwd or os.getcwd(), token)
            try:
                st = os.stat(path)
            except OSError:  # the check reports it as it would locally
                continue
            ref, data = None, ()
            if copy:
                ref = self._put(Path(path).read_bytes())
                data = self._model_data(path)
            shipped[token] = ShippedFile(path, st.st_size, st.st_mtime_ns, ref, data)
        return shipped

    def _model_data(self, path: str) -> tuple[DataFile, ...]:
        if not path.endswith(".onnx"):
            return ()
        try:
            model = onnx_models.load(path, ignore_external_data=True)  # the graph only; references checked below
        except ParityError:  # not a model: the check says so
            return ()
        folder = Path(path).parent
        files = []
        for location in onnx_external.external_locations(model):
            if not location or os.path.isabs(location) or ".." in Path(location).parts:
                continue  # onnx and onnxruntime refuse it anywhere: the check fails as it would here
            files.append(self._data_file(location, str(folder / location)))
        return tuple(files)

    def _data_file(self, location: str, path: str) -> DataFile:
        with self._lock:
            lock = self._path_locks.setdefault(path, threading.Lock())
        with lock:  # checks in flight at once ship one copy
            try:
                st = os.stat(path)
            except OSError as exc:
                return DataFile(location, path, 0, 0, None, exc.strerror or "No such file or directory")
            known = self._data.get(path)
            if known is not None and known[:2] == (st.st_size, st.st_mtime_ns):
                return DataFile(location, path, st.st_size, st.st_mtime_ns, known[2])
            try:
                chunks = self._put_chunks(path, st.st_size)
            except OSError as exc:
                return DataFile(location, path, 0, 0, None, exc.strerror or str(exc))
            self._data[path] = (st.st_size, st.st_mtime_ns, chunks)  # an older version's refs go with the checks using them
            return DataFile(location, path, st.st_size, st.st_mtime_ns, chunks)

    def _put_chunks(self, path: str, size: int) -> tuple[Any, ...]:
        refs = []
        with open(path, "rb") as handle:  # the first `size` bytes: what the stat saw (appended data waits for the next version)
            left = size
            while left > 0:
                piece = handle.read(min(self.chunk_bytes, left))
                if not piece:
                    raise OSError(f"shorter than {size} bytes (changed while being read)")
                refs.append(self._put(piece))
                left -= len(piece)
                self.puts += 1
        return tuple(refs)


class DataCache:
    """The worker's side: the data files it fetched, kept in a folder of its own for its whole life.

    One sub-folder per driver folder of data files, where each file sits at its relative ``location``; a data
    file is fetched again only when its (path, size, mtime) changed. A check's model is written beside them
    under a name of its own (onnx and onnxruntime refuse linked data files and locations outside the model's
    folder, so the model goes to the data, not the data to the model) and removed after the check.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.fetched = 0  # data files fetched (tests)
        self._dirs: dict[str, Path] = {}  # driver folder -> sub-folder here
        self._have: dict[Path, tuple[str, int, int]] = {}  # file here -> (driver path, size, mtime)
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.folder), True)

    def place(self, file: ShippedFile, get: Callable[[Any], Any]) -> Path:
        """Write ``file``'s model beside its data files (fetched when new) and return its path here."""
        driver_dir = str(Path(file.path).parent)
        sub = self._dirs.get(driver_dir)
        if sub is None:
            sub = self._dirs[driver_dir] = self.folder / str(len(self._dirs))
        sub.mkdir(parents=True, exist_ok=True)
        for data in file.data:
            target = sub / data.location
            key = (data.path, data.size, data.mtime)
            if self._have.get(target) != key or not target.is_file():
                self._fetch(data, target, get)
                self._have[target] = key
        taken = {Path(d.location).parts[0] for d in file.data}
        stem, suffix = Path(file.path).stem, Path(file.path).suffix
        while True:
            name = f"{stem}-{uuid.uuid4().hex[:8]}{suffix}"
            if name not in taken and not (sub / name).exists():
                break
        model = sub / name
        model.write_bytes(get(file.ref))
        return model

    def _fetch(self, data: DataFile, target: Path, get: Callable[[Any], Any]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
        try:
            with open(part, "wb") as handle:
                for ref in data.chunks or ():
                    handle.write(get(ref))  # one chunk in memory at a time
            os.replace(part, target)
        except BaseException:
            with contextlib.suppress(OSError):
                part.unlink()
            raise
        self.fetched += 1

    def close(self) -> None:
        """Remove the folder (idempotent)."""
        self._finalizer()


def run_job(job: Any, shipped: list[Shipped], cache: DataCache | None = None) -> CheckRun:
    """The worker's side: run ``job`` where its files are (in place, or fetched into a directory of its own;
    a model's external data files into ``cache``, default a folder for this check only)."""
    files = shipped[0]
    for file in files.values():
        for data in file.data:
            if data.chunks is None:  # judged like a check that cannot find its input: unresolved
                return CheckRun(127, f"{data.path}: No such file or directory (a data file of {file.path} on the driver: {data.reason})")
    cwd_ok = job.cwd is None or os.path.isdir(job.cwd)
    seen = [(f.path, f.size, f.mtime) for f in files.values()] + [(d.path, d.size, d.mtime) for f in files.values() for d in f.data]
    if cwd_ok and all(_same_file(path, size, mtime) for path, size, mtime in seen):
        return run_check_job(job)
    workdir = tempfile.mkdtemp(prefix="parity-ray-")
    own_cache = cache is None and any(f.data for f in files.values())
    if own_cache:
        cache = DataCache(os.path.join(workdir, ".data"))
    placed: list[Path] = []
    try:
        mapping = {}
        for token, file in files.items():
            if file.ref is None:  # judged like a check that cannot find its input: unresolved
                return CheckRun(127, f"{file.path}: No such file or directory (not visible on this Ray worker, {socket.gethostname()})")
            import ray

            if file.data and cache is not None:
                dest = str(cache.place(file, ray.get))
                placed.append(Path(dest))
            else:
                dest = os.path.join(workdir, os.path.basename(token))
                Path(dest).write_bytes(ray.get(file.ref))
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
        for path in placed:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if own_cache and cache is not None:
            cache.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _same_file(path: str, size: int, mtime: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_size == size and st.st_mtime_ns == mtime


class CheckWorker:
    """A long-lived Ray actor that runs checks one at a time (Ray runs an actor's calls in order). Models'
    external data files it fetched stay in its :class:`DataCache` folder until :meth:`close` (the driver calls
    it at the end of the run; a killed actor's folder is removed by :func:`sweep`)."""

    def __init__(self) -> None:
        self.cache = DataCache(os.path.join(tempfile.gettempdir(), f"parity-ray-data-{os.getpid()}-{uuid.uuid4().hex[:12]}"))

    def where(self) -> dict[str, Any]:
        import ray

        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "node": ray.get_runtime_context().get_node_id(),
            "folder": str(self.cache.folder),
        }

    def run(self, job: Any, shipped: list[Shipped]) -> CheckRun:
        return run_job(job, shipped, self.cache)

    def close(self) -> None:
        self.cache.close()


def sweep(pid: int, folder: str, wait: float = 10.0) -> None:
    """Remove a killed actor's data folder (run on its node): once its process is gone, so nothing writes there."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        except OSError:
            break
        time.sleep(0.05)
    shutil.rmtree(folder, ignore_errors=True)


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
        self._shipper = FileShipper(self._ray.put)  # holds the data files' refs for the whole run
        self._sweeps: list[Any] = []
        self._actors: list[Any] = []
        self._where: list[Any] = []  # per slot: the ref of its actor's where() (its node, pid and data folder)
        for _ in range(self.jobs):
            actor, where = self._new_actor()
            self._actors.append(actor)
            self._where.append(where)
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

    def _new_actor(self) -> tuple[Any, Any]:
        remote = self._ray.remote(CheckWorker).options(num_cpus=self.cpus, num_gpus=self.gpus, max_restarts=0)
        actor = remote.remote()
        return actor, actor.where.remote()

    def workers(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Where each slot's actor runs: pid, host, CUDA_VISIBLE_DEVICES, Ray node id, data folder."""
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
        shipped = self._shipper.ship(job, copy=not self.shared)
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
                self._actors[slot], self._where[slot] = self._new_actor()
            return self._actors[slot]

    def _replace(self, slot: int, dead: Any) -> None:
        with self._lock:
            if self._actors[slot] is dead:
                self._kill(dead, self._where[slot])
                self._actors[slot] = None

    def cancel(self) -> None:
        """Stop the checks in flight: kill every actor (its checks die with it); new ones start if needed."""
        self._cancelled.set()
        with self._lock:
            actors, self._actors = self._actors, [None] * len(self._actors)
            wheres = list(self._where)
        for actor, where in zip(actors, wheres):
            if actor is not None:
                self._kill(actor, where)

    def _kill(self, actor: Any, where: Any) -> None:
        """Kill an actor (its check dies with it) and remove its data folder on its node once it is gone."""
        ray = self._ray
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
        with contextlib.suppress(Exception):
            info = ray.get(where, timeout=2)
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            pinned = ray.remote(num_cpus=0, max_retries=0)(sweep).options(scheduling_strategy=NodeAffinitySchedulingStrategy(info["node"], soft=False))
            self._sweeps.append(pinned.remote(info["pid"], info["folder"]))

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
        live = [a for a in actors if a is not None]
        closing = [a.close.remote() for a in live]  # each removes its data folder
        for ref in closing:
            with contextlib.suppress(Exception):
                ray.get(ref, timeout=60)
        for actor in live:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        with contextlib.suppress(Exception):  # the folders of the actors killed before
            ray.get(self._sweeps, timeout=15)
        if self._own:
            with contextlib.suppress(Exception):
                ray.shutdown()
