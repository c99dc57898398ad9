"""Reader for the JSON files Polygraphy writes (``--save-inputs``, ``--save-outputs``), never unpickling.

Arrays are ``{"array": base64(.npy bytes), "polygraphy_class": "ndarray"}``; ``.npy`` and ``.npz`` payloads
are decoded with ``allow_pickle=False``, so an object-array payload fails with a clear error instead of
running code. Torch tensors are refused (their payload is a pickle).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from parity.errors import UsageError
from parity.results.model import IterationResult, RunResults

MARKER = "polygraphy_class"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: broken JSON ({exc})") from None


def decode_array(obj: Any, where: str) -> np.ndarray:
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected an encoded array, found {type(obj).__name__}")
    cls = obj.get(MARKER) or obj.get("polygraphy_serialized_json_type")
    if cls in ("LazyArray", "LazyNumpyArray"):
        return decode_array(obj.get("values"), where)
    if cls == "Tensor":
        raise UsageError(f"{where}: holds a torch tensor, which only unpickling can read; re-save it as numpy")
    payload = obj.get("array")
    if not isinstance(payload, str):
        raise UsageError(f"{where}: not a Polygraphy array (class {cls!r})")
    try:
        raw = base64.b64decode(payload.encode(), validate=True)
    except (binascii.Error, ValueError):
        raw = payload.encode("latin-1")  # very old files stored the .npy bytes as a latin-1 string
    try:
        loaded = np.load(io.BytesIO(raw), allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            loaded = loaded[loaded.files[0]]
        return np.asarray(loaded)
    except (ValueError, OSError, EOFError) as exc:
        raise UsageError(f"{where}: undecodable array payload ({exc})") from None


def _is_class(obj: Any, name: str) -> bool:
    return isinstance(obj, dict) and (obj.get(MARKER) == name or obj.get("polygraphy_serialized_json_type") == name)


def _feed(obj: Any, where: str) -> dict[str, np.ndarray]:
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a dict of input name -> array")
    return {k: decode_array(v, f"{where}[{k}]") for k, v in obj.items() if k != MARKER}


def _iteration(obj: Any, where: str) -> IterationResult:
    if _is_class(obj, "IterationResult"):
        outs = obj.get("outputs", {})
        return IterationResult(_feed(outs, where), obj.get("runtime"), obj.get("runner_name", ""))
    return IterationResult(_feed(obj, where))


def _results(data: Any, path: Path) -> RunResults:
    if not _is_class(data, "RunResults") or not isinstance(data.get("lst"), list):
        raise UsageError(f"{path}: not a Polygraphy RunResults file")
    results = RunResults()
    for i, entry in enumerate(data["lst"]):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
            raise UsageError(f"{path}: malformed runner entry {i}")
        name, iterations = entry
        results.add(str(name), [_iteration(it, f"{path}: {name}[{j}]") for j, it in enumerate(iterations)])
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
