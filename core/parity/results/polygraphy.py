"""Reader for the JSON files Polygraphy writes (``--save-inputs``, ``--save-outputs``), never unpickling.

Arrays are ``{"array": base64(.npy bytes), "polygraphy_class": "ndarray"}``; ``.npy`` and ``.npz`` payloads
are read by :mod:`parity.results.npy`, which checks the header before allocating anything and refuses object
dtypes, so a pickled payload fails with a clear error instead of running code. Torch tensors are refused (their
payload is a pickle). Every problem in a file is a one-line :class:`parity.errors.UsageError` naming it.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from parity.errors import UsageError
from parity.results import npy
from parity.results.model import IterationResult, RunResults

MARKER = "polygraphy_class"


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: broken JSON (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: broken JSON ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to be a Polygraphy file") from None


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
