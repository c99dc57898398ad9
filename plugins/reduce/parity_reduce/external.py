"""Candidates of a model whose weights are in external data files, written for a check without a copy per check.

``debug reduce`` and ``debug precision`` load the model lazily (``onnx_models.load(path,
load_external_data=False)``): the ModelProto holds the graph and references into the data files, so building
a candidate copies a few kilobytes, whatever the model's size. A check command gets the candidate as a file,
and its external tensors must resolve relative to that file's folder: onnx and onnxruntime refuse absolute
locations, ``..`` and symlinked data files. So :class:`CandidateFiles` keeps one private work folder per run
(``.parity-<pid>-...part``, beside ``--iter-artifact``: where the check's files go anyway, never in the model's
folder), puts the weights there ONCE for the whole run, and each candidate is then only its graph-only ``.onnx``
written there (kilobytes; every check's candidate shares the same data file):

1. a reflink clone of each data file (``FICLONE``: btrfs, XFS, bcachefs, ZFS...): a file of its own that
   shares the original's blocks, so no byte is copied and no disk space is used;
2. elsewhere (ext4, tmpfs...) one copy of each data file, made in the kernel (``copy_file_range``, which
   NFS and some filesystems turn into a server-side copy or a clone), after checking the free space;
3. a HARD LINK only where no copy fits on the disk, with a warning: onnx (1.23: ``onnx.load`` and
   ``onnx.checker``) refuses any data file with more than one link ("potential hardlink attack"), and the
   link is one more on the USER'S file, so while the run lasts onnx refuses the original model too;
   onnxruntime accepts it. That is why a hard link is the last resort and never the default.

``debug precision`` also stores there, once, each fp16/bf16 weight a candidate uses (:meth:`add_data`): at
most half the float32 weights, written the first time a candidate lowers that weight, never per check.

The folder is removed by :meth:`close` (the commands call it when they end), or when the object is collected
or the interpreter exits. Nothing is written in the user's folders but the named outputs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from parity.api import ExternalData, ParityError, UsageError, kernel_copy, onnx_external, part_path, write_bytes_atomic

CLONED = "reflink"
COPIED = "copy"
LINKED = "hard link"
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


class CandidateFiles:
    """The private work folder where each check's candidate is written (see the module docstring).

    :param model: the lazily loaded model (its external tensors say which data files to share).
    :param base_dir: the folder its external data locations are relative to.
    :param near: where to make the work folder (the ``--iter-artifact`` folder; default: the system's temporary
        folder). A reflink clone needs it on the data files' filesystem.
    :param warn: prints the warning of the hard-link last resort.
    """

    ways = (CLONED, COPIED, LINKED)  # tried in this order (tests narrow it)

    def __init__(
        self, model: Any, base_dir: str | os.PathLike[str], near: str | os.PathLike[str] | None = None, warn: Callable[[str], None] | None = None
    ) -> None:
        self.base_dir = Path(base_dir)
        self.locations = onnx_external.external_locations(model)
        parent = Path(near) if near is not None else Path(tempfile.gettempdir())
        self.folder = part_path(parent)
        try:
            self.folder.mkdir(parents=True)
        except OSError as exc:
            raise UsageError(f"cannot make a work folder in {parent} for the checks' models: {exc.strerror or exc}") from None
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.folder), True)
        self._lock = threading.Lock()
        self._scratch: dict[Any, tuple[str, int, int]] = {}
        self.scratch_name = self._free_name("parity_lowered.data")
        self.scratch_bytes = 0
        self.copied_bytes = 0  # bytes of weights written into the folder (a copy: once for the run)
        self._warn = warn
        try:
            self.mode = self._share_data()
        except BaseException:
            self.close()
            raise

    # --- the weights, shared once for the run ---------------------------------------------------------
    def _share_data(self) -> str:
        sources = [(self.base_dir / loc, self.folder / loc) for loc in self.locations]
        for _, target in sources:
            target.parent.mkdir(parents=True, exist_ok=True)
        if CLONED in self.ways and all(clone_file(src, dst) for src, dst in sources):
            return CLONED
        for _, target in sources:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
        total = sum(src.stat().st_size for src, _ in sources)
        free = shutil.disk_usage(self.folder).free
        if COPIED in self.ways and total + (64 << 20) <= free:
            for src, dst in sources:
                try:
                    _copy(src, dst)
                except OSError as exc:
                    raise ParityError(f"cannot copy the weights {src} into {self.folder} for the checks: {exc.strerror or exc}") from None
            self.copied_bytes = total
            return COPIED
        if LINKED in self.ways:
            try:
                for src, dst in sources:
                    os.link(src, dst)
            except OSError:
                pass
            else:
                if self._warn is not None and COPIED in self.ways:
                    self._warn(
                        f"no room for a copy of the weights ({total / 2**30:.2f} GiB, {free / 2**30:.2f} GiB free in {self.folder.parent}): "
                        "the checks' models share them through a hard link, which onnx refuses (onnxruntime does not), "
                        "for the original model too until this run ends"
                    )
                return LINKED
        raise ParityError(
            f"cannot share the weights ({total / 2**30:.2f} GiB) with the checks' models: {self.folder.parent} has "
            f"{free / 2**30:.2f} GiB free and is on another filesystem than {self.base_dir}; choose an --iter-artifact folder with room"
        )

    @property
    def data_dir(self) -> Path:
        """Where the candidates' external tensors resolve (the shared data files and the lowered weights)."""
        return self.folder

    def _free_name(self, name: str) -> str:
        taken = {Path(loc).parts[0] for loc in self.locations}
        stem, n = name, 1
        while name in taken:
            n += 1
            name = f"{Path(stem).stem}-{n}{Path(stem).suffix}"
        return name

    def add_data(self, key: Any, produce: Callable[[], Any]) -> tuple[str, int, int]:
        """``(location, offset, length)`` of data Parity made for the candidates (``debug precision``'s lowered
        weights): ``produce()`` (bytes or an array) is called and appended once per ``key``, page-aligned."""
        with self._lock:
            found = self._scratch.get(key)
            if found is not None:
                return found
            data = memoryview(produce()).cast("B")
            path = self.folder / self.scratch_name
            with open(path, "ab") as handle:
                end = handle.tell()
                offset = end + (-end % onnx_external.ALIGN)
                handle.write(b"\0" * (offset - end))
                handle.write(data)
            self._scratch[key] = found = (self.scratch_name, offset, len(data))
            self.scratch_bytes = offset + len(data)
            return found

    # --- the candidates --------------------------------------------------------------------------------
    def candidate_path(self, name: str) -> Path:
        name = Path(name).name
        if name in {Path(loc).parts[0] for loc in self.locations} or name == self.scratch_name:
            name = f"candidate_{name}"
        return self.folder / name

    def write(self, model: Any, name: str) -> Path:
        """Write ``model`` (a lazily loaded candidate) for a check and return its path: its graph only, beside
        the shared weights (``name``: the check's artifact name, one per job slot)."""
        path = self.candidate_path(name)
        write_bytes_atomic(path, onnx_external.serialize(model, "the candidate"))
        return path

    def remove(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def close(self) -> None:
        """Remove the work folder (idempotent)."""
        self._finalizer()


def clone_file(src: Path, dst: Path) -> bool:
    """``dst`` as a reflink clone of ``src`` (no byte copied); False where the filesystem cannot."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    try:
        with open(src, "rb") as s, open(dst, "wb") as d:
            fcntl.ioctl(d.fileno(), FICLONE, s.fileno())
        return True
    except OSError:
        return False


def _copy(src: Path, dst: Path) -> None:
    """Copy in the kernel where it can (``kernel_copy``), the rest through user space."""
    with open(src, "rb") as s, open(dst, "wb") as d:
        done = kernel_copy(s.fileno(), d.fileno(), os.fstat(s.fileno()).st_size)
        s.seek(done)
        d.seek(done)
        shutil.copyfileobj(s, d, 16 << 20)


def check_location(external: ExternalData | None, outputs: Iterable[str | None]) -> None:
    """``--save-external-data PATH`` is a name relative to each output's folder, and two outputs in one folder
    cannot share it: a usage error before the search rather than a failed write after it."""
    if external is None or not external.location:
        return
    location = external.location
    folders: dict[Path, str] = {}
    for out in outputs:
        if not out:
            continue
        onnx_external.check_location(location, out)
        folder = Path(out).resolve().parent
        if folder in folders:
            raise UsageError(
                f"--save-external-data {location}: {folders[folder]} and {out} are in one folder and would write one data file; "
                "give --save-external-data without a name (each model gets <model>.data) or use two folders"
            )
        folders[folder] = out


