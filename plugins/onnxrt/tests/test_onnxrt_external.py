"""``parity run --onnxrt`` on a model whose weights are in an external data file (the ``llm_decoder`` fixture):
marked outputs run from the graph-only message plus the data folder, never a message holding the weights;
``--external-data-dir``; a missing data file; two runners loaded one at a time; saved and loaded results of a
mark-all run."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from parity.results.files import load_results

VALS = ["--val-range", "input_ids:[0,999]"]


@pytest.fixture
def decoder(llm_decoder, tmp_path):
    """The decoder copied into a folder of its own (the only model there)."""
    source = llm_decoder(overflow_block=1)
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("decoder.onnx", "decoder.onnx.data"):
        shutil.copy(source.parent / name, folder / name)
    return folder / "decoder.onnx"


@pytest.fixture
def no_full_messages(monkeypatch, decoder):
    """Any serialisation of a model holding its weights fails (Parity's one serialiser), and every session
    onnxruntime builds is recorded: (source kind, bytes length or path)."""
    import onnxruntime as ort

    from parity import onnx_external

    weights = (decoder.parent / "decoder.onnx.data").stat().st_size
    monkeypatch.setattr(onnx_external, "PROTOBUF_LIMIT", weights // 8)
    built = []
    real = ort.InferenceSession

    def session(source, *args, **kwargs):
        built.append(("bytes", len(source)) if isinstance(source, (bytes, bytearray)) else ("path", str(source)))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", session)
    return built, weights


def _marked_session(built, start, weights):
    """The one session built from bytes since ``start``: the marked runner's graph-only message (its unmarked twin,
    which keeps the user's own outputs neutral, reads the model by path)."""
    from_bytes = [size for kind, size in built[start:] if kind == "bytes"]
    assert len(from_bytes) == 1, built[start:]
    assert all(kind == "path" for kind, _ in built[start:] if kind != "bytes")
    return from_bytes[0] < weights // 8  # the graph only


def _logits(path):
    (run,) = [iters for _, iters in load_results(path)]
    return run[0]["logits"]


def test_mark_all_runs_from_graph_only_bytes_and_keeps_the_logits(parity_invoke, decoder, tmp_path, no_full_messages):
    built, weights = no_full_messages
    plain, marked = tmp_path / "plain.npz", tmp_path / "marked.npz"
    exact = "--onnxrt=graph-optimization-level=disable"  # marking outputs stops fusions: the same kernels, bit for bit
    code, text, err = parity_invoke("run", decoder, exact, *VALS, "--save-outputs", plain)
    assert code == 0, text + err
    assert built == [("path", str(decoder))]  # unmarked: onnxruntime reads the model and its data itself
    start = len(built)
    code, text, err = parity_invoke("run", decoder, exact, "--onnx-outputs", "mark", "all", *VALS, "--save-outputs", marked)
    assert code == 0, text + err
    assert _marked_session(built, start, weights)
    assert np.array_equal(_logits(plain), _logits(marked))
    (run,) = [iters for _, iters in load_results(marked)]
    assert len(run[0]) > 50 and "block1/mlp/gelu/mul_half:0" in run[0]
    assert marked.stat().st_size < weights  # the results file holds tensors, not the model


def test_named_outputs_too(parity_invoke, decoder, no_full_messages):
    built, weights = no_full_messages
    code, text, err = parity_invoke("run", decoder, "--onnxrt", "--onnx-outputs", "block0/mlp/residual:0", "logits", *VALS)
    assert code == 0, text + err
    assert _marked_session(built, 0, weights)


def test_mark_all_results_saved_then_loaded(parity_invoke, decoder, tmp_path, no_full_messages):
    saved = tmp_path / "all.npz"
    mark = ["--onnx-outputs", "mark", "all"]
    assert parity_invoke("run", decoder, "--onnxrt", *mark, *VALS, "--save-outputs", saved)[0] == 0
    code, text, err = parity_invoke("run", decoder, "--onnxrt", "--onnxrt=graph-optimization-level=disable", *mark, *VALS, "--load-outputs", saved)
    assert code == 0, text + err
    assert "Layerwise comparison" in text and "all within tolerance" in text


def test_external_data_dir_when_the_model_is_elsewhere(parity_invoke, decoder, tmp_path):
    alone = tmp_path / "elsewhere"
    alone.mkdir()
    shutil.copy(decoder, alone / "decoder.onnx")
    model = alone / "decoder.onnx"
    reference = tmp_path / "ref.npz"
    assert parity_invoke("run", decoder, "--onnxrt", *VALS, "--save-outputs", reference)[0] == 0
    for extra in ((), ("--onnx-outputs", "mark", "all")):
        code, text, err = parity_invoke("run", model, "--onnxrt", "--external-data-dir", decoder.parent, *extra, *VALS, "--load-outputs", reference)
        assert code == 0, text + err
    code, text, err = parity_invoke("run", model, "--onnxrt", "--ext", decoder.parent, "--onnxrt", *VALS)  # two runners, the alias
    assert code == 0, text + err
    assert not list(alone.glob("*.data"))  # nothing was written beside the model


@pytest.mark.parametrize("marked", [(), ("--onnx-outputs", "mark", "all")])
def test_missing_data_file_is_one_line_exit_3(parity_invoke, decoder, tmp_path, marked):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(decoder, alone / "decoder.onnx")
    code, text, err = parity_invoke("run", alone / "decoder.onnx", "--onnxrt", *marked, *VALS)
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "decoder.onnx.data" in lines[0] and "missing" in lines[0], err
    assert "Traceback" not in err and "Error:" not in err.replace("parity: error:", "")


def test_external_data_dir_must_be_a_folder(parity_invoke, decoder, tmp_path):
    code, _, err = parity_invoke("run", decoder, "--onnxrt", "--external-data-dir", tmp_path / "nowhere")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--external-data-dir" in err


def test_two_runners_are_loaded_one_at_a_time(decoder, monkeypatch):
    """The first runner is released (its session collected) before the second loads, and the comparison is
    the one all-at-once running gave."""
    import gc
    import weakref

    from parity_onnxrt import OnnxrtRunner, SessionFromOnnx

    from parity import run_engine

    live: list[weakref.ref] = []
    peak = []

    class Counting(OnnxrtRunner):
        def activate_impl(self):
            gc.collect()
            peak.append(sum(r() is not None for r in live))
            super().activate_impl()
            live.append(weakref.ref(self.session))

    runners = [Counting(SessionFromOnnx(str(decoder)), name="a"), Counting(SessionFromOnnx(str(decoder), graph_optimization_level="disable"), name="b")]
    summary = run_engine.run(runners, [{"input_ids": np.arange(16, dtype=np.int64).reshape(1, 16)}] * 2)
    assert peak == [0, 0]  # no session alive when each one loads
    assert summary.passed and summary.iterations == 2 and len(summary.runtimes["a"]) == 2


def test_loaders_carry_the_data_folder(decoder, tmp_path):
    """Polygraphy-style loader chains: OnnxFromPath(path, external_data_dir) -> ModifyOnnxOutputs ->
    SessionFromOnnx, with the model file away from its data."""
    from parity_onnxrt import ModifyOnnxOutputs, OnnxFromPath, OnnxrtRunner, SessionFromOnnx, onnx_from_path

    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(decoder, alone / "decoder.onnx")
    feed = {"input_ids": np.arange(16, dtype=np.int64).reshape(1, 16)}
    exact = {"graph_optimization_level": "disable"}
    with OnnxrtRunner(SessionFromOnnx(str(decoder), **exact)) as runner:
        expected = runner.infer(feed)["logits"]
    loader = OnnxFromPath(str(alone / "decoder.onnx"), external_data_dir=str(decoder.parent))
    assert loader.base_dir == str(decoder.parent)
    for session in (SessionFromOnnx(ModifyOnnxOutputs(loader, ["mark", "all"]), **exact), SessionFromOnnx(str(alone / "decoder.onnx"), base_dir=decoder.parent, **exact)):
        with OnnxrtRunner(session) as runner:
            assert np.array_equal(runner.infer(feed)["logits"], expected)
    proto = onnx_from_path(str(decoder))  # weights left in their files: the session needs their folder
    with OnnxrtRunner(SessionFromOnnx(proto, base_dir=decoder.parent, **exact)) as runner:
        assert np.array_equal(runner.infer(feed)["logits"], expected)
