"""``debug reduce --reference-model`` (issue 26, part 3): each candidate of an fp16 model is judged against the same
subgraph of its fp32 original fed the same inputs (cut tensors carry the reference's values, --iter-expected holds
the reference's outputs), so reduce names the node that introduces the error, as ``debug localize`` does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from parity.testing import invoke

PY = sys.executable
SMALL = dict(layers=2, hidden=64, heads=4, vocab=100, seq=8, overflow_block=1)
TOL = ["--atol", "0.01", "--rtol", "0.01"]
CHECK = ["--check", "parity", "run", "parity_debug.onnx", "--onnxrt", "--load-inputs", "parity_debug_inputs.npz", "--load-outputs", "parity_debug_expected.npz", *TOL]


@pytest.fixture()
def pair(llm_decoder, tmp_path):
    """(fp32 decoder with block 1's MLP planted to overflow fp16, its fp16 conversion), and inputs in in.npz."""
    fp32 = llm_decoder(**SMALL)
    res = invoke("convert", "--fp-to-fp16", fp32, "-o", "fp16.onnx")
    assert res.exit_code == 0, res.stdout + res.stderr
    res = invoke("run", fp32, "--onnxrt", "--val-range", "input_ids:[0,99]", "--save-inputs", "in.npz")
    assert res.exit_code == 0, res.stdout + res.stderr
    return fp32, tmp_path / "fp16.onnx"


def test_reduce_against_the_reference_names_the_node_localize_names(pair):
    fp32, fp16 = pair
    res = invoke("debug", "localize", fp16, "--onnxrt", "--reference-model", fp32, "--load-inputs", "in.npz", *TOL)
    assert res.exit_code == 1, res.stdout + res.stderr
    introduces = [line.split("'")[1] for line in (res.stdout + res.stderr).splitlines() if "INTRODUCES the error" in line]
    assert introduces and introduces[0].startswith("block1/mlp/"), res.stdout + res.stderr

    answers = {}
    for jobs in ("1", "2"):
        out = f"red{jobs}.onnx"
        args = ["debug", "reduce", fp16, "-o", out, "--no-repro", "--reference-model", fp32, "--load-inputs", "in.npz", "--report", f"r{jobs}.json", "--jobs", jobs]
        res = invoke(*args, *CHECK)
        assert res.exit_code == 0, res.stdout + res.stderr
        data = json.loads(Path(f"r{jobs}.json").read_text())
        answers[jobs] = (data["result"]["nodes"], [(c["key"], c["verdict"]) for c in data["checks"]])
    assert answers["1"] == answers["2"]
    assert answers["1"][0] == introduces[:1]  # the one node that introduces the error, not those after it


def test_reduce_without_the_reference_compares_with_the_models_own_values(pair):
    """The same check without --reference-model compares the fp16 model with itself: nothing fails."""
    fp32, fp16 = pair
    res = invoke("debug", "reduce", fp16, "-o", "red.onnx", "--no-repro", "--load-inputs", "in.npz", *CHECK)
    assert res.exit_code == 2 and "does not fail the check" in res.stderr, res.stdout + res.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--check", "parity", "run", "parity_debug.onnx", "--onnxrt"],
            "--reference-model needs a --check that reads parity_debug_inputs.npz and compares with parity_debug_expected.npz",
        ),
        (["--reference-model", "missing.onnx", *CHECK], "missing.onnx"),
    ],
)
def test_reference_model_misuse_is_one_line(pair, extra, message):
    fp32, fp16 = pair
    args = ["debug", "reduce", fp16, "-o", "red.onnx", "--no-repro", "--load-inputs", "in.npz"]
    if "--reference-model" not in extra:
        args += ["--reference-model", fp32]
    res = invoke(*args, *extra)
    assert res.exit_code == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stdout + res.stderr


def test_iter_expected_without_a_reference_model_is_refused(pair):
    """--iter-expected names the reference's outputs: without --reference-model nothing would write it."""
    _, fp16 = pair
    res = invoke("debug", "reduce", fp16, "-o", "red.onnx", "--no-repro", "--load-inputs", "in.npz", "--iter-expected", "exp.npz", *CHECK)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "--iter-expected applies to --reference-model" in res.stderr and "Traceback" not in res.stderr
