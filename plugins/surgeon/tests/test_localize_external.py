"""``parity debug localize`` on a model whose weights are in an external data file (the ``llm_decoder`` fixture,
its fp16 conversion overflowing in block 1 or 3): each side runs as a chain of segments, each from the
graph-only message plus the data folder, fed the boundary tensors earlier segments of that side kept, and the
memory budget counts each segment's own weights, so the first divergence is named with a budget below the
model's weights, the same as a single run names it."""

from __future__ import annotations

import json
import math
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
    """The same search with a budget below one MLP weight (a node whose weights alone do not fit): such nodes'
    segments are checked past the budget in small batches, said once in a note, and the answer is the same."""
    from parity_surgeon import localize, localizer

    fp32, fp16, weights = pair
    monkeypatch.setattr(localizer, "RUNTIME_OVERHEAD", 0)
    result = localize(str(fp16), ["onnxrt"], reference_model=str(fp32), memory_budget=int(weights * 0.05), isolate="none", feed=_feed(), compare_func=_loose())
    assert result.first is not None and result.first.name.startswith("block1/mlp/")
    assert len(result.notes) == 1 and "checked past the budget" in result.notes[0]
    assert 1 < result.pair_runs < 40


# --- segmented execution: each check runs only its own segment's weights ------------------------------------


@pytest.fixture(scope="module")
def deep(llm_decoder, tmp_path_factory):
    """Like ``pair`` with the overflow in block 3 of 4: the part of the model before it is most of the weights."""
    from parity.testing import invoke

    fp32 = llm_decoder(layers=4, overflow_block=3)
    fp16 = tmp_path_factory.mktemp("deep16") / "decoder16.onnx"
    code, text, err = invoke("convert", "--fp-to-fp16", fp32, "-o", fp16, "--save-external-data")
    assert code == 0, text + err
    return fp32, fp16, onnx_external.weight_bytes(onnx_models.load(fp32, load_external_data=False))


def test_segments_hold_only_their_own_weights(deep, watched):
    """At a quarter of the weights, block 3 is named and no session (the search's or the isolation's) holds
    more than the budget's weights: each segment runs from the boundary tensors earlier ones kept, not from
    the model's inputs (which needed the embedding and blocks 0..3, about 0.9x the weights)."""
    from parity_surgeon import localize

    fp32, fp16, weights = deep
    budget = weights // 4
    result = localize(str(fp16), ["onnxrt"], reference_model=str(fp32), memory_budget=budget, compare_func=_loose(), feed=_feed())
    assert result.first is not None and result.first.name.startswith("block3/mlp/"), result.first
    assert not result.notes and result.largest_batch <= budget
    assert watched and max(watched) <= budget, [w / weights for w in watched]
    assert result.isolation and result.isolation[0].verdict == "introduces"


def _same(segmented, whole, exact):
    """The same answer, the same verdict on every tensor the single run compared up to it, and (``exact``) the
    same values: a boundary is fed the values its own side computed. An fp16 side's boundary holds fp16
    values, while onnxruntime on CPU computes fp16 nodes in fp32 and, in one run, passes the unrounded values
    on: errors after a boundary then differ at fp16's rounding (far below any tolerance that passes fp16, and
    huge values' rounding is larger where the tensors fail)."""
    assert (segmented.first and segmented.first.name) == (whole.first and whole.first.name)
    assert [v.verdict for v in segmented.isolation] == [v.verdict for v in whole.isolation]
    ours = {t.name: t for t in segmented.tensors}
    end = whole.first.position if whole.first is not None else len(whole.tensors)
    before = [t for t in whole.tensors if t.position <= end]
    assert before and all(t.name in ours for t in before)
    for t in before:
        u = ours[t.name]
        assert u.passed == t.passed, t.name
        if exact:
            assert u.max_abs == t.max_abs or (math.isnan(u.max_abs) and math.isnan(t.max_abs)), t.name
        elif t.passed:
            assert abs(u.max_abs - t.max_abs) < 0.05, t.name


@pytest.mark.parametrize("fraction", [0.25, 0.0])  # a quarter of the weights; one tensor per segment
def test_segmented_answer_equals_the_unsegmented_one(deep, monkeypatch, fraction):
    from parity_surgeon import localize, localizer

    fp32, fp16, weights = deep
    monkeypatch.setattr(localizer, "RUNTIME_OVERHEAD", 0)
    common = {"reference_model": str(fp32), "compare_func": _loose(), "feed": _feed()}
    whole = localize(str(fp16), ["onnxrt"], memory_budget=10 * weights, **common)
    assert whole.pair_runs == 1  # one segment: the whole model up to the divergence
    segmented = localize(str(fp16), ["onnxrt"], memory_budget=max(1, int(weights * fraction)), **common)
    assert segmented.pair_runs > 2
    _same(segmented, whole, exact=False)


def test_segmented_values_are_the_single_runs(deep, monkeypatch):
    """Two onnxruntime configurations on the fp32 decoder, every tensor compared: with one tensor per segment
    every error is bit for bit the single run's."""
    from parity_surgeon import RunnerSpec, localize, localizer

    fp32, _, weights = deep
    monkeypatch.setattr(localizer, "RUNTIME_OVERHEAD", 0)
    runners = [RunnerSpec("onnxrt"), RunnerSpec("onnxrt", {"graph_optimization_level": "disable"})]
    common = {"runners": runners, "feed": _feed(), "stop_at_first": False, "isolate": "none"}
    whole = localize(str(fp32), memory_budget=10 * weights, **common)
    segmented = localize(str(fp32), memory_budget=1, **common)
    assert whole.pair_runs == 1 and segmented.pair_runs == len(segmented.tensors) == len(whole.tensors)
    _same(segmented, whole, exact=True)


def test_validate_runs_segments(deep, watched):
    """``--validate`` (the first NaN/Inf, one runner) runs the same segments: the fp16 model's first Inf in
    block 3, found within a quarter of its weights, with its node's inputs summarized from the boundary."""
    from parity_surgeon import localize

    _, fp16, _ = deep
    weights = onnx_external.weight_bytes(onnx_models.load(fp16, load_external_data=False))
    whole = localize(str(fp16), ["onnxrt"], validate=True, memory_budget=10 * weights, feed=_feed())
    watched.clear()
    result = localize(str(fp16), ["onnxrt"], validate=True, memory_budget=weights // 4, feed=_feed())
    assert result.first is not None and result.first.name == whole.first.name and result.first.name.startswith("block3/mlp/")
    assert [s.name for s in result.nonfinite.inputs] == [s.name for s in whole.nonfinite.inputs]
    assert result.pair_runs > 2 and max(watched) <= weights // 4


@pytest.mark.corpus
def test_segmented_answer_on_a_trained_model(corpus_model, tmp_path):
    """ppocr_det's fp16 conversion against the fp32 original: one tensor per segment (budget 1) gives the
    answer and values of the single run."""
    import numpy as np
    from parity_surgeon import localize

    from parity.api import get_registry, make_compare_funcs
    from parity.testing import invoke

    fp32 = corpus_model("ppocr_det")
    fp16 = tmp_path / "det16.onnx"
    code, text, err = invoke("convert", "--fp-to-fp16", "--keep-io-types", fp32, "-o", fp16)
    assert code == 0, text + err
    funcs = make_compare_funcs({"atol": ("1e-2",), "rtol": ("1e-2",)}, get_registry())
    feed = {"x": np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)}
    common = {"reference_model": str(fp32), "compare_func": funcs, "feed": feed}
    whole = localize(str(fp16), ["onnxrt"], **common)
    assert whole.pair_runs == 1
    _same(localize(str(fp16), ["onnxrt"], memory_budget=1, **common), whole, exact=False)
