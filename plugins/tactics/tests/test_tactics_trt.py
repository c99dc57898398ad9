"""The TensorRT side: clean failure without TensorRT here, real record/replay where TensorRT imports."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from parity_tactics.match import compare_choices, matching_choices
from parity_tactics.replay import Tactic, TacticReplay
from parity_tactics.trt_tactics import TacticExtension, TacticRecorder, TacticReplayer, build_extension, op_names_from_log
from tactics_synth import FLOAT, HALF

from parity.errors import BackendError, UsageError

HAS_TRT = importlib.util.find_spec("tensorrt") is not None
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "models"


def test_matching_prefers_exact_then_same_tactic():
    recorded = Tactic(5, 1, (FLOAT,), (HALF,))
    candidates = [Tactic(4, 1, (FLOAT,), (HALF,)), Tactic(5, 1, (FLOAT,), (FLOAT,)), Tactic(5, 1, (FLOAT,), (HALF,))]
    assert matching_choices(recorded, candidates) == ([2], "exact")
    assert matching_choices(recorded, candidates[:2]) == ([1], "tactic")
    assert matching_choices(recorded, candidates[:1]) == ([], "none")
    wanted = {"a": Tactic(1), "b": Tactic(2), "gone": Tactic(3)}
    assert compare_choices(wanted, {"a": Tactic(1), "b": Tactic(9)}) == [
        "b: wanted 0x0000000000000002, TensorRT used 0x0000000000000009"
    ]


def test_op_names_from_verbose_log():
    log = (
        "[V] Autotuning op matMul1(key: 0x1814AAAABBBBCCCCDDDDEEEEFFFFCBD7)\n"
        "[V] The selected tactic is (tactic hash, cost(in ms)):0x665ded9abbf88, 0.011264\n"
        "[V] Autotuning op conv_2 (key: 0x00000000000000000000000000000001)\n"
    )
    assert op_names_from_log(log) == {
        "0x1814aaaabbbbccccddddeeeeffffcbd7": "matMul1",
        "0x00000000000000000000000000000001": "conv_2",
    }


def test_extension_factory_follows_the_options(tmp_path):
    assert build_extension({}) is None
    assert build_extension({"save_tactics": None, "load_tactics": None}) is None
    TacticReplay().add("L", Tactic(1)).save(tmp_path / "in.json")
    ext = build_extension({"load_tactics": str(tmp_path / "in.json"), "save_tactics": str(tmp_path / "out.json")})
    assert isinstance(ext, TacticExtension)
    assert [type(h) for h in ext.hooks] == [TacticReplayer, TacticRecorder]  # replay installed before recording
    with pytest.raises(UsageError, match="tactic replay file not found"):  # checked before any build starts
        build_extension({"load_tactics": str(tmp_path / "missing.json")})


@pytest.mark.skipif(HAS_TRT, reason="checks the behaviour without TensorRT")
def test_without_tensorrt_the_hooks_fail_with_one_line():
    with pytest.raises(BackendError, match="tensorrt is not installed"):
        TacticRecorder("x.json").configure(None, None, None)
    with pytest.raises(BackendError, match="tensorrt is not installed"):
        TacticReplayer(TacticReplay().add("L", Tactic(1))).configure(None, None, None)


@pytest.mark.skipif(HAS_TRT, reason="checks the behaviour without TensorRT")
def test_seed_commands_fail_cleanly_without_tensorrt(tmp_path):
    model = str(EXAMPLES / "identity.onnx")
    code = "import sys; from parity.cli import main; sys.exit(main(sys.argv[1:]))"
    for args in (
        ["run", model, "--trt", "--save-tactics", "replay.json"],
        ["convert", model, "-o", "m.engine", "--load-tactics", "replay.json"],
    ):
        if "--load-tactics" in args:
            TacticReplay().add("L", Tactic(1)).save(tmp_path / "replay.json")
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path)
        assert out.returncode == 3, out.stderr
        assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "tensorrt is not installed" in out.stderr
    out = subprocess.run([sys.executable, "-c", code, "run", model, "--onnxrt", "--save-tactics", "r.json"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and "--save-tactics applies to a TensorRT runner (--trt)" in out.stderr  # the option rule


# ---- real TensorRT ------------------------------------------------------------------------------------------
def _build(trt, hooks):
    """Build a small conv network with the given hooks, as the TensorRT plugin's extension protocol does."""
    import numpy as np

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (1, 8, 16, 16))
    w = np.random.default_rng(0).standard_normal((8, 8, 3, 3)).astype(np.float32)
    conv = network.add_convolution_nd(x, 8, (3, 3), trt.Weights(w), trt.Weights(np.zeros(8, np.float32)))
    conv.name = "conv"
    relu = network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    relu.name = "relu"
    network.mark_output(relu.get_output(0))
    config = builder.create_builder_config()
    for hook in hooks:
        hook.postprocess_config(builder, network, config)
    data = builder.build_serialized_network(network, config)
    assert data is not None
    for hook in hooks:
        hook.after_build(builder, network, config, bytes(data))
    return bytes(data)


def test_record_then_replay_with_real_tensorrt(tmp_path):
    trt = pytest.importorskip("tensorrt")
    from parity_tactics.replay import load_replay
    from parity_tactics.trt_tactics import available_mechanisms

    for mechanism in available_mechanisms(trt):
        path = tmp_path / f"{mechanism}.json"
        _build(trt, [TacticRecorder(path, mechanism)])
        recorded = load_replay(path)
        assert recorded.source == mechanism and len(recorded) > 0
        replayer = TacticReplayer(path)
        again = tmp_path / f"{mechanism}-again.json"
        _build(trt, [replayer, TacticRecorder(again, mechanism)])
        assert replayer.problems == []
        assert {k: t.tactic for k, t in load_replay(again).items()} == {k: t.tactic for k, t in recorded.items()}


def test_one_import_trt_for_both_plugins(monkeypatch):
    """tactics reaches TensorRT through the TensorRT plugin's import_trt: one import, one 'not installed' line."""
    from parity_tactics import trt_tactics
    from parity_trt.api import import_trt

    from parity.api import ParityError

    monkeypatch.setitem(sys.modules, "tensorrt", None)  # import tensorrt fails
    import_trt.cache_clear()
    try:
        with pytest.raises(ParityError) as tactics_error:
            trt_tactics.import_trt()
        with pytest.raises(ParityError) as trt_error:
            import_trt()
        assert str(tactics_error.value) == str(trt_error.value)
    finally:
        import_trt.cache_clear()
