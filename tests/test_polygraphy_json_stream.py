"""Large arrays in Polygraphy's JSON are streamed (issue 30): written as base64 of np.save's bytes chunk by chunk,
read by finding each payload's text in the file and decoding it straight into the array, on libcrypto's base64
over threads or binascii. Files stay interchangeable with the real Polygraphy both ways, byte for byte in the
payloads; a truncated or corrupt payload is one line naming the file."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from parity.errors import UsageError
from parity.results import IterationResult, RunResults, b64, load_inputs, load_results, save_inputs, save_results
from parity.results import polygraphy as pj
from parity.testing import relu_add
from parity.util import fs

polygraphy_comparator = pytest.importorskip("polygraphy.comparator")
polygraphy_json = pytest.importorskip("polygraphy.json")

BIG = 70_000  # elements: every payload below is over the streamed threshold (64 KiB of text)


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "f32_odd": rng.standard_normal((97, 1033)).astype(np.float32),  # 400,804 bytes: not a multiple of 3
        "f16": rng.standard_normal((3, BIG)).astype(np.float16),
        "flags": rng.random(BIG * 3 + 1) > 0.5,
        "i8": rng.integers(-128, 127, BIG + 2, dtype=np.int8),
        "i64": np.arange(BIG, dtype=np.int64) - 5,
        "big_endian": np.arange(BIG, dtype=">f4"),
        "fortran": np.asfortranarray(rng.standard_normal((301, 257))),
        "strided": rng.standard_normal((800, 600))[::2, ::3],
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "small": np.arange(6, dtype=np.int32).reshape(2, 3),
    }


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.fixture(params=["libcrypto", "binascii"])
def codec(request, monkeypatch):
    """Both base64 back ends: libcrypto over threads where it loads, binascii on one thread."""
    if request.param == "binascii":
        monkeypatch.setattr(b64, "_lib", False)
    elif not b64._crypto():
        pytest.skip("libcrypto cannot be loaded here")
    monkeypatch.setattr(b64, "TEXT_CHUNK", 1 << 16)  # several chunks per payload, so the threads share each one
    monkeypatch.setattr(b64, "DATA_CHUNK", 3 << 14)
    return request.param


def _results() -> RunResults:
    return RunResults([
        ("onnxrt-0", [IterationResult(_arrays(0), 0.25, "onnxrt-0"), IterationResult(_arrays(1), None, "onnxrt-0")]),
        ("trt-1", [IterationResult({"y": _arrays(2)["f32_odd"]}, 1e-3, "trt-1")]),
    ])  # fmt: skip


def test_parity_writes_np_save_bytes_that_polygraphy_loads(tmp_path, codec):
    results = _results()
    path = tmp_path / "out.json"
    save_results(results, path)
    data = json.loads(path.read_text())
    for runner, iterations in results:
        written = dict(data["lst"])[runner]
        for it, entry in zip(iterations, written):
            for name, array in it.items():
                assert base64.b64decode(entry["outputs"][name]["values"]["array"], validate=True) == _npy(array), name
    loaded = polygraphy_comparator.RunResults.load(str(path))
    assert [name for name, _ in loaded] == ["onnxrt-0", "trt-1"]
    for (_, want), (_, got) in zip(results, loaded):
        for it_want, it_got in zip(want, got):
            for name, array in it_want.items():
                _same(it_got[name], array)
    for (_, want), (_, got) in zip(results, load_results(path)):
        for it_want, it_got in zip(want, got):
            assert list(it_got) == list(it_want)
            for name, array in it_want.items():
                _same(it_got[name], array)


def test_parity_streams_what_polygraphy_wrote(tmp_path, codec, monkeypatch):
    arrays = _arrays(3)
    path = tmp_path / "polygraphy.json"
    IterationResult_ = polygraphy_comparator.struct.IterationResult
    polygraphy_comparator.RunResults([("a", [IterationResult_(arrays, 0.5, "a")]), ("b", [IterationResult_({"y": arrays["i64"]}, 0.1, "b")] * 2)]).save(str(path))
    streamed = []
    read = pj._Payload.read
    monkeypatch.setattr(pj._Payload, "read", lambda self, where: streamed.append(where) or read(self, where))
    results = load_results(path)
    assert len(streamed) == 8 + 2  # every payload over 64 KiB of text, none parsed with the JSON text
    for name, array in arrays.items():
        _same(results["a"][0][name], array)
    _same(results["b"][1]["y"], arrays["i64"])


def test_inputs_both_ways(tmp_path, codec):
    feeds = [{"x": _arrays(4)["f32_odd"], "mask": _arrays(4)["flags"]}, {"x": _arrays(5)["f32_odd"], "mask": _arrays(5)["flags"]}]
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    save_inputs(feeds, ours)
    polygraphy_json.save_json(feeds, str(theirs))
    for path in (ours, theirs):
        for want, got in zip(feeds, load_inputs(path)):
            _same(got["x"], want["x"])
            _same(got["mask"], want["mask"])
    for want, got in zip(feeds, polygraphy_json.load_json(str(ours))):
        _same(got["x"], want["x"])


def test_save_json_of_any_object_writes_np_save_bytes(tmp_path, codec):
    arrays = _arrays(6)
    path = tmp_path / "obj.json"
    pj.save_json({"arrays": arrays, "note": "x"}, path)
    data = json.loads(path.read_text())
    for name, array in arrays.items():
        assert base64.b64decode(data["arrays"][name]["array"], validate=True) == _npy(array), name
    back = pj.load_json(path)
    assert back["note"] == "x"
    for name, array in arrays.items():
        _same(back["arrays"][name], array)


def test_the_file_is_atomic_with_the_umask_mode_and_no_temp_files(tmp_path):
    path = tmp_path / "out.json"
    save_results(_results(), path)
    umask = os.umask(0)
    os.umask(umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_unnamed_file_is_named_without_a_copy_where_proc_links_are_refused(tmp_path, monkeypatch):
    probe = os.open(tmp_path, os.O_TMPFILE | os.O_RDWR, 0o600) if hasattr(os, "O_TMPFILE") else None
    if probe is None or not fs._link_fd(probe, tmp_path / "probe"):
        pytest.skip("linkat(AT_EMPTY_PATH) is not allowed here")
    os.close(probe)
    os.unlink(tmp_path / "probe")

    def refused(*args, **kwargs):
        raise OSError(18, "Invalid cross-device link")

    def no_copy(*args, **kwargs):
        raise AssertionError("the file was copied")

    monkeypatch.setattr(fs.os, "link", refused)
    monkeypatch.setattr(fs, "_open_named", no_copy)
    arrays = _arrays(7)
    save_results(RunResults([("r", [IterationResult(arrays, 0.1, "r")])]), tmp_path / "out.json")
    _same(load_results(tmp_path / "out.json")["r"][0]["fortran"], arrays["fortran"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def _saved(tmp_path: Path) -> tuple[Path, bytes, int]:
    """A saved file, its bytes, and where its big payload's text begins."""
    path = tmp_path / "out.json"
    save_results(RunResults([("r", [IterationResult({"y": _arrays(8)["f32_odd"]}, 0.1, "r")])]), path)
    raw = path.read_bytes()
    return path, raw, raw.index(b'"array": "') + len(b'"array": "')


def _one_line(exc: pytest.ExceptionInfo, *words: str) -> None:
    message = str(exc.value)
    assert "\n" not in message and all(w in message for w in words), message


@pytest.mark.parametrize("keep", [0.5, 0.999])
def test_a_truncated_file_is_one_line(tmp_path, keep):
    path, raw, start = _saved(tmp_path)
    cut = start + int((len(raw) - start) * keep)
    path.write_bytes(raw[:cut])
    with pytest.raises(UsageError) as exc:
        load_results(path)
    _one_line(exc, str(path), "truncated")


@pytest.mark.parametrize("bad", [b"!", b"=", b'"', b"\\", b"\xff", b" "])
def test_a_corrupt_payload_is_one_line_naming_the_tensor(tmp_path, codec, bad):
    path, raw, start = _saved(tmp_path)
    at = start + (len(raw) - start) // 2
    path.write_bytes(raw[:at] + bad + raw[at + 1 :])
    with pytest.raises(UsageError) as exc:
        load_results(path)
    _one_line(exc, str(path), "r[0][y]", "undecodable array payload")


def test_a_corrupt_header_is_one_line(tmp_path):
    path, raw, start = _saved(tmp_path)
    path.write_bytes(raw[:start] + b"AAAA" + raw[start + 4 :])  # the .npy magic gone
    with pytest.raises(UsageError) as exc:
        load_results(path)
    _one_line(exc, str(path), "undecodable array payload")


def test_a_payload_lookalike_outside_an_array_is_read_as_text(tmp_path):
    text = base64.b64encode(_npy(_arrays(9)["f32_odd"])).decode()
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({'x"array': text, "nested": {"array": text}, "arr": {"array": text, "polygraphy_class": "ndarray"}}))
    back = pj.load_json(path)
    assert back['x"array'] == text and back["nested"] == {"array": text}
    _same(back["arr"], _arrays(9)["f32_odd"])


def test_mutated_big_files_load_or_fail_in_one_line(tmp_path):
    """Byte flips and cuts anywhere in a file with streamed payloads (its JSON, a payload's header, its data): the
    file loads to the same arrays or fails with one line naming it, never another exception."""
    arrays = {"y": _arrays(10)["f32_odd"], "z": _arrays(10)["i8"]}
    path = tmp_path / "out.json"
    save_results(RunResults([("r", [IterationResult(arrays, 0.1, "r")])]), path)
    raw = path.read_bytes()
    starts = [m + len(b'"array": "') for m in range(len(raw)) if raw.startswith(b'"array": "', m)]
    rng = np.random.default_rng(0)
    spots = [*rng.integers(0, starts[0], 10), *(s + d for s in starts for d in rng.integers(0, 200, 10)), *rng.integers(0, len(raw), 20)]
    cases = [raw[:at] + bytes([raw[at] ^ int(rng.integers(1, 256))]) + raw[at + 1 :] for at in map(int, spots)]
    cases += [raw[: int(at)] for at in rng.integers(0, len(raw), 10)]
    for i, case in enumerate(cases):
        bad = tmp_path / f"bad{i}.json"
        bad.write_bytes(case)
        try:
            loaded = load_results(bad)
        except UsageError as exc:
            assert "\n" not in str(exc) and str(bad) in str(exc), str(exc)
            continue
        for _, iterations in loaded:  # a flip that keeps the file valid (a digit of the runtime, a base64 letter)
            for name, array in iterations[0].items():
                assert name not in arrays or array.shape == arrays[name].shape


def test_a_models_outputs_both_ways_through_the_clis(tmp_path, main, monkeypatch):
    """`parity run --save-inputs/--save-outputs` of a model with 512 KiB tensors, checked by `polygraphy run
    --load-inputs/--load-outputs`; and Polygraphy's files of the same run checked by `parity run`, streamed."""
    polygraphy = Path(sys.executable).with_name("polygraphy")
    if not polygraphy.exists():
        pytest.skip("the polygraphy console script is not installed beside this Python")
    model = relu_add(tmp_path / "m.onnx", dims=(256, 512))
    code, _, err = main("run", model, "--onnxrt", "--onnxrt", "--iterations", "2", "--save-inputs", tmp_path / "x.json", "--save-outputs", tmp_path / "o.json")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "o.json", "x.json"]

    def polygraphy_run(*args: str) -> str:
        proc = subprocess.run([str(polygraphy), "run", "m.onnx", "--onnxrt", *args], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    out = polygraphy_run("--load-inputs", "x.json", "--load-outputs", "o.json")
    assert "onnxrt-0 vs. onnxrt-1 | Passed: 2/2 iterations" in out
    polygraphy_run("--load-inputs", "x.json", "--save-outputs", "p.json", "--save-inputs", "px.json")
    streamed = []
    read = pj._Payload.read
    monkeypatch.setattr(pj._Payload, "read", lambda self, where: streamed.append(where) or read(self, where))
    code, _, err = main("run", model, "--onnxrt", "--load-inputs", tmp_path / "px.json", "--load-outputs", tmp_path / "p.json")
    assert code == 0, err
    assert len(streamed) >= 2  # Polygraphy's input and output payloads, each decoded from the file
