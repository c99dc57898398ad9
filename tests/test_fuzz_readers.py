"""Fuzzing the readers of saved inputs and outputs: whatever the bytes, only Parity's own errors escape.

Valid files (Parity's zip archives, Polygraphy's JSON) are mutated: bytes flipped, inserted, deleted, the file
truncated; the manifest's JSON and Polygraphy's JSON edited structurally (values replaced by others of any type);
``.npy`` headers rewritten with odd shapes, dtypes and orders. Loading must either work or raise a
:class:`parity.errors.ParityError` (the CLI's one line and exit code), never ``KeyError``, ``MemoryError``,
``zlib.error`` and the like. Examples are derandomized, so a run is reproducible.
"""

from __future__ import annotations

import base64
import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parity.errors import ParityError
from parity.results import load_inputs, load_results, save_inputs, save_results
from parity.results.files import file_kind
from parity.results.model import IterationResult, RunResults

FUZZ = settings(max_examples=700, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))


def _arrays() -> dict[str, np.ndarray]:
    return {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "i64": np.array([1, -2, 3], dtype=np.int64),
        "scalar": np.array(2.5, dtype=np.float16),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
        "empty": np.zeros((0, 3), np.float32),
        "flags": np.array([True, False]),
    }


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


class Seeds(dict):
    def __repr__(self) -> str:  # hypothesis prints a failing example's arguments: not these files' bytes
        return f"Seeds({', '.join(self)})"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, bytes]:
    """The valid files every mutation starts from."""
    d = tmp_path_factory.mktemp("seeds")
    arrays = _arrays()
    save_results(
        RunResults([("onnxrt-0", [IterationResult(arrays, 0.001, "onnxrt-0")] * 2), ("trt-0", [IterationResult({"f32": arrays["f32"]}, 0.002, "trt-0")])]),
        d / "outputs.npz",
    )
    save_inputs([arrays, {"x": arrays["f32"]}], d / "inputs.npz")
    with zipfile.ZipFile(d / "inputs.npz") as src, zipfile.ZipFile(d / "deflated.npz", "w", compression=zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():  # what another zip tool may write: compressed entries
            z.writestr(info.filename, src.read(info))

    def encoded(a: np.ndarray) -> dict:
        return {"array": base64.b64encode(_npy(a)).decode(), "polygraphy_class": "ndarray"}

    poly_outputs = {
        "lst": [
            [
                "onnxrt-runner-N0",
                [
                    {"outputs": {k: encoded(v) for k, v in arrays.items()}, "runtime": 0.01, "runner_name": "onnxrt-runner-N0", "polygraphy_class": "IterationResult"},
                    {
                        "outputs": {"f32": {"values": encoded(arrays["f32"]), "polygraphy_class": "LazyArray"}},
                        "runtime": 0.02,
                        "runner_name": "onnxrt-runner-N0",
                        "polygraphy_class": "IterationResult",
                    },
                ],
            ]
        ],
        "polygraphy_class": "RunResults",
    }
    npz = io.BytesIO()
    np.savez(npz, arrays["i64"])
    poly_inputs = [{k: encoded(v) for k, v in arrays.items()}, {"x": {"array": base64.b64encode(npz.getvalue()).decode(), "polygraphy_class": "ndarray"}}]
    return Seeds(
        {
            "outputs.npz": (d / "outputs.npz").read_bytes(),
            "inputs.npz": (d / "inputs.npz").read_bytes(),
            "deflated.npz": (d / "deflated.npz").read_bytes(),
            "outputs.json": json.dumps(poly_outputs).encode(),
            "inputs.json": json.dumps(poly_inputs).encode(),
        }
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def load_everything(path: Path) -> None:
    """Every public reader on ``path``; whatever loads is touched (memory-mapped data read), so a lie in a
    header that slipped through fails here rather than later in a comparison."""
    try:
        assert file_kind(path) in ("inputs", "outputs")
    except ParityError:
        pass
    for reader in (load_inputs, load_results):
        try:
            loaded = reader(path)
        except ParityError:
            continue
        feeds = [it for _, iters in loaded for it in iters] if isinstance(loaded, RunResults) else loaded
        for feed in feeds:
            for name, array in feed.items():
                assert isinstance(name, str) and isinstance(array, np.ndarray)
                assert array.dtype.kind in "biufcSUmM"
                array.tobytes()


# --- byte-level mutations -----------------------------------------------------------------------------


@st.composite
def byte_mutations(draw, seed_names: list[str]):
    name = draw(st.sampled_from(seed_names))
    ops = draw(
        st.lists(
            st.tuples(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]), st.floats(0, 1, exclude_max=True), st.integers(0, 255), st.integers(1, 64)),
            min_size=1,
            max_size=4,
        )
    )
    return name, ops


def mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op, where, value, length in ops:
        if not buf:
            break
        at = int(where * len(buf))
        if op == "flip":
            buf[at] ^= 1 << (value % 8)
        elif op == "set":
            buf[at] = value
        elif op == "insert":
            buf[at:at] = bytes([value]) * length
        elif op == "delete":
            del buf[at : at + length]
        else:
            del buf[at:]
    return bytes(buf)


@FUZZ
@given(case=byte_mutations(["outputs.npz", "inputs.npz", "deflated.npz"]))
def test_mutated_parity_archives(seeds, scratch, case):
    name, ops = case
    path = scratch / "mutated.npz"
    path.write_bytes(mutate(seeds[name], ops))
    load_everything(path)


@FUZZ
@given(case=byte_mutations(["outputs.json", "inputs.json"]))
def test_mutated_polygraphy_files(seeds, scratch, case):
    name, ops = case
    path = scratch / "mutated.json"
    path.write_bytes(mutate(seeds[name], ops))
    load_everything(path)


# --- structural mutations of the JSON ---------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=12)
    | st.sampled_from(["a/0.npy", "a/99.npy", "parity", "outputs", "inputs", "ndarray", "RunResults", "IterationResult", "LazyArray", "Tensor"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=8) | st.sampled_from(["runs", "runner", "iterations", "outputs", "runtime", "polygraphy_class", "array", "values", "lst"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


def _paths(value, prefix=()):
    """Every path (tuple of keys/indices) into a JSON value, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


def _replace(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _delete(value, path):
    if not path:
        return value
    if len(path) == 1:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k != path[0]}
        return [v for i, v in enumerate(value) if i != path[0]]
    head = path[0]
    if isinstance(value, dict):
        return {**value, head: _delete(value[head], path[1:])}
    copy = list(value)
    copy[head] = _delete(copy[head], path[1:])
    return copy


@st.composite
def json_mutations(draw, document):
    doc = document
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
        if action == "replace":
            doc = _replace(doc, path, draw(json_values))
        elif action == "delete":
            doc = _delete(doc, path)
        elif path and isinstance(parent := _get(doc, path[:-1]), list):
            doc = _replace(doc, path[:-1], [*parent, parent[path[-1]]])  # a repeated runner, iteration, ...
    return doc


def _get(value, path):
    for key in path:
        value = value[key]
    return value


def _rezip(seed: bytes, manifest) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(seed)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename != "parity.json":
                dst.writestr(info.filename, src.read(info))
        dst.writestr("parity.json", json.dumps(manifest))
    return out.getvalue()


@FUZZ
@given(data=st.data(), name=st.sampled_from(["outputs.npz", "inputs.npz"]))
def test_mutated_manifests(seeds, scratch, data, name):
    manifest = json.loads(zipfile.ZipFile(io.BytesIO(seeds[name])).read("parity.json"))
    mutated = data.draw(json_mutations(manifest))
    path = scratch / "manifest.npz"
    path.write_bytes(_rezip(seeds[name], mutated))
    load_everything(path)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["outputs.json", "inputs.json"]))
def test_mutated_polygraphy_json(seeds, scratch, data, name):
    mutated = data.draw(json_mutations(json.loads(seeds[name])))
    path = scratch / "structured.json"
    path.write_text(json.dumps(mutated))
    load_everything(path)


# --- .npy headers -------------------------------------------------------------------------------------

dims = st.integers(-3, 2**64) | st.sampled_from([0, 1, 3, 2**31, 2**62, 3037000500])
headers = st.fixed_dictionaries(
    {
        "descr": st.sampled_from(["<f4", ">f8", "|b1", "<i8", "<U3", "|S0", "|V8", "|O", "<M8[s]", "zz", "<f4 ", "<c16", "|u1"])
        | st.just([("a", "<f4"), ("b", "<i4")])
        | st.just(("<f4", (2,))),
        "fortran_order": st.booleans() | st.just(1) | st.none(),
        "shape": st.lists(dims, max_size=4).map(tuple) | st.just([2, 3]) | st.just((1.5,)) | st.just(None),
    }
) | st.dictionaries(st.sampled_from(["descr", "shape", "fortran_order", "extra"]), st.none() | st.integers() | st.text(max_size=4), max_size=4)


@st.composite
def npy_files(draw):
    header = repr(draw(headers))
    if draw(st.booleans()):
        header = mutate(
            header.encode(),
            draw(st.lists(st.tuples(st.sampled_from(["flip", "set", "delete"]), st.floats(0, 1, exclude_max=True), st.integers(32, 126), st.integers(1, 4)), max_size=2)),
        ).decode("latin-1")
    version = draw(st.sampled_from([1, 2, 3, 9]))
    raw = header.encode("latin-1", "replace") + b"\n"
    size = struct.pack("<H", len(raw)) if version == 1 else struct.pack("<I", len(raw))
    return b"\x93NUMPY" + bytes([version, 0]) + size + raw + draw(st.binary(max_size=64))


@FUZZ
@given(payload=npy_files(), where=st.sampled_from(["parity", "parity-deflated", "polygraphy", "polygraphy-npz"]))
def test_hostile_npy_headers(scratch, payload, where):
    if where.startswith("parity"):
        path = scratch / "npy.npz"
        method = zipfile.ZIP_DEFLATED if where.endswith("deflated") else zipfile.ZIP_STORED
        with zipfile.ZipFile(path, "w", compression=method) as z:
            z.writestr("a/0.npy", payload)
            z.writestr("parity.json", json.dumps({"format": "parity", "version": 1, "kind": "inputs", "iterations": [{"x": "a/0.npy"}]}))
    else:
        if where.endswith("npz"):
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as z:
                z.writestr("arr_0.npy", payload)
            payload = buf.getvalue()
        path = scratch / "npy.json"
        path.write_text(json.dumps([{"x": {"array": base64.b64encode(payload).decode(), "polygraphy_class": "ndarray"}}]))
    load_everything(path)


def test_seeds_load(seeds, scratch):
    """The unmutated files load, with the right values (so the fuzzing starts from working files)."""
    arrays = _arrays()
    for name, data in seeds.items():
        path = scratch / name
        path.write_bytes(data)
        feeds = load_inputs(path) if "inputs" in name or "deflated" in name else [it for _, its in load_results(path) for it in its]
        for key, value in feeds[0].items():
            np.testing.assert_array_equal(value, arrays[key])
            assert value.dtype == arrays[key].dtype
