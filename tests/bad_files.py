"""Malformed results and data files, built byte by byte: Parity archives with bad manifests or entries, .npy files
with hand-written headers, Polygraphy JSON payloads. Shared by tests/test_bad_inputs.py and bench/bad_input_run.py."""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

OUT = {"format": "parity", "version": 1, "kind": "outputs", "runs": [{"runner": "r", "iterations": [{"runtime": 0.1, "outputs": {"y": "a/0.npy"}}]}]}
IN = {"format": "parity", "version": 1, "kind": "inputs", "iterations": [{"x": "a/0.npy"}]}


def npy(array=None, header: str | None = None) -> bytes:
    """A ``.npy`` file: of ``array``, or with a hand-written header (and 16 bytes of data)."""
    if header is None:
        buf = io.BytesIO()
        np.save(buf, np.ones((1, 4), np.float32) if array is None else array)
        return buf.getvalue()
    raw = header.encode("latin-1")
    raw += b" " * ((64 - (10 + len(raw) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(raw)) + raw + b"\0" * 16


def shape_header(shape: str, descr: str = "<f4") -> str:
    return f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"


def npy_header(shape: str, descr: str = "<f4") -> bytes:
    """A .npy file with a hand-written header of ``shape`` and ``descr`` (and 16 bytes of data)."""
    return npy(header=shape_header(shape, descr))


def archive(path: Path, manifest=None, entries=None, raw_manifest: str | None = None, method=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in ({"a/0.npy": npy()} if entries is None else entries).items():
            z.writestr(name, data)
        z.writestr("parity.json", raw_manifest if raw_manifest is not None else json.dumps(manifest), compress_type=method)
    return path


def set_method(path: Path, method: int, first_only: bool = False) -> Path:
    """Rewrite the compression method of the zip's entries (local and central headers)."""
    data = bytearray(path.read_bytes())
    for sig, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = data.find(sig)
        while at >= 0:
            data[at + offset : at + offset + 2] = struct.pack("<H", method)
            at = -1 if first_only else data.find(sig, at + 4)
    path.write_bytes(bytes(data))
    return path


def poly_array(raw: bytes) -> dict:
    return {"array": base64.b64encode(raw).decode(), "polygraphy_class": "ndarray"}


def poly_inputs(path: Path, array_obj: dict) -> Path:
    path.write_text(json.dumps([{"x": array_obj}]))
    return path


def poly_outputs(path: Path, runs: list) -> Path:
    path.write_text(json.dumps({"lst": runs, "polygraphy_class": "RunResults"}))
    return path


def poly_iteration(array_obj: dict) -> dict:
    return {"outputs": {"y": array_obj}, "runtime": 0.1, "runner_name": "r", "polygraphy_class": "IterationResult"}


def corrupt_deflated_manifest(path: Path) -> Path:
    archive(path, OUT, method=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    at = data.rfind(b"parity.json", 0, data.find(b"PK\x01\x02")) + len("parity.json")
    for k in range(at + 2, at + 12):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def deflated_entry_with_unknown_method(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a/0.npy", npy(), compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("parity.json", json.dumps(OUT))
    return set_method(path, 77, first_only=True)


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()
