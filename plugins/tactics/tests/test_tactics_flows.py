"""Tactic flows end to end through the CLI, against the TensorRT model (trt_model: a model of TensorRT's documented
Python API, NOT TensorRT) of every version in ../shared/trt-api, and the real TensorRT where it imports.

The model's builder picks tactics as trt_model/tactics.py says (each rule cited there): the 10.x
IAlgorithmSelector, the editable timing cache of 10.8+/11.x with the sampleEditableTimingCache autotuning log at
VERBOSE, a build that fails when a cached tactic names none of the layer's tactics (NvInfer.h@v11.0:L10283-L10284).
The ``--check`` of ``debug build`` runs ``parity`` in a subprocess, which imports the model through trt_model's
PYTHONPATH shims.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from parity.testing import CliResult, invoke, save_model

# node names: "mm10" before "mm1" (a layer named with the op's name as prefix comes first), one with a space
OPS = ("mm10", "relu act", "mm1")


def make_model(path: Path) -> Path:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    w1 = numpy_helper.from_array((np.arange(16, dtype=np.float32).reshape(4, 4) - 8) / 8, "w1")
    w2 = numpy_helper.from_array((np.arange(32, dtype=np.float32).reshape(4, 8) - 16) / 16, "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm10"),
        helper.make_node("Relu", ["h"], ["r"], name="relu act"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm1"),
    ]
    return save_model(path, nodes, [x], [y], [w1, w2])


def lines(result: CliResult) -> list[str]:
    """The non-blank lines of a command's output, stdout's then stderr's."""
    return [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]


def has_editable_cache(trt) -> bool:
    return hasattr(trt, "TimingCacheKey") and hasattr(trt.BuilderFlag, "EDITABLE_TIMING_CACHE")


def need_editable_cache(trt) -> None:
    if not has_editable_cache(trt):
        pytest.skip(f"TensorRT {trt.__version__} has no editable timing cache (BuilderFlag.EDITABLE_TIMING_CACHE is 10.8+)")


def kernels(trt, engine: Path) -> dict[str, str]:
    """Layer name -> TacticName, read with the engine inspector as the plugin does."""
    from parity_tactics.trt_tactics import engine_layer_kernels

    return dict(engine_layer_kernels(trt, engine.read_bytes()))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def key_of(replay: dict, op: str) -> str:
    return next(k for k, t in replay["tactics"].items() if t.get("name") == op)


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return make_model(tmp_path / "model.onnx")


def record(model: Path, replay: str = "replay.json", engine: str = "rec.engine", *extra: str):
    result = invoke("run", model, "--trt", "--save-tactics", replay, "--save-engine", engine, *extra)
    assert result.exit_code == 0, result
    return load(Path(replay))


# ---- flow 1: record, replay, convert --------------------------------------------------------------------------
def test_record_then_replay_with_run_and_convert(trt_backend, model):
    trt = trt_backend
    replay = record(model)
    assert replay["source"] == ("timing-cache" if has_editable_cache(trt) else "algorithm-selector")
    assert replay["tensorrt"] == trt.__version__
    recorded = kernels(trt, Path("rec.engine"))
    if replay["source"] == "timing-cache":
        # every op's key got its op name from the autotuning log (spaces kept) and the kernel of its own layer
        # (op mm1 is not given the layer of op mm10, whose name it prefixes)
        for op in OPS:
            assert replay["tactics"][key_of(replay, op)]["kernel"] == recorded[op], op
    else:
        assert set(OPS) <= set(replay["tactics"])

    result = invoke("run", model, "--trt", "--load-tactics", "replay.json", "--onnxrt", "--save-engine", "rep.engine")
    assert result.exit_code == 0, result
    assert "PASSED" in result.stdout
    assert "cannot be checked" not in result.stdout + result.stderr  # the plugin checked the engine against the replay
    assert kernels(trt, Path("rep.engine")) == recorded

    result = invoke("convert", model, "-o", "m.engine", "--load-tactics", "replay.json")
    assert result.exit_code == 0, result
    assert kernels(trt, Path("m.engine")) == recorded


def autotuning_rows(log: str, op: str) -> list[tuple[str, str]]:
    """(kernel name, tactic hash) of each tactic the autotuning log lists for ``op`` (the sample's table)."""
    block = log.split(f"Autotuning op {op}(key:", 1)[1].split("The selected tactic", 1)[0]
    return re.findall(r"\s\d+, [\d.]+, [\d.]+, [\d.]+, (\S+), (0x[0-9a-f]+),", block)


def test_an_edited_replay_is_followed_and_a_kernel_that_differs_is_reported(trt_backend, model, monkeypatch):
    """The sample's flow: pick another tactic of the autotuning log for one op and replay it."""
    trt = trt_backend
    need_editable_cache(trt)
    monkeypatch.setenv("PARITY_TRT_LOG", "verbose")
    result = invoke("convert", model, "-o", "rec.engine", "--save-tactics", "replay.json")
    monkeypatch.delenv("PARITY_TRT_LOG")
    assert result.exit_code == 0, result
    replay = load(Path("replay.json"))
    key = key_of(replay, "mm1")
    chosen = dict(replay["tactics"][key])
    kernel, tactic_hash = next((k, h) for k, h in autotuning_rows(result.stderr, "mm1") if k != chosen["kernel"])

    replay["tactics"][key].update(tactic=tactic_hash, kernel=kernel)
    Path("edited.json").write_text(json.dumps(replay))
    result = invoke("convert", model, "-o", "m.engine", "--load-tactics", "edited.json")
    assert result.exit_code == 0, result
    assert kernels(trt, Path("m.engine"))["mm1"] == kernel

    # the tactic changed but the replay still names the old kernel: the build succeeds, the engine does not match
    replay["tactics"][key].update(tactic=tactic_hash, kernel=chosen["kernel"])
    Path("stale.json").write_text(json.dumps(replay))
    result = invoke("convert", model, "-o", "s.engine", "--load-tactics", "stale.json")
    assert result.exit_code == 3, result
    assert lines(result) == [
        f"parity: error: TensorRT did not follow stale.json for 1 layers/keys: {key} (mm1): layer mm1 used kernel "
        f"{kernel}, the replay has {chosen['kernel']}"
    ]


# ---- finding (a): a replayed tactic the layer cannot use fails the build ------------------------------------------
def test_a_replayed_tactic_the_layer_cannot_use_fails_with_one_line(trt_backend, model):
    trt = trt_backend
    need_editable_cache(trt)
    replay = record(model)
    key = key_of(replay, "relu act")
    replay["tactics"][key]["tactic"] = "0x0000000000001234"
    Path("bad.json").write_text(json.dumps(replay))
    for args in (["convert", model, "-o", "m.engine"], ["run", model, "--trt", "--onnxrt"]):
        result = invoke(*args, "--load-tactics", "bad.json")
        assert result.exit_code == 3, result
        assert len(lines(result)) == 1, result
        line = lines(result)[0]
        assert line.startswith("parity: error: TensorRT cannot use tactic 0x0000000000001234 that bad.json gives op 'relu act'")
        assert "Traceback" not in result.stdout + result.stderr
    assert not Path("m.engine").exists()


def test_op_names_keep_spaces_and_a_prefix_op_does_not_take_a_longer_ops_layer():
    from parity_tactics.trt_tactics import _layer_of, op_names_from_log

    log = "[V] Autotuning op relu act(key: 0xAB):\n[V] Autotuning op /blocks.0/mm 1 (key: 0x01)\n"
    assert op_names_from_log(log) == {"0xab": "relu act", "0x01": "/blocks.0/mm 1"}
    layers = [("conv10", "k10"), ("conv1", "k1"), ("conv2_myl0_2", "k2")]
    assert _layer_of("conv1", layers, ["conv1", "conv10", "conv2"]) == ("conv1", "k1")
    assert _layer_of("conv1", [("conv10_myl0_0", "k10"), ("conv1_myl0_1", "k1")], ["conv1", "conv10"]) == ("conv1_myl0_1", "k1")
    assert _layer_of("conv2", layers, ["conv1", "conv10", "conv2"]) == ("conv2_myl0_2", "k2")


# ---- flow 4: a replay of the other line --------------------------------------------------------------------------
def test_a_replay_of_the_other_line_is_one_line_exit_2(trt_backend, model, monkeypatch, request):
    from trt_model.install import REAL, install

    backend = request.node.callspec.params["trt_backend"]
    if backend == REAL:
        pytest.skip("the other line's replay is recorded with the TensorRT model; not mixed with the real TensorRT")
    current = str(trt_backend.__version__)
    other = "10.7.0" if current.startswith("11.") else "11.0.0.114"
    install(monkeypatch, other)
    record(model, "other.json", "other.engine")
    install(monkeypatch, backend)
    result = invoke("convert", model, "-o", "m.engine", "--load-tactics", "other.json")
    assert result.exit_code == 2, result
    assert len(lines(result)) == 1 and lines(result)[0].startswith("parity: error: other.json "), result
    assert f"TensorRT {current}" in result.stderr
    assert not Path("m.engine").exists()


# ---- flow 2: debug build, then diff-tactics ------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["in-process", "subprocess"])
def test_debug_build_then_diff_tactics(trt_backend, model, monkeypatch, where):
    """A ``parity run`` check runs in Parity's process unless a timeout needs a killable process (parity.debug.check):
    ``--check-timeout`` makes it a subprocess, which imports the TensorRT model through trt_model's PYTHONPATH shims."""
    trt = trt_backend
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    result = invoke("run", model, "--onnxrt", "--save-outputs", "golden.json")
    assert result.exit_code == 0, result
    fp16 = ["--fp16"] if hasattr(trt.BuilderFlag, "FP16") else []
    if not fp16:  # 11.x has no FP16 flag (strongly typed networks only): the flow as written is a usage error
        result = invoke("debug", "build", model, "--fp16", "--save-tactics", "replay.json", "--until=1", "--check", "true")
        assert result.exit_code == 2 and lines(result)[0].startswith("parity: error: --fp16: not available on TensorRT 11.x"), result
        assert len(lines(result)) == 1 and not Path("replays").exists()
    until = 4 if where == "in-process" else 2  # a subprocess check starts Python: ~1 s each
    result = invoke("debug", "build", model, *fp16, "--save-tactics", "replay.json", "--artifacts-dir", "replays",
                    "--artifacts", "replay.json", f"--until={until}",
                    *(["--check-timeout", "120"] if where == "subprocess" else []), "--check", "parity", "run", "parity_debug.engine", "--trt",
                    "--load-outputs", "golden.json")
    assert result.exit_code in (0, 1), result
    good = sorted(p.name for p in Path("replays/good").glob("*.json")) if Path("replays/good").is_dir() else []
    bad = sorted(p.name for p in Path("replays/bad").glob("*.json")) if Path("replays/bad").is_dir() else []
    assert len(good) + len(bad) == until
    assert (result.exit_code == 1) == bool(bad)
    assert "builds: " in result.stdout and "Next: parity inspect diff-tactics --dir replays" in result.stdout
    for command in (["inspect", "diff-tactics"], ["debug", "diff-tactics"]):
        result = invoke(*command, "--dir", "replays")
        assert result.exit_code == 0, result
        assert f"Loaded {len(good)} good tactic replays." in result.stdout
        assert f"Loaded {len(bad)} bad tactic replays." in result.stdout
