"""Every command on a decoder just past protobuf's 2 GiB limit, its weights in one external data file, with the
memory each may use: at most 1.2x the weights for the commands that must hold them (run), at most a quarter for
the ones that need not (inspect, lint, convert, sanitize, extract, localize at a quarter of the weights).

Marked ``big``: it runs by default (CI included) and takes a few minutes; ``-m "not big"`` leaves it out.
Each command runs as a child process so its own peak RSS is measured (``os.wait4``, bench/big_models.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from big_models import measure  # noqa: E402
from llm_decoder import build_decoder  # noqa: E402

pytestmark = pytest.mark.big
GIB = 2**30
# hidden 1024, vocabulary 32000: 40 blocks are 2.12 GiB of float32 weights (each block 48 MiB, embeddings and head 250 MiB)
SHAPE = {"hidden": 1024, "heads": 16, "vocab": 32000, "seq": 16, "layers": 40}
VALS = ["--val-range", "input_ids:[0,31999]"]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    info = build_decoder(folder / "model.onnx", overflow_block=3, **SHAPE)
    assert info["weight_bytes"] > 2 * GIB
    return folder / "model.onnx", info["weight_bytes"]


def parity(folder: Path, *args: str, timeout: float = 600) -> dict:
    return measure(["parity", *map(str, args)], folder, timeout)


def check(result: dict, codes=(0,), memory: float | None = None, weights: int = 0) -> None:
    assert result["code"] in codes, result["last"]
    if memory is not None:
        assert result["rss"] <= memory * weights, f"peak RSS {result['rss'] / GIB:.2f} GiB > {memory}x the weights ({weights / GIB:.2f} GiB)"


def test_inspect_and_lint_read_no_weights(big, tmp_path):
    model, weights = big
    check(parity(tmp_path, "inspect", "model", model), memory=0.25, weights=weights)
    check(parity(tmp_path, "check", "lint", model), codes=(0, 1), memory=0.25, weights=weights)


def test_run_one_and_two_runners(big, tmp_path):
    model, weights = big
    check(parity(tmp_path, "run", model, "--onnxrt", *VALS), memory=1.2, weights=weights)
    check(parity(tmp_path, "run", model, "--onnxrt", "--onnxrt", *VALS), memory=1.2, weights=weights)


def test_run_marking_every_tensor_and_loading_its_outputs(big, tmp_path):
    model, weights = big
    saved = tmp_path / "all.npz"
    check(parity(tmp_path, "run", model, "--onnxrt", "--onnx-outputs", "mark", "all", *VALS, "--save-outputs", saved), memory=1.2, weights=weights)
    check(parity(tmp_path, "run", model, "--onnxrt", "--onnx-outputs", "mark", "all", *VALS, "--load-outputs", saved), memory=1.2, weights=weights)


@pytest.fixture(scope="module")
def fp16(big, tmp_path_factory):
    """The decoder converted to fp16 once (the conversion's test and localize's reference pair share it: each
    conversion writes 1 GiB), and what measuring that conversion gave."""
    model, _ = big
    folder = tmp_path_factory.mktemp("fp16")
    out = folder / "fp16.onnx"
    return out, parity(folder, "convert", "--fp-to-fp16", model, "-o", out, "--save-external-data")


def test_convert_to_fp16_streams_the_weights(big, fp16):
    _, weights = big
    out, result = fp16
    check(result, memory=0.25, weights=weights)
    onnx.checker.check_model(str(out), full_check=True)
    assert out.with_name("fp16.onnx.data").stat().st_size < weights * 0.55


def test_sanitize_writes_external_data_by_itself_past_the_limit(big, tmp_path):
    model, weights = big
    out = tmp_path / "s.onnx"
    result = parity(tmp_path, "surgeon", "sanitize", model, "-o", out)
    check(result, memory=0.25, weights=weights)
    assert (tmp_path / "s.onnx.data").stat().st_size >= weights
    onnx.checker.check_model(str(out), full_check=True)


def test_extract_reads_only_the_kept_weights(big, tmp_path):
    model, weights = big
    out = tmp_path / "x.onnx"
    cut = ["--inputs", "input_ids:auto:auto", "--outputs", "block0/mlp/residual:0:auto"]
    result = parity(tmp_path, "surgeon", "extract", model, "-o", out, *cut, "--save-external-data")
    check(result, memory=0.25, weights=weights)
    assert (tmp_path / "x.onnx.data").stat().st_size < weights * 0.2


def test_localize_within_a_quarter_of_the_weights(big, fp16, tmp_path):
    model, weights = big
    converted, conversion = fp16
    check(conversion)
    # fp16 rounding of random tokens is far below 1; the overflow planted in block 3 is inf
    loose = ["--atol", "1", "--rtol", "1"]
    result = parity(tmp_path, "debug", "localize", converted, "--onnxrt", "--reference-model", model, *loose, "--memory-budget", str(weights // 4), *VALS)
    check(result, codes=(1,), memory=0.25, weights=weights)
    assert "block3/mlp/" in result["out"], result["out"][-2000:]
