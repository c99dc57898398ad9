"""Parity writes Polygraphy's JSON files (issue 14, "files both ways"): a ``.json`` path given to --save-inputs,
--save-outputs, ``data concat/merge -o`` or ``save_inputs``/``save_results`` gets Polygraphy's format, which the
real Polygraphy (installed as a test dependency) loads: golden files made by Parity, checked by Polygraphy."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from parity.backend.base import BaseRunner
from parity.data.meta import TensorMeta
from parity.errors import UsageError
from parity.results import IterationResult, RunResults, load_inputs, load_results, save_inputs, save_results
from parity.run_engine import run
from parity.testing import relu_add

polygraphy_comparator = pytest.importorskip("polygraphy.comparator")
polygraphy_json = pytest.importorskip("polygraphy.json")

POLYGRAPHY = Path(sys.executable).with_name("polygraphy")  # the console script installed beside this Python


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "f32": rng.standard_normal((2, 3)).astype(np.float32),
        "f16": rng.standard_normal(5).astype(np.float16),
        "i64": np.arange(4, dtype=np.int64) - 2,
        "flags": np.array([True, False, True]),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
        "fortran": np.asfortranarray(rng.standard_normal((3, 4))),
    }


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def _polygraphy(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    if not POLYGRAPHY.exists():
        pytest.skip("the polygraphy console script is not installed beside this Python")
    return subprocess.run([str(POLYGRAPHY), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_outputs_json_is_runresults_polygraphy_loads(tmp_path):
    results = RunResults([
        ("onnxrt-0", [IterationResult(_arrays(0), 0.25, "onnxrt-0"), IterationResult(_arrays(1), None, "onnxrt-0")]),
        ("trt-1", [IterationResult({"y": np.ones(3, np.float32)}, 1e-4, "trt-1")]),
        ("empty-run", []),
    ])  # fmt: skip
    path = tmp_path / "golden.json"
    save_results(results, path)

    raw = json.loads(path.read_text())  # plain JSON text: Polygraphy's RunResults layout
    assert raw["polygraphy_class"] == "RunResults" and [entry[0] for entry in raw["lst"]] == ["onnxrt-0", "trt-1", "empty-run"]
    first = raw["lst"][0][1][0]
    assert first["polygraphy_class"] == "IterationResult" and first["runner_name"] == "onnxrt-0" and first["runtime"] == 0.25
    assert first["outputs"]["f32"]["polygraphy_class"] == "LazyArray"
    assert first["outputs"]["f32"]["values"]["polygraphy_class"] == "ndarray"

    loaded = polygraphy_comparator.RunResults.load(str(path))  # the real Polygraphy
    assert [name for name, _ in loaded.lst] == ["onnxrt-0", "trt-1", "empty-run"]
    for (name, want_iters), (_, got_iters) in zip(results, loaded.lst):
        assert len(got_iters) == len(want_iters)
        for want, got in zip(want_iters, got_iters):
            assert got.runtime == want.runtime and got.runner_name == name
            assert list(got.keys()) == list(want.keys())
            for key in want:
                _same(got[key], want[key])

    back = load_results(path)  # and Parity reads its own JSON back identically
    assert back.runners() == results.runners()
    for (_, want_iters), (_, got_iters) in zip(results, back):
        for want, got in zip(want_iters, got_iters):
            assert got.runtime == want.runtime and list(got) == list(want)
            for key in want:
                _same(got[key], want[key])


def test_inputs_json_is_the_feed_list_polygraphy_loads(tmp_path):
    feeds = [_arrays(0), _arrays(1), {}]
    path = tmp_path / "inputs.JSON"  # the suffix counts whatever its case
    old = os.umask(0o077)
    try:
        save_inputs(feeds, path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the mode the umask gives, as open() would
    assert isinstance(json.loads(path.read_text()), list)

    loaded = polygraphy_json.load_json(str(path))  # the real Polygraphy
    assert isinstance(loaded, list) and len(loaded) == len(feeds)
    for want, got in zip(feeds, loaded):
        assert list(got.keys()) == list(want.keys())
        for key in want:
            _same(got[key], want[key])

    back = load_inputs(path)
    assert [list(f) for f in back] == [list(f) for f in feeds]
    for want, got in zip(feeds, back):
        for key in want:
            _same(got[key], want[key])


def test_big_arrays_stream_through_base64(tmp_path):
    """Arrays bigger than the chunks np.save writes (16 MiB, not a multiple of 3 bytes) decode exactly."""
    big = np.arange(5_000_001, dtype=np.float32)
    fortran = np.asfortranarray(np.arange(3 * 1_500_007, dtype=np.float64).reshape(3, -1))
    path = tmp_path / "big.json"
    save_results(RunResults([("r", [IterationResult({"big": big, "fortran": fortran, "slice": big[::7]}, 0.5, "r")])]), path)
    got = polygraphy_comparator.RunResults.load(str(path)).lst[0][1][0]
    _same(got["big"], big)
    _same(got["fortran"], fortran)
    _same(got["slice"], big[::7])
    _same(load_results(path)["r"][0]["fortran"], fortran)


def test_golden_files_made_by_parity_pass_in_polygraphy(tmp_path, main):
    """The user's workflow: `parity run --save-inputs x.json --save-outputs o.json`, then `polygraphy run
    --load-inputs x.json --load-outputs o.json` passes (and fails against a wrong golden file)."""
    model = relu_add(tmp_path / "tiny.onnx", dims=(2, 3))
    code, out, err = main("run", model, "--onnxrt", "--onnxrt", "--iterations", "2", "--save-inputs", tmp_path / "x.json", "--save-outputs", tmp_path / "o.json")
    assert code == 0, err
    assert "binary format" not in err and "warning" not in err.lower()
    assert json.loads((tmp_path / "o.json").read_text())["polygraphy_class"] == "RunResults"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json", "tiny.onnx", "x.json"]  # no spool or part left

    proc = _polygraphy("run", "tiny.onnx", "--onnxrt", "--load-inputs", "x.json", "--load-outputs", "o.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "vs. onnxrt-0 | Passed: 2/2 iterations" in proc.stdout + proc.stderr
    assert "onnxrt-0 vs. onnxrt-1 | Passed: 2/2 iterations" in proc.stdout + proc.stderr

    golden = load_results(tmp_path / "o.json")
    save_results(RunResults([("wrong", [IterationResult({"y": it["y"] + 1}) for it in golden["onnxrt-0"]])]), tmp_path / "wrong.json")
    proc = _polygraphy("run", "tiny.onnx", "--onnxrt", "--load-inputs", "x.json", "--load-outputs", "wrong.json", cwd=tmp_path)
    assert proc.returncode != 0 and "vs. wrong | Passed: 0/2 iterations" in proc.stdout + proc.stderr

    # Polygraphy's own tools read both files: `data merge` turns inputs + one runner's outputs into inputs
    # (one iteration: Polygraphy 0.53.6's merge pads its list with one shared dict, so iterations would collide)
    save_inputs(load_inputs(tmp_path / "x.json")[:1], tmp_path / "x1.json")
    save_results(RunResults([("onnxrt-0", golden["onnxrt-0"][:1])]), tmp_path / "one.json")
    proc = _polygraphy("data", "merge", "x1.json", "one.json", "-o", "merged.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (feed,) = load_inputs(tmp_path / "merged.json")
    _same(feed["x"], load_inputs(tmp_path / "x.json")[0]["x"])
    _same(feed["y"], golden["onnxrt-0"][0]["y"])

    # nothing passed in is overwritten, JSON or not
    code, _, err = main("run", model, "--onnxrt", "--load-inputs", tmp_path / "x.json", "--save-inputs", tmp_path / "x.json")
    assert code == 2 and "refusing to overwrite" in err


def test_data_commands_write_json_by_suffix(tmp_path, main):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    save_results(RunResults([("r", [IterationResult({"y": np.arange(3, dtype=np.int64)}, 0.1, "r")])]), a)
    save_results(RunResults([("r", [IterationResult({"y": np.arange(3, dtype=np.int64) + 1}, 0.2, "r")])]), b)
    code, _, err = main("data", "concat", a, b, "-o", tmp_path / "both.json")
    assert code == 0, err
    loaded = polygraphy_comparator.RunResults.load(str(tmp_path / "both.json"))
    (name, iterations), = loaded.lst
    assert name == "r" and [it.runtime for it in iterations] == [0.1, 0.2]
    _same(iterations[1]["y"], np.arange(3, dtype=np.int64) + 1)

    save_inputs([{"x": np.ones(2, np.float16)}], tmp_path / "x.npz")
    code, _, err = main("data", "merge", tmp_path / "x.npz", a, "-o", tmp_path / "merged.json")
    assert code == 0, err
    (feed,) = polygraphy_json.load_json(str(tmp_path / "merged.json"))
    _same(feed["x"], np.ones(2, np.float16))
    _same(feed["y"], np.arange(3, dtype=np.int64))


@pytest.mark.parametrize(
    ("feeds_or_results", "message"),
    [
        ("inputs", r"bad\.json: input 'obj' of iteration 1: holds Python objects \(dtype object\)"),
        ("outputs", r"bad\.json: output 'obj' of runner 'b', iteration 0: holds Python objects \(dtype object\)"),
        ("marker", r"bad\.json: input 'polygraphy_class' of iteration 0: Polygraphy's JSON format reserves that name"),
    ],
)
def test_unwritable_tensors_are_refused_and_leave_nothing(tmp_path, feeds_or_results, message):
    path = tmp_path / "bad.json"
    path.write_text("previous content")
    obj = np.array([{"boom": 1}], dtype=object)
    with pytest.raises(UsageError, match=message) as info:
        if feeds_or_results == "inputs":
            save_inputs([{"x": np.ones(2)}, {"x": np.ones(2), "obj": obj}], path)
        elif feeds_or_results == "outputs":
            save_results(RunResults([("a", [IterationResult({"y": np.ones(2)})]), ("b", [IterationResult({"obj": obj})])]), path)
        else:
            save_inputs([{"polygraphy_class": np.ones(2)}], path)
    assert "\n" not in str(info.value)
    assert path.read_text() == "previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["bad.json"]


class _Doubler(BaseRunner):
    """y = 2x; ``bad_at`` makes that iteration's output an object array (a write that fails midway)."""

    def __init__(self, name: str, bad_at: int | None = None) -> None:
        super().__init__(name)
        self.bad_at = bad_at
        self.calls = 0

    def activate_impl(self) -> None:
        self.calls = 0

    def get_input_metadata_impl(self) -> dict[str, TensorMeta]:
        return {"x": TensorMeta(np.dtype("float32"), (2,))}

    def infer_impl(self, feed_dict: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls += 1
        if self.calls - 1 == self.bad_at:
            return {"y": np.array([object(), object()], dtype=object)}
        return {"y": feed_dict["x"] * 2}


def test_a_streamed_run_that_fails_midway_leaves_no_file(tmp_path):
    """Three runners stream into one .json file (the second and third through temporary spools) and the third
    fails on iteration 1: neither file appears, nothing is left beside them, an existing file is untouched."""
    (tmp_path / "o.json").write_text("previous outputs")
    feeds = [{"x": np.full(2, i, np.float32)} for i in range(3)]
    runners = [_Doubler("a"), _Doubler("b"), _Doubler("c", bad_at=1)]
    with pytest.raises(UsageError, match=r"o\.json: output 'y' of runner 'c', iteration 1: holds Python objects"):
        run(runners, feeds, save_inputs=tmp_path / "x.json", save_outputs=tmp_path / "o.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json"]
    assert (tmp_path / "o.json").read_text() == "previous outputs"

    runners = [_Doubler("a"), _Doubler("b"), _Doubler("c")]
    summary = run(runners, feeds, save_inputs=tmp_path / "x.json", save_outputs=tmp_path / "o.json")
    assert summary.passed and sorted(p.name for p in tmp_path.iterdir()) == ["o.json", "x.json"]
    loaded = polygraphy_comparator.RunResults.load(str(tmp_path / "o.json"))
    assert [name for name, _ in loaded.lst] == ["a", "b", "c"]  # each runner's iterations together, in order
    for _, iterations in loaded.lst:
        assert [it["y"].tolist() for it in iterations] == [[0, 0], [2, 2], [4, 4]]
