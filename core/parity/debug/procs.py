"""Keeping check processes on a leash: no check outlives its timeout, a Ctrl-C/SIGTERM/SIGHUP, or Parity.

What is covered (Linux; elsewhere only the process-group kill applies):

* Every check runs in its own session and process group; a timeout or an interrupt SIGKILLs that group.
* Parity makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): a check's descendant whose
  parent dies (e.g. started with ``setsid ... &``, in a group of its own) is re-parented to Parity, not to
  init. Every check runs with ``PARITY_CHECK_ID=<unique>`` in its environment; after a check ends (normally,
  by timeout or by interrupt) Parity SIGKILLs every descendant of its own that still carries that id,
  whatever its session or group, and reaps the orphans. A descendant that clears its environment, or
  that double-forks out of Parity's tree before Parity became a subreaper, is not found.
* The output pipe is read only until the deadline (and briefly after the check exits): a leftover that
  keeps the pipe open cannot hold Parity.
* ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in the check's process (set between fork and exec): if Parity is
  killed with SIGKILL, the kernel kills the check's top process. Its own children are then orphans; they
  are killed too by a small watchdog process (started with the first subprocess check) that waits for
  EOF on a pipe from Parity and then kills every process carrying this Parity's ``PARITY_CHECK_SESSION``
  id. A process that clears its environment escapes it.
* SIGTERM and SIGHUP are handled like Ctrl-C while a debug session runs (:func:`handle_termination`): the
  running checks are killed, the state file keeps every verdict, intermediate files are removed and
  Parity exits with 128 + the signal number (143, 129) after one line.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SESSION_ID = uuid.uuid4().hex[:16]  # this Parity process: PARITY_CHECK_SESSION of every check it starts

_libc = None
_live: set[subprocess.Popen] = set()
_lock = threading.Lock()
stopping = threading.Event()  # set when Parity is interrupted: checks that end now are not verdicts
_watchdog: subprocess.Popen | None = None


def _prctl():
    global _libc
    if not sys.platform.startswith("linux"):
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        except (OSError, AttributeError):
            _libc = False
    return _libc.prctl if _libc else None


def become_subreaper() -> bool:
    """Orphaned descendants of the checks re-parent to this process (Linux >= 3.4); no-op elsewhere."""
    prctl = _prctl()
    return bool(prctl) and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def child_setup() -> None:
    """``preexec_fn`` of a check: die with SIGKILL when the thread that started it (Parity) dies."""
    prctl = _prctl()
    if prctl:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def check_env() -> dict[str, str]:
    """Environment markers of one check: ``PARITY_CHECK_ID`` (this check) and ``PARITY_CHECK_SESSION``."""
    return {"PARITY_CHECK_ID": uuid.uuid4().hex, "PARITY_CHECK_SESSION": SESSION_ID}


def spawn(argv: list[str], **popen: object) -> subprocess.Popen:
    """Start a check (``subprocess.Popen(argv, **popen)``) and register it, under the lock :func:`sweep` reaps
    under: a child that exists and is not registered is an orphan, never a check whose thread has yet to
    register it (reaping a check's zombie makes its ``wait`` return 0 (ECHILD): a failing check read as passing)."""
    with _lock:
        proc = subprocess.Popen(argv, **popen)  # type: ignore[call-overload]
        _live.add(proc)
    return proc


def unregister(proc: subprocess.Popen) -> None:
    with _lock:
        _live.discard(proc)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the check's process group (children included), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)


def kill_all() -> None:
    """Interrupted: kill every running check's group (other threads' checks too)."""
    stopping.set()
    with _lock:
        procs = list(_live)
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(proc.pid, signal.SIGKILL)


def _descendants() -> dict[int, int]:
    """pid -> ppid of every process below this one (Linux /proc), empty elsewhere."""
    parents: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            parents[int(entry)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    me = os.getpid()
    below: dict[int, int] = {}
    frontier = [me]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            if child not in below:
                below[child] = pid
                frontier.append(child)
    return below


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def sweep(check_id: str, skip: int | None = None) -> int:
    """SIGKILL every descendant of Parity carrying ``PARITY_CHECK_ID=check_id`` (in any session or group),
    then reap the orphans re-parented to Parity. Returns how many were killed."""
    if not sys.platform.startswith("linux"):
        return 0
    marker = f"PARITY_CHECK_ID={check_id}".encode()
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(20):  # killing a parent re-parents its children: look again
        found = [pid for pid in _descendants() if pid != skip and pid not in killed and _carries(pid, marker)]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
    children = [pid for pid, ppid in _descendants().items() if ppid == me]
    with _lock:  # no check starts meanwhile (spawn): a child not in _live now is an orphan, not a new check
        ours = {p.pid for p in _live}
        for pid in children:  # orphans (our children now) that are not a running check
            if pid not in ours and (pid in killed or _is_zombie(pid)):
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, 0 if pid in killed else os.WNOHANG)
    return len(killed)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"Z"
    except (OSError, ValueError):
        return False


WATCHDOG = r"""
import ctypes, os, signal, sys
marker = ("PARITY_CHECK_SESSION=" + sys.argv[1]).encode()
def sweep(*_):
    for _ in range(20):
        found = 0
        for e in os.listdir("/proc"):
            if not e.isdigit() or int(e) == os.getpid():
                continue
            try:
                with open("/proc/%s/environ" % e, "rb") as f:
                    if marker in f.read().split(b"\0"):
                        os.kill(int(e), signal.SIGKILL); found += 1
            except OSError:
                pass
        if not found:
            break
    os._exit(0)
signal.signal(signal.SIGTERM, sweep)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
if os.getppid() != int(sys.argv[2]):
    sweep()
sys.stdin.read()  # EOF: Parity is gone, however it died (no parent-death signal: it follows threads)
sweep()
"""


def start_watchdog() -> None:
    """One small process per Parity that kills this Parity's checks when Parity dies (even by SIGKILL)."""
    global _watchdog
    if _watchdog is not None or not sys.platform.startswith("linux"):
        return
    try:
        _watchdog = subprocess.Popen(
            [sys.executable, "-S", "-c", WATCHDOG, SESSION_ID, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C at the terminal does not reach it
            env={k: v for k, v in os.environ.items() if not k.startswith("PARITY_CHECK_")},
        )
    except OSError:
        _watchdog = None
        return
    atexit.register(stop_watchdog)


def stop_watchdog() -> None:
    """Parity exits normally: EOF makes the watchdog sweep (nothing should be left) and exit."""
    global _watchdog
    dog, _watchdog = _watchdog, None
    if dog is None:
        return
    with contextlib.suppress(OSError):
        if dog.stdin:
            dog.stdin.close()
    try:
        dog.wait(timeout=2)
    except subprocess.TimeoutExpired:
        dog.kill()
        with contextlib.suppress(Exception):
            dog.wait(timeout=1)


class Terminated(SystemExit):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C (every ``except BaseException`` cleanup runs: checks killed,
    state kept, intermediates removed), then Parity exits with 128 + the signal number (143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def handle_termination(tell: Callable[[str], None]) -> Callable[[], None]:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` in the main thread (no-op in other threads); ``tell``
    shows the user why the run stopped. Returns a function that restores the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: object) -> None:
        kill_all()
        name = signal.Signals(signum).name
        tell(f"terminated by {name}; the running check was killed and the state file keeps the verdicts (run the same command again to resume)")
        raise Terminated(signum)

    saved = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            with contextlib.suppress(ValueError, OSError):
                saved[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in saved.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old)

    return restore


def prepare() -> None:
    """Before the first subprocess check: become a subreaper and start the watchdog (once)."""
    global _prepared
    with _lock:
        if _prepared:
            return
        _prepared = True
    become_subreaper()
    start_watchdog()


_prepared = False
