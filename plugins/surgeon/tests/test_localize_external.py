"""``parity debug localize`` on a model whose weights are in an external data file (the ``llm_decoder`` fixture,
its fp16 conversion overflowing in block 1): each check runs the part of the model its tensors need, from the
graph-only message plus the data folder, and the memory budget counts that part's weights, so the first
divergence is named with a budget below the model's weights."""

from __future__ import annotations

import json
import shutil

import onnx
import pytest

from parity import onnx_external, onnx_models

ATOL = ["--atol", "1", "--rtol", "1"]  # fp16 rounding passes; block 1's overflow (errors in the tens, Inf) does not
VALS = ["--val-range", "input_ids:[0,999]"]


@pytest.fixture(scope="module")
def pair(llm_decoder, tmp_path_factory):
    """(fp32 decoder, its fp16 conversion with external data too, fp32 weight bytes); 4 blocks, overflow in 1."""
    from parity.testing import invoke

    fp32 = llm_decoder(layers=4, overflow_block=1)
    folder = tmp_path_factory.mktemp("fp16")
    inline = folder / "inline.onnx"
    code, text, err = invoke("convert", "--fp-to-fp16", fp32, "-o", inline)
    assert code == 0, text + err
    fp16 = folder / "decoder16.onnx"
    onnx_external.save_model(onnx.load(str(inline)), fp16, external=onnx_external.ExternalData(""))
    inline.unlink()
    weights = onnx_external.weight_bytes(onnx_models.load(fp32, load_external_data=False))
    return fp32, fp16, weights


@pytest.fixture
def watched(monkeypatch):
    """No full model can be serialised (the limit is a few KiB above the graphs), Parity's own memory is not
    counted (the budget is then the weights and tensors alone, comparable with this small model's size), and
    every session onnxruntime builds from bytes is recorded: the weight bytes of the model it was given
    (a model loaded by path is one Parity wrote and validates: ``--extract-to``'s node)."""
    import onnxruntime as ort
    from parity_surgeon import localizer

    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", 256 << 10)
    monkeypatch.setattr(localizer, "RUNTIME_OVERHEAD", 0)
    seen: list[int] = []
    real = ort.InferenceSession

    def session(source, *args, **kwargs):
        if isinstance(source, (bytes, bytearray)):
            seen.append(onnx_external.weight_bytes(onnx.ModelProto.FromString(bytes(source))))
        else:
            assert ".part" in str(source), f"a session loaded {source}"  # only a file being written, in its private folder
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", session)
    return seen


def test_localize_names_block1_within_a_budget_below_the_weights(pair, watched):
    from parity_surgeon import localize

    fp32, fp16, weights = pair
    budget = int(weights * 0.6)
    result = localize(str(fp16), ["onnxrt"], reference_model=str(fp32), memory_budget=budget, compare_func=_loose(), isolate="suspect", feed=_feed())
    assert result.budget == budget < weights
    assert result.first is not None and result.first.name.startswith("block1/mlp/"), result.first
    assert result.largest_batch <= budget
    assert not result.notes  # every batch fitted
    assert watched and max(watched) < 0.75 * weights  # no check read all the weights: each ran its part
    assert result.isolation and result.isolation[0].verdict == "introduces"


def _loose():
    from parity.api import get_registry, make_compare_funcs

    return make_compare_funcs({"atol": (ATOL[1],), "rtol": (ATOL[3],)}, get_registry())


def _feed():
    import numpy as np

    return {"input_ids": (np.arange(16, dtype=np.int64) * 37 % 1000).reshape(1, 16)}


def test_localize_cli_with_the_data_elsewhere(pair, watched, parity_invoke, tmp_path):
    fp32, fp16, weights = pair
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(fp16, alone / "decoder16.onnx")  # the data stays in its own folder
    report, node = tmp_path / "loc.json", tmp_path / "node.onnx"
    code, text, err = parity_invoke(
        "debug", "localize", alone / "decoder16.onnx", "--external-data-dir", fp16.parent, "--onnxrt", "--reference-model", fp32,
        *ATOL, *VALS, "--memory-budget", str(int(weights * 0.6)), "--report", report, "--extract-to", node,
    )  # fmt: skip
    assert code == 1, text + err
    data = json.loads(report.read_text())
    first = data["divergence"]["first"]
    assert first is not None and first.startswith("block1/mlp/"), first
    onnx.checker.check_model(str(node), full_check=True)  # the node alone, with its weights
    assert not list(alone.glob("*.data")) and sorted(p.name for p in fp16.parent.iterdir()) == ["decoder16.onnx", "decoder16.onnx.data"]


def test_localize_missing_data_is_one_line_exit_3(pair, parity_invoke, tmp_path):
    fp32, fp16, _ = pair
    shutil.copy(fp16, tmp_path / "decoder16.onnx")
    code, _, err = parity_invoke("debug", "localize", tmp_path / "decoder16.onnx", "--onnxrt", "--reference-model", fp32, *VALS)
    assert code == 3
    assert len(err.strip().splitlines()) == 1 and "decoder16.onnx.data" in err and "missing" in err, err


def test_budget_counts_weights(pair, monkeypatch):
    """The same search with a budget too small for the part before block 1: the tensors whose part does not
    fit are checked past the budget in small batches, said once in a note, and the answer is the same."""
    from parity_surgeon import localize, localizer

    fp32, fp16, weights = pair
    monkeypatch.setattr(localizer, "RUNTIME_OVERHEAD", 0)
    result = localize(str(fp16), ["onnxrt"], reference_model=str(fp32), memory_budget=int(weights * 0.2), isolate="none", feed=_feed(), compare_func=_loose())
    assert result.first is not None and result.first.name.startswith("block1/mlp/")
    assert len(result.notes) == 1 and "checked past the budget" in result.notes[0]
    assert 1 < result.pair_runs < 20
