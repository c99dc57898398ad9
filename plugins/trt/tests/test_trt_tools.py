"""``parity inspect capability`` and ``parity template trt-network`` / ``trt-config``, run against the TensorRT
model (NOT TensorRT) of each modelled version, then the real TensorRT where it imports."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from parity.testing import invoke, relu_add

HAVE_TRT = importlib.util.find_spec("tensorrt") is not None
CUSTOM = "example.custom"


def _partly_supported(path: Path, domain: str = CUSTOM, op: str = "Plug") -> Path:
    """x -> Relu (0) -> Plug (1, unsupported) -> Add w (2) -> Plug2 (3, unsupported) -> Sigmoid (4) -> y."""
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])  # noqa: E731
    weight = numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "w")
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node(op, ["a"], ["b"], name="plug", domain=domain),
        helper.make_node("Add", ["b", "w"], ["c"], name="add"),
        helper.make_node(op + "2", ["c"], ["d"], name="plug2", domain=domain),
        helper.make_node("Sigmoid", ["d"], ["y"], name="sig"),
    ]
    graph = helper.make_graph(nodes, "partly", [vi("x")], [vi("y")], [weight], value_info=[vi("a"), vi("b"), vi("c"), vi("d")])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, ir_version=10, opset_imports=opsets)
    onnx.save(model, str(path))
    return path


def _run(path: Path, feeds: dict) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


# --- inspect capability -----------------------------------------------------------------------------


def test_capability_fully_supported_writes_nothing(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    out = tmp_path / "dumps"
    result = invoke("inspect", "capability", model, "--with-partitioning", "-o", out)
    assert result.exit_code == 0, result
    assert "fully supported" in result.stdout
    assert not out.exists()
    plain = invoke("inspect", "capability", model, "-o", out)
    assert plain.exit_code == 0 and "fully supported" in plain.stdout and not out.exists()


def test_capability_partitions_around_unsupported_nodes(trt_backend, tmp_path):
    model = _partly_supported(tmp_path / "partly.onnx")
    out = tmp_path / "parts"
    result = invoke("inspect", "capability", model, "--with-partitioning", "-o", out)
    assert result.exit_code == 0, result
    assert sorted(p.name for p in out.iterdir()) == [
        "results.txt",
        "supported_subgraph-nodes-0-0.onnx", "supported_subgraph-nodes-2-2.onnx", "supported_subgraph-nodes-4-4.onnx",
        "unsupported_subgraph-nodes-1-1.onnx", "unsupported_subgraph-nodes-3-3.onnx",
    ]  # fmt: skip
    assert "3 supported subgraph(s), 2 unsupported" in result.stdout
    # each supported part is a model of its own: it computes what those nodes compute
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    (relu,) = _run(out / "supported_subgraph-nodes-0-0.onnx", {"x": x})
    np.testing.assert_array_equal(relu, np.maximum(x, 0))
    add = onnx.load(str(out / "supported_subgraph-nodes-2-2.onnx"))
    assert [i.name for i in add.graph.input] == ["b"] and [o.name for o in add.graph.output] == ["c"]
    (plus,) = _run(out / "supported_subgraph-nodes-2-2.onnx", {"b": x})
    np.testing.assert_allclose(plus, x + 0.5)
    unsupported = onnx.load(str(out / "unsupported_subgraph-nodes-1-1.onnx"))
    assert [n.op_type for n in unsupported.graph.node] == ["Plug"]
    onnx.checker.check_model(unsupported, full_check=True)
    # the table: one row per operator and reason, with the node ranges
    text = (out / "results.txt").read_text()
    assert text.strip() in result.stdout
    rows = [line for line in text.splitlines() if line.startswith("Plug")]
    assert len(rows) == 2 and any(r.split("|")[3].strip() == "1-1" for r in rows) and any(r.split("|")[3].strip() == "3-3" for r in rows)
    assert all("Plug" in r.split("|")[2] for r in rows)  # the parser's reason names the operator


def test_capability_without_partitioning_lists_parser_errors(trt_backend, tmp_path):
    model = _partly_supported(tmp_path / "partly.onnx")
    out = tmp_path / "report"
    result = invoke("inspect", "capability", model, "-o", out)
    assert result.exit_code == 0, result
    assert sorted(p.name for p in out.iterdir()) == ["results.txt"]
    text = (out / "results.txt").read_text()
    assert text.splitlines()[0].split("|")[0].strip() == "Operator"
    # at least the node the parse failed on, with its name
    assert "plug" in text and "Plug" in text


def test_capability_model_failing_the_checker_is_cut_as_it_is(trt_backend, tmp_path):
    # made-up op types in the default domain (as in Polygraphy's own test model): the parts are written unchecked
    model = _partly_supported(tmp_path / "fake.onnx", domain="", op="FAKE")
    out = tmp_path / "parts"
    result = invoke("inspect", "capability", model, "--with-partitioning", "-o", out)
    assert result.exit_code == 0, result
    assert "fails the ONNX checker" in result.stderr
    assert (out / "unsupported_subgraph-nodes-3-3.onnx").exists() and (out / "supported_subgraph-nodes-4-4.onnx").exists()


def test_capability_save_external_data(trt_backend, tmp_path):
    model = _partly_supported(tmp_path / "partly.onnx")
    out = tmp_path / "parts"
    result = invoke("inspect", "capability", model, "--with-partitioning", "-o", out, "--save-external-data", "--external-data-size-threshold", "0")
    assert result.exit_code == 0, result
    add = out / "supported_subgraph-nodes-2-2.onnx"
    assert (out / "supported_subgraph-nodes-2-2.onnx.data").exists()
    weight = onnx.load(str(add), load_external_data=False).graph.initializer[0]
    assert weight.data_location == TensorProto.EXTERNAL


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--ignore-external-data"], "needs the weights"),
        (["--no-onnxruntime-shape-inference"], "--shape-inference"),
        (["--external-data-size-threshold", "10"], "--save-external-data"),
    ],
)
def test_capability_refusals(trt_backend, tmp_path, flags, words):
    model = _partly_supported(tmp_path / "partly.onnx")
    result = invoke("inspect", "capability", model, "--with-partitioning", "-o", tmp_path / "o", *flags)
    assert result.exit_code == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_capability_shape_inference_gives_cut_points_their_types(trt_backend, tmp_path):
    model = _partly_supported(tmp_path / "partly.onnx")
    proto = onnx.load(str(model))
    del proto.graph.value_info[:]  # 'a' and 'c' then have no type until inference runs (b and d never get one)
    proto.graph.value_info.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("b", "d")])
    bare = tmp_path / "bare.onnx"
    onnx.save(proto, str(bare))
    for flags in ([], ["--shape-inference"], ["--shape-inference", "--no-onnxruntime-shape-inference"]):
        out = tmp_path / f"o{len(flags)}"
        result = invoke("inspect", "capability", bare, "--with-partitioning", "-o", out, *flags)
        assert result.exit_code == 0, result
        assert (out / "supported_subgraph-nodes-0-0.onnx").exists()


@pytest.mark.skipif(HAVE_TRT, reason="checks the behaviour without TensorRT")
@pytest.mark.parametrize(
    "args",
    [["inspect", "capability", "{m}"], ["template", "trt-network", "{m}"], ["template", "trt-config", "-o", "{d}/c.py"],
     ["plugin", "autotune", "{m}", "--plugin-dir", "{d}", "-o", "{d}/t.onnx"]],
)  # fmt: skip
def test_without_tensorrt_one_line(tmp_path, args):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    result = invoke(*(a.format(m=model, d=tmp_path) for a in args))
    if args[1] == "trt-config":  # writing the script needs no TensorRT; running it does
        assert result.exit_code == 0, result
        return
    assert result.exit_code == 3 and result.stderr.strip().startswith("parity: error: tensorrt is not installed")
    assert len(result.stderr.strip().splitlines()) == 1


# --- template trt-network ---------------------------------------------------------------------------


def test_template_trt_network_empty(trt_backend, tmp_path):
    script = tmp_path / "net.py"
    result = invoke("template", "trt-network", "-o", script)
    assert result.exit_code == 0, result
    builder, network = runpy.run_path(str(script))["load_network"]()
    assert isinstance(builder, trt_backend.Builder) and isinstance(network, trt_backend.INetworkDefinition)
    assert network.num_layers == 0


def test_template_trt_network_from_model_applies_network_options(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    script = tmp_path / "net.py"
    assert invoke("template", "trt-network", model, "-o", script).exit_code == 0
    builder, network, parser = runpy.run_path(str(script))["load_network"]()
    assert isinstance(parser, trt_backend.OnnxParser) and network.num_layers > 0 and network.num_outputs == 1
    marked = tmp_path / "marked.py"
    assert invoke("template", "trt-network", model, "--trt-outputs", "mark", "all", "-o", marked).exit_code == 0
    _b, network2, _p = runpy.run_path(str(marked))["load_network"]()
    assert network2.num_outputs > 1
    # the script is what parity run --trt loads as a network script
    shown = invoke("inspect", "model", script, "--model-type", "trt-network-script")
    assert shown.exit_code == 0, shown
    assert "TensorRT network" in shown.stdout


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--onnx-outputs", "zz*"], "no tensor of the model matches 'zz*'"),
        (["--ckpt", "x"], "TensorFlow"),
        (["--tf-outputs", "y"], "TensorFlow"),
        (["--model-type", "engine"], "ONNX models only"),
        (["--ignore-external-data"], "needs the weights"),
    ],
)
def test_template_trt_network_refusals(trt_backend, tmp_path, flags, words):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    result = invoke("template", "trt-network", model, *flags, "-o", tmp_path / "n.py")
    assert result.exit_code == 2 and words in result.stderr
    assert not (tmp_path / "n.py").exists()


def test_template_trt_network_onnx_edits(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    marked = tmp_path / "marked.py"
    assert invoke("template", "trt-network", model, "--onnx-outputs", "h", "y", "-o", marked).exit_code == 0
    _b, network, _p = runpy.run_path(str(marked))["load_network"]()
    assert sorted(network.get_output(i).name for i in range(network.num_outputs)) == ["h", "y"]
    by_type = tmp_path / "by_type.py"
    assert invoke("template", "trt-network", model, "--onnx-outputs-by-type", "relu", "-o", by_type).exit_code == 0
    _b, network, _p = runpy.run_path(str(by_type))["load_network"]()
    assert sorted(network.get_output(i).name for i in range(network.num_outputs)) == ["h", "y"]
    excluded = tmp_path / "excluded.py"
    assert invoke("template", "trt-network", model, "--onnx-outputs", "*", "--onnx-exclude-outputs", "y", "-o", excluded).exit_code == 0
    _b, network, _p = runpy.run_path(str(excluded))["load_network"]()
    assert [network.get_output(i).name for i in range(network.num_outputs)] == ["h"]
    half = tmp_path / "half.py"
    assert invoke("template", "trt-network", model, "--fp-to-fp16", "-o", half).exit_code == 0
    _b, network, _p = runpy.run_path(str(half))["load_network"]()
    kinds = [str(network.get_layer(i).type.name) for i in range(network.num_layers)]
    assert "CAST" in kinds and str(network.get_input(0).dtype.name) == "FLOAT"  # float16 inside, float32 at the edges
    assert sorted(p.name for p in tmp_path.iterdir()) == ["by_type.py", "excluded.py", "half.py", "marked.py", "model.onnx"]


def test_template_trt_network_options_need_a_model(trt_backend, tmp_path):
    result = invoke("template", "trt-network", "--trt-outputs", "y")
    assert result.exit_code == 2 and "give MODEL" in result.stderr


# --- template trt-config ----------------------------------------------------------------------------


def _config(trt, script: Path) -> object:
    builder = trt.Builder(trt.Logger())
    network = builder.create_network(0)
    return runpy.run_path(str(script))["load_config"](builder, network)


def test_template_trt_config_plain(trt_backend, tmp_path):
    script = tmp_path / "config.py"
    assert invoke("template", "trt-config", "-o", script).exit_code == 0
    assert isinstance(_config(trt_backend, script), trt_backend.IBuilderConfig)


def test_template_trt_config_applies_builder_options(trt_backend, tmp_path):
    script = tmp_path / "config.py"
    result = invoke("template", "trt-config", "--builder-optimization-level", "2", "--pool-limit", "workspace:1M", "-o", script)
    assert result.exit_code == 0, result
    config = _config(trt_backend, script)
    assert config.builder_optimization_level == 2
    assert config.get_memory_pool_limit(trt_backend.MemoryPoolType.WORKSPACE) == 1 << 20


def test_template_trt_config_precision(trt_backend, tmp_path):
    script = tmp_path / "config.py"
    assert invoke("template", "trt-config", "--fp16", "-o", script).exit_code == 0
    if not hasattr(trt_backend.BuilderFlag, "FP16"):  # TensorRT 11 is strongly typed: the script says so, in one line
        with pytest.raises(Exception, match="fp16"):
            _config(trt_backend, script)
        return
    assert _config(trt_backend, script).get_flag(trt_backend.BuilderFlag.FP16)


def test_template_trt_config_refusals(tmp_path):
    torch = invoke("template", "trt-config", "--data-loader-backend-module", "torch")
    assert torch.exit_code == 2 and "numpy" in torch.stderr
    bad = invoke("template", "trt-config", "--trt-min-shapes", "x:[1,3]")
    assert bad.exit_code == 2
    assert invoke("template", "trt-config", "--model-type", "engine").exit_code == 2


# --- plugin autotune (parity-surgeon's command; TensorRT builds and times the candidates) ----------------

# Neg(Neg(x)) is x: the "plugin" is an Identity TensorRT can build (a custom replace_with_plugin keeps it in the
# default domain); a second plugin's op TensorRT cannot build
AUTOTUNE_PATTERNS = {
    "unneg": '''
import onnx_graphsurgeon as gs

def get_matching_subgraphs(graph):
    p = gs.GraphPattern()
    x = p.variable()
    p.set_output_tensors([p.add("b", "Neg", inputs=[p.add("a", "Neg", inputs=[x])])])
    return [{"inputs": [m.inputs[0].name], "outputs": [m.outputs[0].name], "attributes": {}} for m in p.match_all(graph)]

def get_plugin_metadata():
    return {"name": "unneg", "op": "Identity"}

def replace_with_plugin(graph, input_tensors, output_tensors, attrs=None, op=None):
    out = output_tensors[0]
    out.inputs.clear()
    graph.layer(op=op, inputs=[input_tensors[0]], outputs=[out])
    graph.cleanup().toposort()
    return True
''',
    "nobuild": '''
def get_matching_subgraphs(graph):
    return [{"inputs": ["x"], "outputs": ["r"], "attributes": {"k": 1}}]

def get_plugin_metadata():
    return {"name": "nobuild", "op": "NoSuchPlugin"}
''',
}


def _negneg(path: Path) -> Path:
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])  # noqa: E731
    nodes = [helper.make_node("Neg", ["x"], ["n1"], name="neg1"), helper.make_node("Neg", ["n1"], ["n2"], name="neg2"),
             helper.make_node("Relu", ["n2"], ["r"], name="relu")]  # fmt: skip
    model = helper.make_model(helper.make_graph(nodes, "negneg", [vi("x")], [vi("r")]), ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    root = tmp_path / "plugins"
    for name, text in AUTOTUNE_PATTERNS.items():
        (root / name).mkdir(parents=True)
        (root / name / "pattern.py").write_text(text)
    return root


@pytest.mark.parametrize("mode", ["greedy", "exhaustive"])
def test_plugin_autotune_keeps_what_builds_and_wins(trt_backend, tmp_path, plugin_dir, mode):
    model = _negneg(tmp_path / "negneg.onnx")
    out, report = tmp_path / "tuned.onnx", tmp_path / "report.txt"
    # a threshold below -1 keeps any replacement TensorRT can build: the choice no longer depends on timing noise
    args = ["plugin", "autotune", model, "--plugin-dir", plugin_dir, "-o", out, "--report", report, "--autotune-mode", mode, "--threshold", "-1000"]
    result = invoke(*args)
    assert result.exit_code == 0, result
    tuned = onnx.load(str(out))
    assert [n.op_type for n in tuned.graph.node] == ["Identity", "Relu"]
    text = report.read_text()
    assert "not built" in text and "nobuild#0 (NoSuchPlugin)" in text and "best:" in text and "unneg#0 (Identity)" in text.split("best:")[1]
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_run(out, {"x": x})[0], np.maximum(x, 0))


def test_plugin_autotune_nothing_faster_keeps_the_original(trt_backend, tmp_path, plugin_dir):
    model = _negneg(tmp_path / "negneg.onnx")
    out = tmp_path / "tuned.onnx"
    result = invoke("plugin", "autotune", model, "--plugin-dir", plugin_dir, "-o", out, "--threshold", "1000", "--exclude", "nobuild")
    assert result.exit_code == 0, result
    assert "best: the original model" in result.stdout
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["Neg", "Neg", "Relu"]


def test_plugin_autotune_skip_and_config_yaml(tmp_path, plugin_dir):
    model = _negneg(tmp_path / "negneg.onnx")
    config = tmp_path / "config.yaml"
    result = invoke("plugin", "autotune", model, "--plugin-dir", plugin_dir, "-o", tmp_path / "t.onnx", "--skip-autotuning", "--save-config-yaml", config)
    assert result.exit_code == 0, result
    assert "2 candidate replacement(s)" in result.stdout and config.exists() and not (tmp_path / "t.onnx").exists()
    refused = invoke("plugin", "autotune", model, "--plugin-dir", plugin_dir, "-o", tmp_path / "t.onnx", "--no-timing-cache", "--timing-cache", "c")
    assert refused.exit_code == 2 and "cannot be used together" in refused.stderr


def test_plugin_autotune_from_config_with_timing_cache(trt_backend, tmp_path, plugin_dir):
    model = _negneg(tmp_path / "negneg.onnx")
    config = tmp_path / "config.yaml"
    assert invoke("plugin", "match", model, "--plugin-dir", plugin_dir, "--include", "unneg", "-o", config).exit_code == 0
    cache = tmp_path / "timing.cache"
    out = tmp_path / "tuned.onnx"
    args = ["plugin", "autotune", model, "--plugin-dir", plugin_dir, "-o", out, "--load-config-yaml", config, "--timing-cache", cache, "--threshold", "-1000"]
    result = invoke(*args)
    assert result.exit_code == 0, result
    assert "1 candidate replacement(s)" in result.stdout and cache.exists()
    assert [n.op_type for n in onnx.load(str(out)).graph.node] == ["Identity", "Relu"]


def test_template_trt_config_tactic_replay(trt_backend, tmp_path):
    model = relu_add(tmp_path / "model.onnx", (2, 3))
    replay = tmp_path / "replay.json"
    built = invoke("convert", model, "-o", tmp_path / "m.engine", "--save-tactics", replay)
    assert built.exit_code == 0, built
    script = tmp_path / "config.py"
    assert invoke("template", "trt-config", "--load-tactics", replay, "-o", script).exit_code == 0
    assert str(replay) in script.read_text()
    config = _config(trt_backend, script)
    # the replay is in the config: an algorithm selector (TensorRT 10's first mechanism) or the editable timing cache
    selector = getattr(config, "algorithm_selector", None) if hasattr(trt_backend, "IAlgorithmSelector") else None
    editable = getattr(trt_backend.BuilderFlag, "EDITABLE_TIMING_CACHE", None)
    assert selector is not None or (editable is not None and config.get_flag(editable))
    plain = tmp_path / "plain.py"
    assert invoke("template", "trt-config", "-o", plain).exit_code == 0
    if selector is None:
        assert not _config(trt_backend, plain).get_flag(editable)  # the flag came from the replay
    refused = invoke("template", "trt-config", "--save-tactics", tmp_path / "r2.json")
    assert refused.exit_code == 2 and "--save-tactics" in refused.stderr


def test_capability_fp_to_fp16(trt_backend, tmp_path):
    # an op onnxruntime runs (so the fp16 converter can check its result) but the TensorRT model's parser has not
    model = _partly_supported(tmp_path / "partly.onnx", domain="", op="Hardmax")
    proto = onnx.load(str(model))
    proto.graph.node[3].op_type = "Hardmax"
    onnx.save(proto, str(model))
    out = tmp_path / "parts"
    result = invoke("inspect", "capability", model, "--with-partitioning", "--fp-to-fp16", "-o", out)
    assert result.exit_code == 0, result
    # Hardmax stays float32 between Casts the converter adds (onnxruntime has no fp16 Hardmax): the indices move
    unsupported = sorted(out.glob("unsupported_*.onnx"))
    assert len(unsupported) == 2 and all("Hardmax" in [n.op_type for n in onnx.load(str(f)).graph.node] for f in unsupported)
    weights = [t for f in out.glob("supported_*.onnx") for t in onnx.load(str(f)).graph.initializer]
    assert weights and all(t.data_type == TensorProto.FLOAT16 for t in weights)  # converted before cutting


def test_capability_shape_inference_leaves_no_file_in_the_working_folder(trt_backend, tmp_path, monkeypatch):
    # onnxruntime's symbolic inference cannot finish on custom ops and then saves sym_shape_infer_temp.onnx in the
    # working folder: it must run elsewhere
    model = _partly_supported(tmp_path / "partly.onnx")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = invoke("inspect", "capability", model, "--with-partitioning", "--shape-inference", "-o", tmp_path / "o")
    assert result.exit_code == 0, result
    assert list(work.iterdir()) == []
