"""Results and input files.

Parity's own format is a ZIP archive (stored, ZIP64) of ``.npy`` arrays plus a ``parity.json`` manifest
written last, so runs can be streamed iteration by iteration and the file is at most a few hundred bytes
bigger than the raw arrays. Any zip or NumPy tool can read it (``numpy.load`` opens it as an npz).
Arrays are memory-mapped on load, so opening a multi-GB golden file costs nothing until it is compared.
Writes are atomic. Polygraphy's JSON files (and their per-iteration directories) are read too, decoding
each base64 ``.npy`` payload with ``allow_pickle=False``: nothing is ever unpickled.

Manifest (``parity.json``)::

    {"format": "parity", "version": 1, "kind": "outputs",
     "runs": [{"runner": "onnxrt-0",
               "iterations": [{"runtime": 0.0012, "outputs": {"y": "a/0.npy"}}]}]}
    {"format": "parity", "version": 1, "kind": "inputs",
     "iterations": [{"x": "a/0.npy"}]}
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from parity.errors import UsageError
from parity.results.model import IterationResult, RunResults
from parity.util.fs import atomic_write

FORMAT = "parity"
VERSION = 1
MANIFEST = "parity.json"


class ArchiveWriter:
    """Streams arrays into a Parity archive; the manifest is added on :meth:`close`."""

    def __init__(self, handle) -> None:
        self._zip = zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED, allowZip64=True)
        self._count = 0

    def add(self, array: np.ndarray) -> str:
        name = f"a/{self._count}.npy"
        self._count += 1
        array = np.asarray(array)
        if array.dtype.hasobject:
            raise UsageError("cannot save object arrays")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)  # (not for 0-d arrays: it would make them 1-d)
        with self._zip.open(name, "w", force_zip64=array.nbytes > 2**31) as entry:
            np.lib.format.write_array(entry, array, allow_pickle=False)
        return name

    def discard(self) -> None:
        """Close after a failure: the temporary file is deleted by ``atomic_write`` anyway."""
        with contextlib.suppress(Exception):
            self._zip.close()

    def close(self, manifest: dict) -> None:
        self._zip.writestr(MANIFEST, json.dumps({"format": FORMAT, "version": VERSION, **manifest}, indent=1))
        self._zip.close()


@contextlib.contextmanager
def _archive(path: str | Path) -> Iterator[ArchiveWriter]:
    with atomic_write(path) as handle:
        writer = ArchiveWriter(handle)
        try:
            yield writer
        except BaseException:
            writer.discard()
            raise


def save_results(results: RunResults, path: str | Path) -> None:
    with _archive(path) as writer:
        runs = []
        for runner, iterations in results:
            iters = []
            for it in iterations:
                iters.append({"runtime": it.runtime, "outputs": {k: writer.add(v) for k, v in it.items()}})
            runs.append({"runner": runner, "iterations": iters})
        writer.close({"kind": "outputs", "runs": runs})


def save_inputs(feeds: Iterable[Mapping[str, np.ndarray]], path: str | Path) -> None:
    with _archive(path) as writer:
        iterations = [{k: writer.add(v) for k, v in feed.items()} for feed in feeds]
        writer.close({"kind": "inputs", "iterations": iterations})


# --- reading ------------------------------------------------------------------------------------------

def _open_archive(path: Path) -> tuple[zipfile.ZipFile, dict]:
    try:
        archive = zipfile.ZipFile(path)
        manifest = json.loads(archive.read(MANIFEST))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise UsageError(f"{path}: truncated or not a Parity results file ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise UsageError(f"{path}: not a Parity results file (format {manifest.get('format')!r})")
    if manifest.get("version", 0) > VERSION:
        raise UsageError(f"{path}: written by a newer Parity (format version {manifest['version']}); upgrade Parity")
    return archive, manifest


def _read_array(archive: zipfile.ZipFile, path: Path, name: str) -> np.ndarray:
    """Memory-map a stored ``.npy`` entry (zero copy); fall back to reading it."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise UsageError(f"{path}: truncated: missing array {name}") from None
    if info.compress_type == zipfile.ZIP_STORED:
        with open(path, "rb") as fh:
            fh.seek(info.header_offset)
            local = fh.read(30)
            if len(local) == 30 and local[:4] == b"PK\x03\x04":
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                start = info.header_offset + 30 + name_len + extra_len
                fh.seek(start)
                try:
                    version = np.lib.format.read_magic(fh)
                    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                    shape, fortran, dtype = read_header(fh)
                except ValueError as exc:
                    raise UsageError(f"{path}: corrupt array {name} ({exc})") from None
                if not dtype.hasobject:
                    data_start = fh.tell()
                    if data_start - start + dtype.itemsize * int(np.prod(shape)) > info.file_size:
                        raise UsageError(f"{path}: truncated array {name}")
                    if int(np.prod(shape)) == 0:
                        return np.zeros(shape, dtype)
                    return np.memmap(path, dtype=dtype, mode="r", offset=data_start, shape=shape, order="F" if fortran else "C")
    with archive.open(name) as entry:
        return np.lib.format.read_array(io.BufferedReader(entry), allow_pickle=False)


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
        raise UsageError(f"{p}: holds {manifest.get('kind')}, not outputs (use it with --load-inputs)")
    results = RunResults()
    try:
        for run in manifest["runs"]:
            iters = [
                IterationResult({k: _read_array(archive, p, v) for k, v in it["outputs"].items()}, it.get("runtime"), run["runner"])
                for it in run["iterations"]
            ]
            results.add(run["runner"], iters)
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{p}: malformed Parity manifest ({exc})") from None
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
        raise UsageError(f"{p}: holds {manifest.get('kind')}, not inputs (use it with --load-outputs)")
    try:
        return [{k: _read_array(archive, p, v) for k, v in it.items()} for it in manifest["iterations"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{p}: malformed Parity manifest ({exc})") from None


def file_kind(path: str | Path) -> str:
    """``'inputs'`` or ``'outputs'``, whatever the format (``parity inspect data`` uses it)."""
    p = _check_exists(path)
    kind = _kind(p)
    if kind == "parity":
        return _open_archive(p)[1].get("kind", "?")
    from parity.results import polygraphy

    return polygraphy.file_kind(p)
