"""Results and input files.

Parity's own format is a ZIP archive (stored, ZIP64) of ``.npy`` arrays plus a ``parity.json`` manifest
written last, so runs can be streamed iteration by iteration and the file is at most a few hundred bytes
bigger than the raw arrays. Any zip or NumPy tool can read it (``numpy.load`` opens it as an npz).
Arrays are memory-mapped on load, so opening a multi-GB golden file costs nothing until it is compared.
Writes are atomic. Polygraphy's JSON files (and their per-iteration directories) are read too, decoding
each base64 ``.npy`` payload with ``allow_pickle=False``: nothing is ever unpickled. A path ending in ``.json``
is written in Polygraphy's JSON format (:class:`parity.results.polygraphy.JsonWriter`), any other in Parity's.

Manifest (``parity.json``)::

    {"format": "parity", "version": 1, "kind": "outputs",
     "runs": [{"runner": "onnxrt-0",
               "iterations": [{"runtime": 0.0012, "outputs": {"y": "a/0.npy"}}]}]}
    {"format": "parity", "version": 1, "kind": "inputs",
     "iterations": [{"x": "a/0.npy"}]}
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from parity.errors import UsageError
from parity.results import npy
from parity.results.model import IterationResult, RunResults, use_files
from parity.util.fs import atomic_write

if TYPE_CHECKING:  # pragma: no cover
    import zipfile  # imported where an archive is opened: with shutil, bz2 and lzma it is ~5 ms of every run

    from parity.results import polygraphy

FORMAT = "parity"
VERSION = 1
MANIFEST = "parity.json"


class ArchiveWriter:
    """Streams a Parity archive into ``handle``: each array as it comes, the manifest on :meth:`finish`.

    ``kind`` is ``"inputs"`` (:meth:`add_inputs`, one feed per iteration) or ``"outputs"`` (:meth:`add_outputs`
    or :meth:`add_run`); ``path`` only names the file in messages."""

    def __init__(self, handle, path: str | Path = "", kind: str = "outputs") -> None:
        import zipfile  # 5 ms at start-up (with shutil, bz2, lzma): a run that saves no file never needs it

        self._zip = zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self._count = 0
        self._path = path
        self.kind = kind
        self._iterations: list[dict[str, str]] = []
        self._runs: dict[str, list[dict]] = {}

    def add(self, array: np.ndarray, where: str = "array") -> str:
        name = f"a/{self._count}.npy"
        self._count += 1
        array = npy.check_writable(array, where)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)  # (not for 0-d arrays: it would make them 1-d)
        with self._zip.open(name, "w", force_zip64=array.nbytes > 2**31) as entry:
            np.lib.format.write_array(entry, array, allow_pickle=False)
        return name

    def add_inputs(self, feed: Mapping[str, np.ndarray]) -> None:
        index = len(self._iterations)
        self._iterations.append({k: self.add(v, npy.input_where(self._path, k, index)) for k, v in feed.items()})

    def add_outputs(self, runner: str, result: IterationResult) -> None:
        iterations = self._runs.setdefault(runner, [])
        index = len(iterations)
        outputs = {k: self.add(v, npy.output_where(self._path, k, runner, index)) for k, v in result.items()}
        iterations.append({"runtime": result.runtime, "outputs": outputs})

    def add_run(self, runner: str, iterations: Iterable[IterationResult]) -> None:
        """A whole run (a runner with no iterations is kept)."""
        self._runs.setdefault(runner, [])
        for it in iterations:
            self.add_outputs(runner, it)

    def discard(self) -> None:
        """Close after a failure: the temporary file is deleted by ``atomic_write`` anyway."""
        with contextlib.suppress(Exception):
            self._zip.close()

    def finish(self) -> None:
        """Add the manifest and close the archive (the handle stays open)."""
        if self.kind == "inputs":
            manifest: dict = {"kind": "inputs", "iterations": self._iterations}
        else:
            manifest = {"kind": "outputs", "runs": [{"runner": r, "iterations": i} for r, i in self._runs.items()]}
        self._zip.writestr(MANIFEST, json.dumps({"format": FORMAT, "version": VERSION, **manifest}, indent=1))
        self._zip.close()


def is_json(path: str | Path) -> bool:
    """Whether Parity writes ``path`` in Polygraphy's JSON format (a ``.json`` suffix) rather than its archive."""
    return Path(path).suffix.lower() == ".json"


def open_writer(handle, path: str | Path, kind: str) -> ArchiveWriter | polygraphy.JsonWriter:
    """The streaming writer for ``path``'s format, writing into ``handle`` (binary): Polygraphy's JSON for a
    ``.json`` suffix, Parity's archive for any other. ``kind`` is ``"inputs"`` or ``"outputs"``."""
    if is_json(path):
        from parity.results import polygraphy  # it imports zipfile (~3 ms of a run); only .json files need it

        return polygraphy.JsonWriter(handle, path, kind)
    return ArchiveWriter(handle, path, kind)


def check_output_path(path: str | Path, option: str = "output") -> Path:
    """A file path Parity can create or replace, or a one-line usage error naming it, before any work:
    not a directory, and not under a regular file (``notes.txt/out.npz``)."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {p}: is a directory; give a file path, e.g. {p / 'outputs.npz'}")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{option} {p}: cannot create it, {parent} is a file, not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):  # read-only mount or no permission: say so before any work
                raise UsageError(f"{option} {p}: cannot write in {parent} (read-only or no permission)")
            break
    return p


@contextlib.contextmanager
def _writing(path: str | Path, kind: str) -> Iterator[ArchiveWriter | polygraphy.JsonWriter]:
    check_output_path(path)
    with atomic_write(path) as handle:
        writer = open_writer(handle, path, kind)
        try:
            yield writer
            writer.finish()
        except BaseException:
            writer.discard()
            raise


def save_results(results: RunResults, path: str | Path) -> None:
    """Write ``results`` atomically: Polygraphy's ``RunResults`` JSON for a ``.json`` path, else Parity's archive."""
    with _writing(path, "outputs") as writer:
        for runner, iterations in results:
            writer.add_run(runner, iterations)


def save_inputs(feeds: Iterable[Mapping[str, np.ndarray]], path: str | Path) -> None:
    """Write the feeds atomically: Polygraphy's JSON list of feed dicts for a ``.json`` path, else Parity's archive."""
    with _writing(path, "inputs") as writer:
        for feed in feeds:
            writer.add_inputs(feed)


# --- reading ------------------------------------------------------------------------------------------

def _zip_errors() -> tuple[type[BaseException], ...]:
    """What a hostile or damaged zip makes zipfile raise: corrupt deflate data (zlib.error), an unknown compression
    method (NotImplementedError), an encrypted entry (RuntimeError), a bad CRC (BadZipFile), short reads (EOFError)."""
    import zipfile  # 5 ms at start-up (with shutil, bz2, lzma): a run that loads no file never needs it

    return (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, OSError, ValueError, struct.error, OverflowError)


def _open_archive(path: Path) -> tuple[zipfile.ZipFile, dict]:
    import zipfile  # 5 ms at start-up (with shutil, bz2, lzma): a run that loads no file never needs it

    try:
        archive = zipfile.ZipFile(path)
        raw = archive.read(MANIFEST)
    except KeyError:
        raise UsageError(f"{path}: not a Parity results file (a zip without {MANIFEST}), or truncated") from None
    except NotImplementedError as exc:
        raise UsageError(f"{path}: {MANIFEST} uses a zip feature Parity does not read ({exc})") from None
    except _zip_errors() as exc:
        raise UsageError(f"{path}: truncated or not a Parity results file ({_describe(exc)})") from None
    try:
        manifest = json.loads(raw)
    except RecursionError:
        raise UsageError(f"{path}: broken {MANIFEST} (JSON nested too deeply)") from None
    except ValueError as exc:
        raise UsageError(f"{path}: broken {MANIFEST} ({_one_line(exc)})") from None
    if not isinstance(manifest, dict):
        raise UsageError(f"{path}: malformed Parity manifest ({MANIFEST} holds {_a(manifest)}, not an object)")
    if manifest.get("format") != FORMAT:
        raise UsageError(f"{path}: not a Parity results file (format {manifest.get('format')!r:.60})")
    version = manifest.get("version", 0)
    if type(version) is not int:
        raise UsageError(f"{path}: malformed Parity manifest (version {version!r:.60} is not an integer)")
    if version > VERSION:
        raise UsageError(f"{path}: written by a newer Parity (format version {version}); upgrade Parity")
    return archive, manifest


def _describe(exc: BaseException) -> str:
    if isinstance(exc, zlib.error):
        return f"corrupt compressed data: {_one_line(exc)}"
    return f"{type(exc).__name__}: {_one_line(exc)}"


def _a(value: object) -> str:
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _read_array(archive: zipfile.ZipFile, path: Path, name: str) -> np.ndarray:
    """Memory-map a stored ``.npy`` entry (zero copy); read other entries. The header is checked first:
    nothing is allocated or mapped beyond the bytes the file holds."""
    import zipfile  # 5 ms at start-up (with shutil, bz2, lzma): a run that loads no file never needs it

    where = f"{path}: array {name}"
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise UsageError(f"{path}: truncated: missing array {name}") from None
    try:
        if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1:
            with open(path, "rb") as fh:
                fh.seek(info.header_offset)
                local = fh.read(30)
                if len(local) != 30 or local[:4] != b"PK\x03\x04":
                    raise UsageError(f"{where}: corrupt zip entry (no local header)")
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                start = info.header_offset + 30 + name_len + extra_len
                fh.seek(start)
                shape, fortran, dtype = npy.read_header(fh, where)
                data_start = fh.tell()
                present = min(info.file_size - (data_start - start), os.fstat(fh.fileno()).st_size - data_start)
                if npy.check_size(shape, dtype, present, where) == 0:
                    return np.zeros(shape, dtype, order="F" if fortran else "C")
            return np.memmap(path, dtype=dtype, mode="r", offset=data_start, shape=shape, order="F" if fortran else "C")
        with archive.open(name) as entry:
            return npy.from_stream(entry, info.file_size, where)
    except UsageError:
        raise
    except NotImplementedError as exc:
        raise UsageError(f"{where}: uses a zip feature Parity does not read ({exc})") from None
    except (*_zip_errors(), MemoryError) as exc:
        raise UsageError(f"{where}: corrupt ({_describe(exc)})") from None


def _malformed(path: Path, what: str) -> UsageError:
    return UsageError(f"{path}: malformed Parity manifest ({what})")


def _entries(value: object, path: Path, where: str) -> dict[str, str]:
    """``{tensor name: archive entry}`` of one iteration, checked."""
    if not isinstance(value, dict):
        raise _malformed(path, f"{where} is {_a(value)}, not an object of tensor name -> entry")
    for key, entry in value.items():
        if not isinstance(entry, str):
            raise _malformed(path, f"{where}[{key!r:.60}] is {_a(entry)}, not an archive entry name")
    return value


def _list(value: object, path: Path, where: str) -> list:
    if not isinstance(value, list):
        raise _malformed(path, f"{where} is {'missing' if value is None else _a(value)}, not a list")
    return value


def _runs(manifest: dict, path: Path) -> list[tuple[str, list[tuple[float | None, dict[str, str]]]]]:
    """The runs of an outputs manifest, every field checked: ``[(runner, [(runtime, entries), ...]), ...]``."""
    runs = []
    seen: set[str] = set()
    for i, run in enumerate(_list(manifest.get("runs"), path, "runs")):
        if not isinstance(run, dict):
            raise _malformed(path, f"runs[{i}] is {_a(run)}, not an object")
        runner = run.get("runner")
        if not isinstance(runner, str):
            raise _malformed(path, f"runs[{i}].runner is {runner!r:.60}, not a name")
        if runner in seen:
            raise UsageError(f"{path}: runner '{runner}' appears twice; each runner's outputs must be one run")
        seen.add(runner)
        iterations = []
        for j, it in enumerate(_list(run.get("iterations"), path, f"runs[{i}].iterations")):
            if not isinstance(it, dict):
                raise _malformed(path, f"runs[{i}].iterations[{j}] is {_a(it)}, not an object")
            runtime = it.get("runtime")
            if runtime is not None and (type(runtime) not in (int, float)):
                raise _malformed(path, f"runs[{i}].iterations[{j}].runtime is {runtime!r:.60}, not a number of seconds")
            iterations.append((runtime, _entries(it.get("outputs"), path, f"runs[{i}].iterations[{j}].outputs")))
        runs.append((runner, iterations))
    return runs


def _kind(path: Path) -> str:
    if path.is_dir():
        return "polygraphy-dir"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head.startswith(b"PK"):
        return "parity"
    if head[:1] in (b"{", b"["):
        return "polygraphy-json"
    if not head:
        raise UsageError(f"{path}: empty file")
    raise UsageError(f"{path}: not a Parity (zip) or Polygraphy (JSON) results file")


def _check_exists(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"no such file: {p}")
    return p


def load_results(path: str | Path) -> RunResults:
    """Read saved outputs: a Parity archive, a Polygraphy JSON file, or a Polygraphy per-iteration directory."""
    p = _check_exists(path)
    kind = _kind(p)
    if kind != "parity":
        from parity.results import polygraphy

        return polygraphy.load_results(p)
    archive, manifest = _open_archive(p)
    if manifest.get("kind") != "outputs":
        raise UsageError(f"{p}: holds {manifest.get('kind')!s:.60}, not outputs (use it with --load-inputs)")
    results = RunResults()
    for runner, iterations in _runs(manifest, p):
        results.add(runner, [IterationResult({k: _read_array(archive, p, v) for k, v in entries.items()}, runtime, runner) for runtime, entries in iterations])
    return results


def load_inputs(path: str | Path) -> list[dict[str, np.ndarray]]:
    """Read saved inputs (a list of feed dicts) from any supported file."""
    p = _check_exists(path)
    kind = _kind(p)
    if kind != "parity":
        from parity.results import polygraphy

        return polygraphy.load_inputs(p)
    archive, manifest = _open_archive(p)
    if manifest.get("kind") != "inputs":
        raise UsageError(f"{p}: holds {manifest.get('kind')!s:.60}, not inputs (use it with --load-outputs)")
    iterations = _list(manifest.get("iterations"), p, "iterations")
    checked = [_entries(it, p, f"iterations[{i}]") for i, it in enumerate(iterations)]
    return [{k: _read_array(archive, p, v) for k, v in it.items()} for it in checked]


def file_kind(path: str | Path) -> str:
    """``'inputs'`` or ``'outputs'``, whatever the format (``parity inspect data`` uses it)."""
    p = _check_exists(path)
    kind = _kind(p)
    if kind == "parity":
        held = _open_archive(p)[1].get("kind")
        if held not in ("inputs", "outputs"):
            raise UsageError(f"{p}: malformed Parity manifest (kind {held!r:.60}; expected 'inputs' or 'outputs')")
        return held
    from parity.results import polygraphy

    return polygraphy.file_kind(p)


use_files(save_results, load_results)  # RunResults.save/load: the value type names no format (see parity.results.model)
