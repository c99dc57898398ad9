"""The JSON files Polygraphy writes and reads (``--save-inputs``, ``--save-outputs``): a reader that never
unpickles, and a streaming writer (:class:`JsonWriter`) whose files Polygraphy loads.

Arrays are ``{"array": base64(.npy bytes), "polygraphy_class": "ndarray"}``; ``.npy`` and ``.npz`` payloads
are read by :mod:`parity.results.npy`, which checks the header before allocating anything and refuses object
dtypes, so a pickled payload fails with a clear error instead of running code. Torch tensors are refused (their
payload is a pickle). Every problem in a file is a one-line :class:`parity.errors.UsageError` naming it.

What is written: an inputs file is a JSON list of feed dicts ``{name: array}``; an outputs file is
``{"polygraphy_class": "RunResults", "lst": [[runner, [iteration, ...]], ...]}``, each iteration
``{"polygraphy_class": "IterationResult", "runner_name": ..., "runtime": seconds, "outputs": {name: lazy}}``
with each output wrapped as Polygraphy wraps it, ``{"polygraphy_class": "LazyArray", "values": array}``.
Payloads are the bytes ``np.save(..., allow_pickle=False)`` writes, taken from the array's own memory and
base64-encoded as they stream (:mod:`parity.results.b64`: 1 MiB chunks, on several cores where libcrypto loads).
Reading leaves each large payload in the file: its text is found from its ``.npy`` header, the JSON around it is
parsed alone, and the text is decoded from a read-only map of the file straight into the array's buffer.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import mmap
import os
import re
import secrets
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from parity.errors import UsageError
from parity.results import b64, npy
from parity.results.model import IterationResult, RunResults
from parity.util.fs import write_text_atomic

MARKER = "polygraphy_class"


def _read_json(path: Path) -> Any:
    """The JSON a file holds; a large base64 ``.npy`` payload stays in the file as a :class:`_Payload`, decoded
    straight into its array when read (no copy of the text, its string or its bytes)."""
    try:
        with open(path, "rb") as fh:
            data = _read_skeleton(fh, path)
            if data is not _INLINE:
                return data
            fh.seek(0)
            raw = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return _parse(raw, path)


def _parse(raw: bytes, path: Path) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: broken JSON (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: broken JSON ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to be a Polygraphy file") from None


# --- large payloads, streamed ------------------------------------------------------------------------------

_SPAN_MIN = 1 << 16  # base64 payloads shorter than this many characters are parsed with the JSON text
_INLINE = object()  # _read_skeleton's answer when the file is read as a whole
_VALUE = re.compile(rb'[ \t\r\n]*:[ \t\r\n]*"')


class _Payload:
    """A base64 ``.npy`` payload left in its file: where its text lies and what its header says. Its array is
    decoded chunk by chunk into one preallocated buffer when :func:`decode_array` meets it."""

    __slots__ = ("chars", "dtype", "fortran", "head", "path", "shape", "start")

    def __init__(self, path: Path, start: int, chars: int, head: int, shape: tuple[int, ...], fortran: bool, dtype: np.dtype) -> None:
        self.path, self.start, self.chars, self.head = path, start, chars, head
        self.shape, self.fortran, self.dtype = shape, fortran, dtype

    def read(self, where: str) -> np.ndarray:
        order = "F" if self.fortran else "C"
        size = npy.nbytes(self.shape, self.dtype)
        if size == 0:
            return np.zeros(self.shape, self.dtype, order=order)
        out = np.empty(size, np.uint8)
        try:
            with open(self.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size <= self.start + self.chars:  # changed since it was scanned
                    raise UsageError(f"{where}: truncated array payload (the file ended early)")
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise UsageError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        fault = ""
        try:
            _decode_payload(np.frombuffer(mm, np.uint8, self.chars, self.start), self.head, out)
        except binascii.Error as exc:
            fault = str(exc)  # the traceback, whose frames hold views of the map, goes with ``exc``
        finally:
            with contextlib.suppress(BufferError):  # an interrupt's traceback may still hold a view: closed when freed
                mm.close()
        if fault:
            raise UsageError(f"{where}: undecodable array payload (corrupt base64: {fault})")
        flat = out.view(self.dtype)
        return flat.reshape(self.shape[::-1]).transpose() if self.fortran else flat.reshape(self.shape)


def _decode_payload(text: np.ndarray, head: int, out: np.ndarray) -> None:
    """Decode the base64 ``text`` of a ``.npy`` with ``head`` header bytes into ``out``, the array's bytes: the groups
    that hold the header and the last group (padded) here, every group between straight into ``out``."""
    first = -(-head // 3) * 4  # characters of the groups holding the header
    last = len(text) - 4
    if last < first:  # pragma: no cover - a payload this short is parsed with the JSON text
        raise binascii.Error("shorter than its header")
    lead = b64.a2b(text[:first])[head:]
    tail = b64.a2b(text[last:])
    if len(lead) != first // 4 * 3 - head or len(out) != len(lead) + (last - first) // 4 * 3 + len(tail):
        raise binascii.Error("the data is not as long as its header says")
    out[: len(lead)] = np.frombuffer(lead, np.uint8)
    b64.decode_into(text[first:last], out[len(lead) : len(out) - len(tail)])
    out[len(out) - len(tail) :] = np.frombuffer(tail, np.uint8)


def _payload(mm: mmap.mmap, start: int, path: Path) -> _Payload | None:
    """The large base64 ``.npy`` payload whose text begins at ``start``, or None where it is short, not an
    ``.npy`` or not where its header says it ends (the JSON parser then reads that string as it is)."""
    if mm.find(b'"', start, start + _SPAN_MIN) >= 0:
        return None
    try:
        first = b64.a2b(mm[start : start + 16])
        if first[:6] != npy.MAGIC or first[6] not in (1, 2, 3):
            return None
        head = (10 + struct.unpack("<H", first[8:10])[0]) if first[6] == 1 else (12 + struct.unpack("<I", first[8:12])[0])
        if head > npy.MAX_HEADER + 12:
            return None
        shape, fortran, dtype = npy.read_header(io.BytesIO(b64.a2b(mm[start : start + -(-head // 3) * 4])), str(path))
    except (binascii.Error, UsageError):
        return None  # the whole-text reader reports it, naming the tensor
    chars = -(-(head + npy.nbytes(shape, dtype)) // 3) * 4
    if start + chars >= len(mm):
        present = len(mm) - start
        raise UsageError(f"{path}: truncated or corrupt: an array of shape {list(shape)} {dtype} needs {chars} base64 characters, {present} present")
    return _Payload(path, start, chars, head, shape, fortran, dtype) if mm[start + chars] == ord('"') else None


def _read_skeleton(fh: IO[bytes], path: Path) -> Any:
    """The JSON of ``fh`` with each large array payload replaced by a :class:`_Payload`; ``_INLINE`` when the
    file has none, or where its text is not what Polygraphy writes (the whole-text reader then decides).

    A payload is the string after an ``"array"`` key whose base64 text opens with a ``.npy`` header and ends
    with a quote exactly where that header says the data ends. The JSON parsed is the file's text with each such
    string's content replaced by a unique placeholder: base64 holds no quote or backslash, so the parse is the
    same; each placeholder must come back as the ``array`` of an ``ndarray`` object, or the file is read whole."""
    size = os.fstat(fh.fileno()).st_size
    if size < _SPAN_MIN:
        return _INLINE
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pieces: list[bytes] = []
        payloads: dict[str, _Payload] = {}
        nonce = secrets.token_hex(8)
        pos = 0
        at = mm.find(b'"array"')
        while at >= 0:
            match = _VALUE.match(mm[at + 7 : at + 71])
            found = _payload(mm, at + 7 + match.end(), path) if match else None
            if found is None:
                at = mm.find(b'"array"', at + 7)
                continue
            key = f"@parity:{nonce}:{len(payloads)}"
            pieces += [mm[pos : found.start], key.encode()]
            payloads[key] = found
            pos = found.start + found.chars
            at = mm.find(b'"array"', pos)
        if not payloads:
            return _INLINE
        pieces.append(mm[pos:])
    try:
        data = json.loads(b"".join(pieces).decode("utf-8"))
    except (ValueError, RecursionError):
        return _INLINE  # the whole-text reader names the fault where it lies in the file
    stack = [data]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            value = obj.get("array")
            if isinstance(value, str) and value in payloads and "ndarray" in (obj.get(MARKER), obj.get("polygraphy_serialized_json_type")):
                obj["array"] = payloads.pop(value)
            stack.extend(v for v in obj.values() if isinstance(v, (dict, list)))
        elif isinstance(obj, list):
            stack.extend(v for v in obj if isinstance(v, (dict, list)))
    return _INLINE if payloads else data


def decode_array(obj: Any, where: str) -> np.ndarray:
    for _ in range(8):  # LazyArray wraps an array once; a deeper chain is not a file Polygraphy wrote
        if not isinstance(obj, dict):
            raise UsageError(f"{where}: expected an encoded array, found {type(obj).__name__}")
        cls = obj.get(MARKER) or obj.get("polygraphy_serialized_json_type")
        if cls not in ("LazyArray", "LazyNumpyArray"):
            break
        obj = obj.get("values")
    else:
        raise UsageError(f"{where}: LazyArray nested too deeply")
    if cls == "Tensor":
        raise UsageError(f"{where}: holds a torch tensor, which only unpickling can read; re-save it as numpy")
    payload = obj.get("array")
    if isinstance(payload, _Payload):
        return payload.read(where)
    if not isinstance(payload, str):
        raise UsageError(f"{where}: not a Polygraphy array (class {cls!r:.60})")
    try:
        raw = base64.b64decode(payload.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        try:
            raw = payload.encode("latin-1")  # very old files stored the .npy bytes as a latin-1 string
        except UnicodeEncodeError:
            raise UsageError(f"{where}: undecodable array payload (neither base64 nor latin-1 .npy bytes)") from None
    try:
        return _from_npz(raw, where) if raw.startswith(b"PK") else npy.from_bytes(raw, where)
    except npy.NpyError as exc:
        raise UsageError(f"{exc.where}: undecodable array payload ({exc.reason})") from None


def _from_npz(raw: bytes, where: str) -> np.ndarray:
    """The first array of an ``.npz`` payload (old Polygraphy files), checked as any ``.npy``."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = [info for info in archive.infolist() if info.filename.endswith(".npy")]
            if not members:
                raise UsageError(f"{where}: undecodable array payload (a zip holding no .npy array)")
            with archive.open(members[0]) as entry:
                return npy.from_stream(entry, members[0].file_size, f"{where} ({members[0].filename})")
    except UsageError:
        raise
    except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, OSError, ValueError, struct.error, OverflowError, MemoryError) as exc:
        raise UsageError(f"{where}: undecodable array payload (broken .npz: {type(exc).__name__})") from None


def _is_class(obj: Any, name: str) -> bool:
    return isinstance(obj, dict) and (obj.get(MARKER) == name or obj.get("polygraphy_serialized_json_type") == name)


def _feed(obj: Any, where: str) -> dict[str, np.ndarray]:
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a dict of input name -> array")
    return {k: decode_array(v, f"{where}[{k}]") for k, v in obj.items() if k != MARKER}


def _iteration(obj: Any, where: str) -> IterationResult:
    if _is_class(obj, "IterationResult"):
        outs = obj.get("outputs", {})
        runtime = obj.get("runtime")
        if runtime is not None and type(runtime) not in (int, float):
            raise UsageError(f"{where}: runtime {runtime!r:.60} is not a number of seconds")
        name = obj.get("runner_name", "")
        return IterationResult(_feed(outs, where), runtime, name if isinstance(name, str) else str(name))
    return IterationResult(_feed(obj, where))


def _results(data: Any, path: Path) -> RunResults:
    if not _is_class(data, "RunResults") or not isinstance(data.get("lst"), list):
        raise UsageError(f"{path}: not a Polygraphy RunResults file")
    results = RunResults()
    for i, entry in enumerate(data["lst"]):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
            raise UsageError(f"{path}: malformed runner entry {i}")
        name, iterations = entry
        if not isinstance(name, str):
            raise UsageError(f"{path}: malformed runner entry {i} (the runner name is a {type(name).__name__}, not a string)")
        if name in results:
            raise UsageError(f"{path}: runner '{name}' appears twice; each runner's outputs must be one entry")
        results.add(name, [_iteration(it, f"{path}: {name}[{j}]") for j, it in enumerate(iterations)])
    return results


def _dir_files(path: Path) -> list[Path]:
    files = sorted(p for p in path.iterdir() if p.suffix == ".json")
    if not files:
        raise UsageError(f"{path}: directory holds no .json files")
    return files


def load_results(path: Path) -> RunResults:
    if path.is_dir():
        merged = RunResults()
        for file in _dir_files(path):
            for name, iters in _results(_read_json(file), file):
                for it in iters:
                    merged.append_iteration(name, it)
        return merged
    return _results(_read_json(path), path)


def load_inputs(path: Path) -> list[dict[str, np.ndarray]]:
    files = _dir_files(path) if path.is_dir() else [path]
    feeds: list[dict[str, np.ndarray]] = []
    for file in files:
        data = _read_json(file)
        if _is_class(data, "RunResults"):
            raise UsageError(f"{file}: holds outputs (RunResults), not inputs")
        items = data if isinstance(data, list) else [data]
        feeds.extend(_feed(item, f"{file}: iteration {i}") for i, item in enumerate(items))
    return feeds


def file_kind(path: Path) -> str:
    first = _dir_files(path)[0] if path.is_dir() else path
    return "outputs" if _is_class(_read_json(first), "RunResults") else "inputs"


# --- writing --------------------------------------------------------------------------------------------


class _Base64Sink:
    """A write-only file object: what is written to it goes base64-encoded onto ``out`` (binary), in whole
    3-byte groups, so an array of any size is encoded chunk by chunk (:func:`parity.results.b64.encode_to`)."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._rest = b""

    def write(self, data: bytes | memoryview) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        if self._rest:
            take = 3 - len(self._rest)
            self._rest += bytes(view[:take])
            view = view[take:]
            if len(self._rest) < 3:
                return size
            self._out.write(binascii.b2a_base64(self._rest, newline=False))
            self._rest = b""
        cut = len(view) - len(view) % 3
        b64.encode_to(self._out.write, view[:cut])
        self._rest = bytes(view[cut:])
        return size

    def close(self) -> None:
        if self._rest:
            self._out.write(binascii.b2a_base64(self._rest, newline=False))
            self._rest = b""


def write_npy(out: IO[bytes] | _Base64Sink, array: np.ndarray) -> None:
    """Write the bytes ``np.save(out, array, allow_pickle=False)`` writes, without its copy of the array: the
    header, then the array's own memory (C or Fortran order as np.save picks), or copies of 1 MiB blocks of rows
    where it is neither."""
    header = io.BytesIO()
    fields = np.lib.format.header_data_from_array_1_0(array)
    try:
        np.lib.format.write_array_header_1_0(header, fields)
    except ValueError:  # a header over 64 KiB (very many dimensions): np.save writes format 2.0
        header = io.BytesIO()
        np.lib.format.write_array_header_2_0(header, fields)
    out.write(header.getvalue())
    if array.size == 0:
        return
    if array.flags.c_contiguous or array.flags.f_contiguous:
        flat = (array if array.flags.c_contiguous else array.T).reshape(-1)
        out.write(memoryview(flat.view(np.uint8)))
        return
    rows = max(1, (1 << 20) // max(1, array[0].nbytes))
    for i in range(0, len(array), rows):
        out.write(memoryview(np.ascontiguousarray(array[i : i + rows]).reshape(-1).view(np.uint8)))


def _text(value: Any) -> bytes:
    return json.dumps(value).encode("ascii")


class JsonWriter:
    """Streams Polygraphy's JSON format into ``handle`` (binary), the counterpart of this module's reader.

    The interface is :class:`parity.results.files.ArchiveWriter`'s: ``kind`` ``"inputs"`` takes
    :meth:`add_inputs`, ``"outputs"`` takes :meth:`add_outputs` (a run, iteration by iteration) and
    :meth:`add_run` (a whole run); :meth:`finish` completes the file. Polygraphy's file lists each runner's
    iterations together, so when several runners stream at once the first one's go straight to ``handle`` and
    each other's to an unnamed temporary file beside ``path``, appended on :meth:`finish`: a run still holds
    one iteration in memory at a time. ``path`` names the file in messages."""

    def __init__(self, handle: IO[bytes], path: str | Path, kind: str) -> None:
        self._out = handle
        self._path = path
        self.kind = kind
        self._inputs = 0  # feeds written
        self._runs = 0  # runners begun, in the order their entries appear in the file
        self._open: str | None = None  # the runner whose iterations go straight to the handle
        self._done: set[str] = set()
        self._spools: dict[str, IO[bytes]] = {}
        self._counts: dict[str, int] = {}
        handle.write(b"[" if kind == "inputs" else b'{"polygraphy_class": "RunResults", "lst": [')

    def _tensors(self, out: IO[bytes], tensors: Mapping[str, Any], where: Callable[[str], str], lazy: bool) -> None:
        for n, (name, value) in enumerate(tensors.items()):
            key = str(name)
            if key == MARKER:
                raise UsageError(f"{where(key)}: Polygraphy's JSON format reserves that name; save to a .npz file instead")
            array = npy.check_writable(value, where(key))
            out.write(b"%s\n  %s: " % (b"," if n else b"", _text(key)))
            if lazy:
                out.write(b'{"polygraphy_class": "LazyArray", "values": ')
            out.write(b'{"polygraphy_class": "ndarray", "array": "')
            sink = _Base64Sink(out)
            write_npy(sink, array)
            sink.close()
            out.write(b'"}}' if lazy else b'"}')

    def add_inputs(self, feed: Mapping[str, np.ndarray]) -> None:
        index = self._inputs
        self._out.write(b",\n{" if index else b"\n{")
        self._tensors(self._out, feed, lambda name: npy.input_where(self._path, name, index), lazy=False)
        self._out.write(b"}")
        self._inputs += 1

    def _stream(self, runner: str) -> IO[bytes]:
        """Where ``runner``'s next iteration goes; its entry is begun the first time."""
        if runner == self._open:
            return self._out
        if runner in self._spools:
            return self._spools[runner]
        if runner in self._done:
            raise ValueError(f"runner '{runner}' was already written to {self._path}")
        if self._open is None and not self._spools:
            out = self._out
            self._open = runner
        else:
            out = self._spools[runner] = tempfile.TemporaryFile(dir=Path(self._path).parent)  # noqa: SIM115 - closed by finish or discard
        out.write(b"%s\n[%s, [" % (b"," if self._runs else b"", _text(runner)))
        self._runs += 1
        self._counts[runner] = 0
        return out

    def add_outputs(self, runner: str, result: Mapping[str, np.ndarray]) -> None:
        out = self._stream(runner)
        index = self._counts[runner]
        runtime = getattr(result, "runtime", None)
        head = {"polygraphy_class": "IterationResult", "runner_name": runner, "runtime": None if runtime is None else float(runtime)}
        out.write(b"%s\n %s, \"outputs\": {" % (b"," if index else b"", _text(head)[:-1]))
        self._tensors(out, result, lambda name: npy.output_where(self._path, name, runner, index), lazy=True)
        out.write(b"}}")
        self._counts[runner] = index + 1

    def add_run(self, runner: str, iterations: Iterable[Mapping[str, np.ndarray]]) -> None:
        """A whole run (a runner with no iterations is kept); written straight to the file when no run is open."""
        self._stream(runner)
        for it in iterations:
            self.add_outputs(runner, it)
        if runner == self._open:
            self._out.write(b"]]")
            self._done.add(runner)
            self._open = None

    def finish(self) -> None:
        """Complete the file: append the spooled runs, close the lists (the handle stays open)."""
        if self.kind == "inputs":
            self._out.write(b"\n]\n")
            return
        if self._open is not None:
            self._out.write(b"]]")
            self._done.add(self._open)
            self._open = None
        for runner, spool in list(self._spools.items()):
            spool.write(b"]]")
            spool.seek(0)
            while chunk := spool.read(1 << 22):
                self._out.write(chunk)
            spool.close()
            del self._spools[runner]
            self._done.add(runner)
        self._out.write(b"\n]}\n")

    def discard(self) -> None:
        """Close after a failure (the temporary files have no names: closing them frees them)."""
        for spool in self._spools.values():
            spool.close()
        self._spools.clear()


# --- any object, as Polygraphy's load_json / save_json ---------------------------------------------------

_ARRAY_CLASSES = ("ndarray", "LazyArray", "LazyNumpyArray", "Tensor")


def decode(obj: Any, where: str) -> Any:
    """An object of Polygraphy's JSON rebuilt without unpickling: arrays, ``RunResults``, ``IterationResult``,
    and lists and dicts of them; plain values as they are. Other Polygraphy classes fail with one line."""
    if isinstance(obj, list):
        return [decode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if not isinstance(obj, dict):
        return obj
    cls = obj.get(MARKER) or obj.get("polygraphy_serialized_json_type")
    if cls is None:
        return {k: decode(v, f"{where}[{k}]") for k, v in obj.items()}
    if cls in _ARRAY_CLASSES:
        return decode_array(obj, where)
    if cls == "RunResults":
        return _results(obj, Path(where))
    if cls == "IterationResult":
        return _iteration(obj, where)
    raise UsageError(f"{where}: holds a Polygraphy {str(cls)[:60]} object, which Parity does not read")


def load_json(src: str | Path | IO[str] | IO[bytes], description: str | None = None) -> Any:
    """Polygraphy's ``load_json``: what a Polygraphy JSON file (``--save-inputs``/``--save-outputs``, ``save_json``)
    holds, from a path or an open file, never unpickling. ``description`` names it in messages."""
    if hasattr(src, "read"):
        where = description or getattr(src, "name", None) or "the JSON given"
        text = src.read()  # type: ignore[union-attr]
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"{where}: broken JSON ({exc})") from None
    else:
        where = description or str(src)
        data = _read_json(Path(src))
    try:
        return decode(data, where)
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply to be a Polygraphy file") from None


def encode(obj: Any, where: str = "the object") -> Any:
    """``obj`` as Polygraphy's JSON encoder writes it (arrays as base64 ``.npy`` bytes, never pickled)."""
    if isinstance(obj, RunResults):
        return {MARKER: "RunResults", "lst": [[name, [encode(it, f"{where}: {name}[{i}]") for i, it in enumerate(iters)]] for name, iters in obj]}
    if isinstance(obj, IterationResult):
        outputs = {str(k): {MARKER: "LazyArray", "values": encode(np.asarray(v), f"{where}[{k}]")} for k, v in obj.items()}
        runtime = None if obj.runtime is None else float(obj.runtime)
        return {MARKER: "IterationResult", "runner_name": obj.runner_name, "runtime": runtime, "outputs": outputs}
    if isinstance(obj, np.ndarray):
        buffer = io.BytesIO()
        sink = _Base64Sink(buffer)
        write_npy(sink, npy.check_writable(obj, where))
        sink.close()
        return {MARKER: "ndarray", "array": buffer.getvalue().decode("ascii")}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Mapping):
        return {str(k): encode(v, f"{where}[{k}]") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise UsageError(f"{where}: a {type(obj).__name__} cannot be saved as JSON (arrays, RunResults, lists, dicts and plain values can)")


def to_json(obj: Any) -> str:
    """Polygraphy's ``to_json``: the JSON text of :func:`encode`."""
    return json.dumps(encode(obj), indent=2)


def save_json(obj: Any, dest: str | Path | IO[str], description: str | None = None) -> None:
    """Polygraphy's ``save_json``: ``obj`` in Polygraphy's JSON format, to a path (written atomically) or an open
    text file; Polygraphy's ``load_json`` and Parity's :func:`load_json` read it back."""
    text = json.dumps(encode(obj, description or str(getattr(dest, "name", dest))), indent=2) + "\n"
    if hasattr(dest, "write"):
        dest.write(text)  # type: ignore[union-attr]
        return
    write_text_atomic(dest, text)
