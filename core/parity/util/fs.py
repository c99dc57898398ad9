"""Safe file writes: a crash, Ctrl-C or ``kill -9`` never leaves a half-written file where the user expects one,
nor a temporary file that nothing removes; nothing the user passed in is overwritten.

How a file is written (:func:`atomic_write`), on Linux: the data goes into an unnamed file opened with
``O_TMPFILE`` in the target's directory (it has no name until it is complete, so a killed process leaves
nothing behind), which is then given a name with ``linkat`` through ``/proc/self/fd/N`` (``os.link`` with
``AT_SYMLINK_FOLLOW``, the unprivileged form of ``linkat(fd, "", ..., AT_EMPTY_PATH)``; see open(2), O_TMPFILE)
and renamed onto the target with ``os.replace``. Where ``O_TMPFILE`` is unsupported (other systems, some
filesystems) the data goes into a named temporary, ``.parity-<pid>-<host>-<random>.part``, and every later
write into that directory removes the parts of this host whose process is dead.

Modes: a new file gets the mode the umask (or the directory's default ACL) gives, as ``open()`` would; a
replaced file keeps its permission bits.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO

from parity.errors import ParityError, UsageError

PathArg = str | os.PathLike[str]

_HOST = f"{zlib.crc32(os.uname().nodename.encode()):08x}"
_PART = r"\.parity-(\d+)-([0-9a-f]{8})-[0-9a-z]+\.part\Z"  # compiled (and cached) by re when a directory is cleaned, not at import
_NEW_FILE = 0o666  # as open(); the kernel applies the umask


def part_path(directory: PathArg) -> Path:
    """A fresh temporary name in ``directory`` (``.parity-<pid>-<host>-<random>.part``) that
    :func:`remove_stale_parts` removes once this process is dead (files and folders)."""
    return Path(directory) / f".parity-{os.getpid()}-{_HOST}-{os.urandom(6).hex()}.part"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def remove_stale_parts(directory: PathArg) -> list[Path]:
    """Delete the ``.parity-<pid>-*.part`` files (and folders) of this host in ``directory`` whose writer is dead."""
    removed = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            match = re.match(_PART, entry.name)
            if not match or match.group(2) != _HOST or int(match.group(1)) == os.getpid() or _alive(int(match.group(1))):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    import shutil  # 3 ms at start-up: only a dead writer's leftover folder needs it

                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _open_unnamed(directory: Path) -> int | None:
    """An unnamed file in ``directory`` (O_TMPFILE), or None where the system or filesystem has none."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(directory, flag | os.O_RDWR | os.O_CLOEXEC, _NEW_FILE)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            return None  # EISDIR/ENOENT: kernels or filesystems without O_TMPFILE
        raise


def _open_named(directory: Path) -> tuple[int, Path]:
    while True:
        name = part_path(directory)
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _NEW_FILE), name
        except FileExistsError:
            continue


def _link_fd(fd: int, name: Path) -> bool:
    """``linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH)``: names the unnamed file where linking its /proc/self/fd
    entry is refused (EXDEV in some sandboxes), so a large file is not copied; needs CAP_DAC_READ_SEARCH."""
    import ctypes  # 2.4 ms: only a write where the /proc link is refused needs it (numpy has imported it there)

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.linkat(fd, b"", -100, os.fsencode(name), 0x1000) == 0  # AT_FDCWD, AT_EMPTY_PATH
    except (OSError, AttributeError):
        return False


def _name_unnamed(fd: int, directory: Path) -> Path:
    """Give the unnamed file a (temporary) name; if linking is refused, copy it into a named part."""
    name = part_path(directory)
    try:
        os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
        return name
    except OSError:
        if _link_fd(fd, name):
            return name
    out, name = _open_named(directory)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        while chunk := os.read(fd, 1 << 22):
            os.write(out, chunk)
        os.fchmod(out, stat.S_IMODE(os.fstat(fd).st_mode))
        os.fsync(out)
    except BaseException:
        os.close(out)
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    os.close(out)
    return name


@contextlib.contextmanager
def atomic_write(path: PathArg, mode: str = "wb") -> Iterator[IO]:
    """Write ``path`` so it is either the complete new file or untouched (see the module's docstring). An
    OSError (read-only or full disk, a file where a folder should be) becomes one line naming ``path``."""
    target = Path(path)
    with write_errors(target):
        yield from _atomic_write(target, mode)


@contextlib.contextmanager
def write_errors(target: Path) -> Iterator[None]:
    """An OSError while writing ``target`` becomes one line naming it: exit 3 when the system failed (full disk),
    exit 2 when the path is wrong (read-only, a file where a folder should be)."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO):  # the system, not the path
            raise ParityError(f"cannot write {target}: {reason}") from None
        raise UsageError(f"cannot write {target}: {reason}") from None


def _atomic_write(target: Path, mode: str) -> Iterator[IO]:
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(target).st_mode) & 0o777
    except OSError:
        keep_mode = None
    remove_stale_parts(directory)
    fd = _open_unnamed(directory)
    named: Path | None = None
    if fd is None:
        fd, named = _open_named(directory)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            if keep_mode is not None:
                os.fchmod(handle.fileno(), keep_mode)
            os.fsync(handle.fileno())
            if named is None:
                named = _name_unnamed(handle.fileno(), directory)
        os.replace(named, target)
    except BaseException:
        if named is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(named)
        raise


def kernel_copy(source: int, target: int, length: int, source_offset: int = 0, target_offset: int = 0) -> int:
    """Copy ``length`` bytes between two file descriptors inside the kernel (``copy_file_range``: no trip through
    user space, a server-side copy or a clone where the filesystem offers one). Returns the bytes copied: fewer
    where the system or filesystem cannot, and the caller copies the rest its own way."""
    done = 0
    while done < length and hasattr(os, "copy_file_range"):
        try:
            n = os.copy_file_range(source, target, length - done, source_offset + done, target_offset + done)
        except OSError:
            break
        if n == 0:
            break
        done += n
    return done


def write_bytes_atomic(path: PathArg, data: bytes) -> None:
    with atomic_write(path, "wb") as handle:
        handle.write(data)


def write_text_atomic(path: PathArg, text: str) -> None:
    with atomic_write(path, "w") as handle:
        handle.write(text)


def check_model_path(path: PathArg, what: str = "model") -> Path:
    """The model file the user named, or a one-line UsageError (exit 2: a bad input, not a model that fails)
    saying why it cannot be read; ``what`` names it (``"reference model"``)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{what} not found: {p}")
    if p.is_dir():
        raise UsageError(f"{what} path is a directory: {p}")
    return p


def same_file(a: PathArg, b: PathArg) -> bool:
    """Whether two paths name one file: the same resolved path, or (both existing) the same inode, so a hard
    link or a symlink to a file counts as that file."""
    try:
        if Path(a).resolve() == Path(b).resolve():
            return True
    except (OSError, RuntimeError):  # a symlink loop: compare as written
        if os.path.abspath(a) == os.path.abspath(b):
            return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


Labelled = Mapping[str, "PathArg | Iterable[PathArg] | None"]


def _pairs(paths: PathArg | Labelled | None, default: str) -> list[tuple[str, PathArg]]:
    if paths is None:
        return []
    if isinstance(paths, Mapping):
        out = []
        for label, value in paths.items():
            values = [value] if value is None or isinstance(value, (str, os.PathLike)) else list(value)
            out += [(label, v) for v in values if v]
        return out
    return [(default, paths)] if paths else []


def refuse_overwrite(inputs: PathArg | Labelled | None, *outputs: PathArg | None, **labelled: PathArg | Iterable[PathArg] | None) -> None:
    """Nothing the user passed in is modified, and no two outputs land on one file: a usage error (exit 2)
    naming both paths, raised before any work.

    ``inputs``: the input model's path, or ``{label: path or paths}`` (e.g. ``{"--load-inputs": [...]}``).
    Outputs: paths (labelled "the output") and/or ``label=path`` keywords (e.g. ``**{"--save-outputs": p}``);
    ``None`` is skipped. Paths are compared resolved (symlinks followed) and by inode (hard links).
    """
    sources = _pairs(inputs, "the input model")
    outs = [("the output", o) for o in outputs if o] + _pairs(labelled, "the output")
    for k, (out_label, out) in enumerate(outs):
        for in_label, src in sources:
            if same_file(out, src):
                raise UsageError(f"refusing to overwrite {in_label} ({src}) with {out_label} ({out}); choose another output path")
        for other_label, other in outs[:k]:
            if same_file(out, other):
                raise UsageError(f"{other_label} ({other}) and {out_label} ({out}) are the same file; choose different paths")
