"""How ``parity run`` drives each runner: warm-up runs (``--warm-up N``), a process of its own
(``--use-subprocess``), and the raw input files Polygraphy's ``--save-input-blob`` writes.

Both modes wrap a built runner in another :class:`parity.backend.base.BaseRunner`, so the streaming loop
(:func:`parity.compare.streaming.stream`) and everything after it see an ordinary runner.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from parity.backend.base import BaseRunner
from parity.errors import BackendError, ParityError, UsageError
from parity.util.fs import atomic_write

# Polygraphy's per-iteration names (polygraphy.json: ITERATION_FILE_INDEX_WIDTH): 0000000000, 0000000001, ...
ITERATION_WIDTH = 10


class _Wrapper(BaseRunner):
    """A runner around another one; its name is the inner runner's (labels, reports and messages unchanged)."""

    def __init__(self, inner: BaseRunner) -> None:
        super().__init__(inner.name)
        self.inner = inner

    def __setattr__(self, key: str, value: Any) -> None:
        super().__setattr__(key, value)
        if key == "name" and "inner" in self.__dict__:  # run() renames twins: the inner runner follows
            self.inner.name = value


class WarmUpRunner(_Wrapper):
    """Before the first timed inference after each activation, ``count`` untimed inferences on that first feed
    (Polygraphy's ``Comparator.run(warm_up=N)``): neither their outputs nor their times are kept."""

    def __init__(self, inner: BaseRunner, count: int) -> None:
        super().__init__(inner)
        self.count = count
        self._warm = False

    def activate_impl(self) -> None:
        self.inner.activate()
        self._warm = False

    def deactivate_impl(self) -> None:
        self.inner.deactivate()

    def get_input_metadata_impl(self) -> Any:
        return self.inner.get_input_metadata()

    def infer(self, feed_dict: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._require_active()
        if not self._warm:
            for _ in range(self.count):
                self.inner.infer(feed_dict)
            self._warm = True
        outputs = self.inner.infer(feed_dict)
        self.last_inference_time = self.inner.last_inference_time
        return outputs


class SubprocessRunner(_Wrapper):
    """Runs ``inner`` in a process of its own (Polygraphy's ``--use-subprocess``): the process is forked when the
    runner activates (the inner runner is built but not loaded, so nothing is pickled), loads the model there,
    serves each inference over a pipe and exits when the runner deactivates. A crash there (a segfault in a
    backend) is one line here, exit 3, and the model's memory goes back with the process."""

    def __init__(self, inner: BaseRunner) -> None:
        super().__init__(inner)
        self._process: Any = None
        self._conn: Any = None
        self._meta: Any = None

    def activate_impl(self) -> None:
        context = multiprocessing.get_context("fork")  # the built runner is inherited, never pickled
        parent, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(self.inner, child), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
        self._meta = self._ask(("meta",))

    def deactivate_impl(self) -> None:
        try:
            if self._conn is not None:
                try:
                    self._conn.send(("stop",))
                    self._ask_done()
                except (OSError, EOFError, ParityError):
                    pass
        finally:
            self._end()

    def get_input_metadata_impl(self) -> Any:
        return self._meta

    def infer(self, feed_dict: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._require_active()
        outputs, seconds = self._ask(("infer", dict(feed_dict)))
        self.last_inference_time = seconds
        return outputs

    def _ask(self, message: tuple) -> Any:
        try:
            self._conn.send(message)
            kind, value = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self._process.join(5)
            code = self._process.exitcode
            self._end()
            raise BackendError(f"{self.name}: its process (--use-subprocess) ended with exit code {code} before answering") from None
        if kind == "error":
            self._end()
            raise value
        return value

    def _ask_done(self) -> None:
        if self._conn.poll(30):
            self._conn.recv()

    def _end(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            self._process.join(5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
            self._process = None


def _serve(runner: BaseRunner, conn: Any) -> None:
    """The runner's process: activate, answer ``meta``/``infer`` until ``stop``, deactivate."""
    try:
        try:
            runner.activate()
            while True:
                message = conn.recv()
                if message[0] == "stop":
                    break
                if message[0] == "meta":
                    conn.send(("ok", runner.get_input_metadata()))
                else:
                    outputs = runner.infer(message[1])
                    conn.send(("ok", ({k: np.asarray(v) for k, v in outputs.items()}, runner.last_inference_time)))
        finally:
            runner.deactivate()
        conn.send(("ok", None))
    except EOFError:  # the parent went away: nothing to answer
        pass
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent as its own error
        conn.send(("error", _portable(exc)))
    finally:
        conn.close()
        os._exit(0)  # no atexit handlers or inherited finalizers of the parent's objects in the child


def _portable(exc: BaseException) -> BaseException:
    """``exc`` as the parent can unpickle it: a ParityError keeps its class and exit code where it pickles;
    anything else becomes a one-line error with the exit code it would have had (3 unless a usage error)."""
    if isinstance(exc, ParityError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # noqa: BLE001 - an unpicklable subclass: its message and exit code survive
            return (UsageError if isinstance(exc, UsageError) else BackendError)(str(exc))
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return BackendError(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def wrap_runners(runners: Sequence[BaseRunner], warm_up: int = 0, use_subprocess: bool = False) -> list[BaseRunner]:
    """The runners as ``parity run`` drives them: ``warm_up`` untimed inferences first, each in its own process."""
    out = []
    for runner in runners:
        if warm_up:
            runner = WarmUpRunner(runner, warm_up)
        if use_subprocess:
            runner = SubprocessRunner(runner)
        out.append(runner)
    return out


class InputBlobWriter:
    """``--save-input-blob DIR``: each iteration's inputs as raw bytes (``ndarray.tofile``), in Polygraphy's
    layout ``DIR/<iteration, 10 digits>/<input name>.bin``. Each file is written atomically; a name that would
    leave its folder is refused."""

    def __init__(self, path: str | os.PathLike[str], flag: str = "--save-input-blob") -> None:
        self.path = Path(path)
        self.flag = flag
        if self.path.exists() and not self.path.is_dir():
            raise UsageError(f"{flag}: {self.path} is a file; it names a folder of per-iteration folders")
        self._index = 0

    def add(self, feed: Mapping[str, np.ndarray]) -> None:
        folder = self.path / f"{self._index:0{ITERATION_WIDTH}d}"
        real = os.path.realpath(folder)
        for name, value in feed.items():
            target = os.path.realpath(folder / f"{name}.bin")
            if os.path.commonpath([target, real]) != real:
                raise UsageError(f"{self.flag}: input name '{name}' would be written outside {folder}")
            with atomic_write(target) as handle:
                handle.write(np.ascontiguousarray(np.asarray(value)).tobytes())
        self._index += 1
