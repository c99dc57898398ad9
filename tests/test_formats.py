"""Results files: Parity's archive round trip, atomicity, size, and reading real Polygraphy files safely."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from parity.data.loader import DataLoader
from parity.errors import UsageError
from parity.onnx_models import read_inputs
from parity.results import IterationResult, RunResults, load_inputs, load_results, save_inputs, save_results

FIXTURES = Path(__file__).parent / "fixtures" / "polygraphy"


def test_round_trip_many_runners_iterations_dtypes(tmp_path):
    rng = np.random.default_rng(0)
    results = RunResults()
    for runner in ("a", "b"):
        iters = []
        for i in range(3):
            iters.append(IterationResult({
                "f32": rng.standard_normal((2, 3)).astype(np.float32),
                "f16": rng.standard_normal(5).astype(np.float16),
                "i64": np.arange(i + 1, dtype=np.int64),
                "b": np.array([True, False]),
                "fortran": np.asfortranarray(rng.standard_normal((3, 4))),
                "empty": np.zeros((0, 4), np.float32),
            }, runtime=0.5 * i, runner_name=runner))  # fmt: skip
        results.add(runner, iters)
    path = tmp_path / "r.npz"
    results.save(path)
    loaded = RunResults.load(path)
    assert loaded.runners() == ["a", "b"]
    for runner in ("a", "b"):
        for want, got in zip(results[runner], loaded[runner]):
            assert got.runtime == want.runtime
            for name in want:
                assert got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name])


def test_file_is_a_plain_zip_of_npy_with_a_manifest(tmp_path):
    path = tmp_path / "in.npz"
    save_inputs([{"x": np.ones((2, 2), np.float32)}], path)
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read("parity.json"))
        assert manifest["format"] == "parity" and manifest["kind"] == "inputs"
        assert all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist())
    # any NumPy user can open it without Parity
    with np.load(path, allow_pickle=False) as npz:
        assert np.array_equal(npz[manifest["iterations"][0]["x"].removesuffix(".npy")], np.ones((2, 2)))


def test_size_overhead_is_small(tmp_path):
    array = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    path = tmp_path / "big.npz"
    save_results(RunResults([("r", [IterationResult({"y": array})])]), path)
    assert path.stat().st_size <= 1.01 * array.nbytes


def test_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "out.npz"
    path.write_bytes(b"previous content")
    with pytest.raises(UsageError):
        save_inputs([{"x": np.array([object()], dtype=object)}], path)
    assert path.read_bytes() == b"previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]


def test_reads_real_polygraphy_files():
    feeds = load_inputs(FIXTURES / "inputs.json")
    results = load_results(FIXTURES / "outputs.json")
    assert len(feeds) == 2 and feeds[0]["x"].shape == (2, 3, 16, 16)
    (runner, iterations), = results.items()
    assert runner.startswith("onnxrt-runner-N0") and len(iterations) == 2
    probs = iterations[0]["probs"]
    assert probs.shape == (2, 10) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)


def test_reads_polygraphy_directory_mode():
    assert len(load_inputs(FIXTURES / "dirmode" / "inputs")) == 2
    assert len(load_results(FIXTURES / "dirmode" / "outputs").items()[0][1]) == 2


def test_random_data_matches_polygraphy_default_loader():
    """Same seed, same values: golden files made by Polygraphy's default data stay usable."""
    feeds = load_inputs(FIXTURES / "inputs.json")
    loader = DataLoader(read_inputs(str(Path(__file__).parents[1] / "examples/models/tiny_cnn.onnx")), iterations=2, input_shapes={"x": (2, 3, 16, 16)})
    for i in range(2):
        assert np.array_equal(loader[i]["x"], feeds[i]["x"])


def test_polygraphy_golden_drives_parity_run(main, tiny_cnn):
    code, out, err = main("run", tiny_cnn, "--onnxrt", "--load-inputs", FIXTURES / "inputs.json", "--load-outputs", FIXTURES / "outputs.json", "--atol", "1e-6")
    assert code == 0, err
    assert "iteration 1: PASSED" in out


def _npy_b64(array: np.ndarray, allow_pickle: bool = False) -> str:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return base64.b64encode(buf.getvalue()).decode()


def test_never_unpickles(tmp_path):
    """A pickled object array in a Polygraphy file is refused, not executed."""
    evil = np.array([{"boom": 1}], dtype=object)
    path = tmp_path / "evil.json"
    path.write_text(json.dumps([{"x": {"array": _npy_b64(evil, allow_pickle=True), "polygraphy_class": "ndarray"}}]))
    with pytest.raises(UsageError, match="undecodable array payload"):
        load_inputs(path)


def test_torch_payloads_are_refused(tmp_path):
    path = tmp_path / "torch.json"
    path.write_text(json.dumps([{"x": {"tensor": "AAAA", "polygraphy_class": "Tensor"}}]))
    with pytest.raises(UsageError, match="torch tensor"):
        load_inputs(path)


def test_memory_mapped_load(tmp_path):
    path = tmp_path / "r.npz"
    save_results(RunResults([("r", [IterationResult({"y": np.arange(10, dtype=np.float32)})])]), path)
    y = load_results(path)["r"][0]["y"]
    assert isinstance(y, np.memmap) and not y.flags.writeable
