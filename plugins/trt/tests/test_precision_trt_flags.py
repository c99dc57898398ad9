"""``parity debug precision`` with Polygraphy's TensorRT builder flags, against the TensorRT model (trt_model: a model of
TensorRT's documented Python API, NOT TensorRT). Given a builder flag, or a check that reads ``polygraphy_debug.engine``,
each candidate (the ONNX model with some nodes kept fp32) is also built into an engine with those flags, and the check
reads that engine, the candidate ONNX beside it. Each test asserts what the builder got for every candidate, what the
check saw, or the one-line refusal."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from trt_model.install import install, uninstall

from parity.testing import CliResult, invoke, relu_add

V10, V11 = "10.7.0", "11.4.0.106"
HAVE_TRT = importlib.util.find_spec("tensorrt") is not None

# The check: records what it was given, passes when the candidate keeps node "add" in fp32 (so the search has work).
CHECK = """
import json, os, sys
import onnx
engine, model, artifact, log = sys.argv[1:5]
m = onnx.shape_inference.infer_shapes(onnx.load(model))
types = {v.name: v.type.tensor_type.elem_type for v in [*m.graph.value_info, *m.graph.output]}
add_fp32 = any(n.name == "add" and types.get(n.output[0]) == onnx.TensorProto.FLOAT for n in m.graph.node)
with open(log, "a") as f:
    f.write(json.dumps({"engine": engine, "engine_bytes": os.path.getsize(engine), "onnx": model, "artifact": artifact,
                        "env": os.environ.get("PARITY_DEBUG_ARTIFACT"), "add_fp32": add_fp32}) + "\\n")
sys.exit(0 if add_fp32 else 1)
"""


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the checks' state file is written in the working folder


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install TensorRT 10's model; record (network, config) of every engine built."""
    trt = install(monkeypatch, V10)
    seen: list[tuple[Any, Any]] = []
    original = trt.Builder.build_serialized_network

    def recording(self: Any, network: Any, config: Any) -> Any:
        seen.append((network, config))
        return original(self, network, config)

    monkeypatch.setattr(trt.Builder, "build_serialized_network", recording)
    yield trt, seen
    uninstall()


def precision(tmp_path: Path, *flags: str, check_args: tuple[str, ...] = ("polygraphy_debug.engine", "polygraphy_debug.onnx")) -> CliResult:
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    (tmp_path / "check.py").write_text(CHECK)
    check = ["--check", sys.executable, str(tmp_path / "check.py"), *check_args, "{artifact}", str(tmp_path / "log.jsonl")]
    result = invoke("debug", "precision", model, "--save-nodes", tmp_path / "nodes.json", *flags, *check)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


def log(tmp_path: Path) -> list[dict]:
    path = tmp_path / "log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_each_candidate_engine_gets_the_builder_flags(builds, tmp_path):
    trt, seen = builds
    result = precision(tmp_path, "--fp16", "--builder-optimization-level", "2", "--tactic-sources", "cublas", "--pool-limit", "workspace:16M")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "nodes.json").read_text())["fp32_nodes"] == ["add"]
    checks = log(tmp_path)
    assert len(seen) == len(checks) >= 2  # one engine per candidate checked (the all-fp16 model included)
    for _, config in seen:
        assert config.get_flag(trt.BuilderFlag.FP16)  # --fp16: -p float16 and the builder flag
        assert config.builder_optimization_level == 2
        assert config.get_tactic_sources() == 1 << int(trt.TacticSource.CUBLAS)
        assert config.get_memory_pool_limit(trt.MemoryPoolType.WORKSPACE) == 16 << 20
    assert not any(Path(c["engine"]).exists() or Path(c["onnx"]).exists() for c in checks)  # removed after each check


def test_the_check_reads_the_engine_and_the_candidate_beside_it(builds, tmp_path):
    _, seen = builds
    # no builder flag: the check naming polygraphy_debug.engine is what asks for engines (TensorRT's defaults)
    assert precision(tmp_path).exit_code == 0
    checks = log(tmp_path)
    assert len(seen) == len(checks)
    for c in checks:
        assert c["engine"].endswith(".engine") and c["engine_bytes"] > 0
        assert c["artifact"] == c["env"] == c["engine"]  # {artifact} and $PARITY_DEBUG_ARTIFACT: the engine
        assert c["onnx"].endswith(".onnx")
    assert [c["add_fp32"] for c in checks][:1] == [False]  # the first check: every candidate in fp16


def test_without_an_engine_nothing_is_built(builds, tmp_path):
    _, seen = builds
    result = precision(tmp_path, check_args=("parity_debug.onnx", "parity_debug.onnx"))
    assert result.exit_code == 0, result.stderr
    assert seen == [] and log(tmp_path)  # an ONNX check, as before: no engine


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--layer-precisions", "add:float32"), "computes each node's precision"),
        (("--exclude-lean-runtime",), "needs --version-compatible"),
    ],
)
def test_refused_in_one_line_before_any_check(builds, tmp_path, flags, says):
    _, seen = builds
    result = precision(tmp_path, *flags)
    assert result.exit_code == 2 and says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert seen == [] and log(tmp_path) == []


def test_tensorrt_11_refuses_the_precision_flags(monkeypatch, tmp_path):
    install(monkeypatch, V11)
    try:
        result = precision(tmp_path, "--fp16", "--builder-optimization-level", "2")
    finally:
        uninstall()
    assert result.exit_code == 2 and "--fp16" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert log(tmp_path) == []  # refused at the first build, before its check


# ---- Polygraphy's ONNX loading flags on debug precision ------------------------------------------------------
VALUE_INFO = "import onnx, sys\nm = onnx.load(sys.argv[1])\nopen(sys.argv[2], 'a').write(' '.join(v.name for v in m.graph.value_info) + '\\n')\n"


@pytest.mark.parametrize("flags", [(), ("--shape-inference",), ("--do-shape-inference", "--no-onnxruntime-shape-inference")])
def test_shape_inference_reaches_every_candidate(tmp_path, flags):
    model = relu_add(tmp_path / "m.onnx", (2, 3))
    (tmp_path / "vi.py").write_text(VALUE_INFO)
    seen = tmp_path / "value_info.txt"
    result = invoke("debug", "precision", model, *flags, "--check", sys.executable, tmp_path / "vi.py", "parity_debug.onnx", seen)
    assert result.exit_code == 0, result.stderr
    lines = seen.read_text().splitlines()
    assert lines and all(("h" in line.split()) == bool(flags) for line in lines)  # the inner tensor's shape: only when inferred


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--fp-to-fp16",), "converts to fp16 itself"),
        (("--ignore-external-data",), "with their weights"),
        (("--model-type", "engine"), "searches an ONNX model"),
        (("--no-onnxruntime-shape-inference",), "applies with --shape-inference"),
    ],
)
def test_loading_flags_that_cannot_apply_are_refused(tmp_path, flags, says):
    result = precision(tmp_path, *flags, check_args=("parity_debug.onnx", "parity_debug.onnx"))
    assert result.exit_code == 2 and says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert log(tmp_path) == []


def test_tactic_replay_is_saved_from_the_candidates_engines(builds, tmp_path):
    _, seen = builds
    replay = tmp_path / "replay.json"
    result = precision(tmp_path, "--save-tactic-replay", replay, check_args=("parity_debug.onnx", "parity_debug.onnx"))
    assert result.exit_code == 0, result.stderr
    assert seen and len(seen) == len(log(tmp_path))  # --save-tactics alone asks for engines
    assert json.loads(replay.read_text())  # the tactics of the last candidate's build


@pytest.mark.parametrize(("flag", "builder_flag"), [("--int8", "INT8"), ("--tf32", "TF32")])
def test_int8_and_tf32_are_builder_flags_of_each_candidate(builds, tmp_path, flag, builder_flag):
    trt, seen = builds
    # Polygraphy's own sanity run: debug precision --int8 --check true (int8 calibrates on generated inputs)
    result = precision(tmp_path, flag, check_args=("parity_debug.onnx", "parity_debug.onnx"))
    assert result.exit_code == 0, result.stderr
    assert seen and len(seen) == len(log(tmp_path))
    assert all(config.get_flag(getattr(trt.BuilderFlag, builder_flag)) for _, config in seen)


@pytest.mark.skipif(HAVE_TRT, reason="checks the behaviour without TensorRT")
@pytest.mark.parametrize("flags", [("--int8",), ("--tf32",), ("--fp16", "--strongly-typed"), ("--iter-artifact", "x.engine")])
def test_without_tensorrt_one_line(tmp_path, flags):
    result = precision(tmp_path, *flags, check_args=("parity_debug.onnx", "parity_debug.onnx"))
    assert result.exit_code == 3 and result.stderr.strip().startswith("parity: error: tensorrt is not installed")
    assert len(result.stderr.strip().splitlines()) == 1 and log(tmp_path) == []


def test_engines_of_a_model_with_external_data_read_the_candidates_weights(builds, tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from parity.testing import save_graph

    _, seen = builds
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], np.arange(6, dtype=np.float32).tolist())
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    model = onnx.load(save_graph(graph, tmp_path / "plain.onnx"))
    (tmp_path / "weights").mkdir()
    onnx.save(model, tmp_path / "weights" / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    (tmp_path / "models").mkdir()
    (tmp_path / "weights" / "m.onnx").rename(tmp_path / "models" / "m.onnx")  # the data in another folder: --external-data-dir
    (tmp_path / "check.py").write_text(CHECK)
    check = ["--check", sys.executable, tmp_path / "check.py", "polygraphy_debug.engine", "polygraphy_debug.onnx", "{artifact}", tmp_path / "log.jsonl"]
    result = invoke("debug", "precision", tmp_path / "models" / "m.onnx", "--external-data-dir", tmp_path / "weights", "--builder-optimization-level", "1", *check)
    assert result.exit_code == 0, result.stderr
    assert seen and len(seen) == len(log(tmp_path))
    assert all(config.builder_optimization_level == 1 for _, config in seen)


@pytest.mark.parametrize("flags", [("--trt-progress",), ("--builder-optimization-level", "3")])
def test_progress_bar_only_when_asked(builds, tmp_path, flags):
    _, seen = builds
    assert precision(tmp_path, *flags).exit_code == 0
    assert seen and all((getattr(config, "progress_monitor", None) is not None) == (flags[0] == "--trt-progress") for _, config in seen)
