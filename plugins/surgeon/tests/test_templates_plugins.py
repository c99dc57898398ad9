"""``parity template onnx-gs`` and ``parity plugin list/match/replace`` on models these tests build."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

# the toy plugin: Relu(x) and Neg(y) -> Add -> Sigmoid and Tanh becomes one ToyPlugin node; Add's alpha is checked
# through the node name carrying "fuse" (a pattern's own condition), the factor comes from the inputs' count
PATTERN = textwrap.dedent(
    """
    import onnx_graphsurgeon as gs

    def _pattern():
        p = gs.GraphPattern()
        x, y = p.variable(), p.variable()
        a = p.add("relu", "Relu", inputs=[x])
        b = p.add("neg", "Neg", inputs=[y])
        c = p.add("add", "Add", inputs=[a, b], check_func=lambda node: "fuse" in node.name)
        d = p.add("sig", "Sigmoid", inputs=[c])
        e = p.add("tanh", "Tanh", inputs=[c])
        p.set_output_tensors([d, e])
        return p

    def get_matching_subgraphs(graph):
        found = []
        for m in _pattern().match_all(graph):
            found.append({"inputs": sorted({t.name for t in m.inputs}), "outputs": sorted({t.name for t in m.outputs}),
                          "attributes": {"factor": len(m.inputs) * 3}})
        return found

    def get_plugin_metadata():
        return {"name": "toyPlugin", "op": "ToyPlugin"}
    """
)


def _toy_model(path: Path, add_name: str = "fuse_add") -> Path:
    """x -> Exp -> (Relu, Neg of y) -> Add -> Sigmoid, Tanh -> outputs s, t."""
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])  # noqa: E731
    nodes = [
        helper.make_node("Exp", ["x"], ["e"], name="exp"),
        helper.make_node("Relu", ["e"], ["r"], name="relu"),
        helper.make_node("Neg", ["y"], ["n"], name="neg"),
        helper.make_node("Add", ["r", "n"], ["a"], name=add_name),
        helper.make_node("Sigmoid", ["a"], ["s"], name="sig"),
        helper.make_node("Tanh", ["a"], ["t"], name="tanh"),
    ]
    graph = helper.make_graph(nodes, "toy", [vi("x"), vi("y")], [vi("s"), vi("t")])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def toy(tmp_path: Path) -> tuple[Path, Path]:
    plugins = tmp_path / "plugins"
    (plugins / "toyPlugin").mkdir(parents=True)
    (plugins / "toyPlugin" / "pattern.py").write_text(PATTERN)
    (plugins / "other").mkdir()
    (plugins / "other" / "pattern.py").write_text(
        "def get_matching_subgraphs(graph):\n    return []\n\ndef get_plugin_metadata():\n    return {'name': 'other', 'op': 'Other'}\n"
    )
    return _toy_model(tmp_path / "toy.onnx"), plugins


def _run(model: Path, feeds: dict) -> list:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


# --- plugin list / match / replace ------------------------------------------------------------------


def test_plugin_list_counts_matches_per_plugin(toy, parity_invoke):
    model, plugins = toy
    result = parity_invoke("plugin", "list", model, "--plugin-dir", plugins)
    assert result.exit_code == 0, result.stderr
    assert "toyPlugin: 1 match(es)" in result.stdout and "other: 0 match(es)" in result.stdout
    assert "{'other': 0, 'toyPlugin': 1}" in result.stdout or "{'toyPlugin': 1, 'other': 0}" in result.stdout


def test_plugin_list_include_exclude(toy, parity_invoke):
    model, plugins = toy
    only = parity_invoke("plugin", "list", model, "--plugin-dir", plugins, "--include", "other")
    assert only.exit_code == 0 and "toyPlugin" not in only.stdout and "other: 0" in only.stdout
    left = parity_invoke("plugin", "list", model, "--plugin-dir", plugins, "--exclude", "other")
    assert left.exit_code == 0 and "other" not in left.stdout and "toyPlugin: 1" in left.stdout
    both = parity_invoke("plugin", "list", model, "--plugin-dir", plugins, "--include", "a", "--exclude", "b")
    assert both.exit_code == 2 and "cannot be used together" in both.stderr


def test_plugin_match_pattern_condition_decides(tmp_path, toy, parity_invoke):
    _model, plugins = toy
    plain = _toy_model(tmp_path / "plain.onnx", add_name="add")  # the pattern's check_func refuses this Add
    result = parity_invoke("plugin", "list", plain, "--plugin-dir", plugins)
    assert result.exit_code == 0 and "toyPlugin: 0 match(es)" in result.stdout


def test_plugin_match_writes_config_yaml(tmp_path, toy, parity_invoke):
    yaml = pytest.importorskip("yaml")
    model, plugins = toy
    config = tmp_path / "out" / "config.yaml"
    config.parent.mkdir()
    result = parity_invoke("plugin", "match", model, "--plugin-dir", plugins, "-o", config)
    assert result.exit_code == 0, result.stderr
    docs = list(yaml.safe_load_all(config.read_text()))
    assert docs == [{"name": "toyPlugin", "op": "ToyPlugin",
                     "instances": [{"inputs": ["e", "y"], "outputs": ["s", "t"], "attributes": {"factor": 6}}]}]  # fmt: skip


def test_plugin_match_default_output_beside_model(toy, parity_invoke):
    model, plugins = toy
    assert parity_invoke("plugin", "match", model, "--plugin-dir", plugins).exit_code == 0
    assert (model.parent / "config.yaml").exists()


def test_plugin_replace_puts_one_plugin_node(tmp_path, toy, parity_invoke):
    model, plugins = toy
    config = tmp_path / "config.yaml"
    assert parity_invoke("plugin", "match", model, "--plugin-dir", plugins, "-o", config).exit_code == 0
    out = tmp_path / "replaced.onnx"
    result = parity_invoke("plugin", "replace", model, "--plugin-dir", plugins, "--config", config, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert "toyPlugin: replaced 1 of 1 instance(s) with ToyPlugin" in result.stdout
    replaced = onnx.load(str(out))
    assert [n.op_type for n in replaced.graph.node] == ["Exp", "ToyPlugin"]
    plugin = replaced.graph.node[1]
    assert list(plugin.input) == ["e", "y"] and list(plugin.output) == ["s", "t"]
    assert helper.get_attribute_value(plugin.attribute[0]) == 6 and plugin.attribute[0].name == "factor"
    assert plugin.domain == "trt.plugins" and any(o.domain == "trt.plugins" for o in replaced.opset_import)
    onnx.checker.check_model(replaced, full_check=True)


def test_plugin_replace_edited_config_and_custom_replacement(tmp_path, toy, parity_invoke):
    model, plugins = toy
    # a config written by hand (JSON documents, which YAML reads too), replacing only Sigmoid's producer chain
    config = tmp_path / "config.yaml"
    doc = {"name": "toyPlugin", "op": "SigPlugin", "instances": [{"inputs": ["a"], "outputs": ["s"], "attributes": {"k": 1}}]}
    config.write_text("---\n" + json.dumps(doc) + "\n")
    out = tmp_path / "r.onnx"
    assert parity_invoke("plugin", "replace", model, "--plugin-dir", plugins, "--config", config, "-o", out).exit_code == 0
    assert sorted(n.op_type for n in onnx.load(str(out)).graph.node) == ["Add", "Exp", "Neg", "Relu", "SigPlugin", "Tanh"]
    # replace_with_plugin in pattern.py does the replacing itself
    pattern = plugins / "toyPlugin" / "pattern.py"
    pattern.write_text(PATTERN + "\ndef replace_with_plugin(graph, input_tensors, output_tensors, attrs=None, op=None):\n"
                       "    output_tensors[0].inputs.clear()\n"
                       "    graph.layer(op='Identity', inputs=[input_tensors[0]], outputs=[output_tensors[0]])\n"
                       "    graph.cleanup().toposort()\n    return True\n")  # fmt: skip
    out2 = tmp_path / "r2.onnx"
    result = parity_invoke("plugin", "replace", model, "--plugin-dir", plugins, "--config", config, "-o", out2)
    assert result.exit_code == 0, result.stderr
    ops = [n.op_type for n in onnx.load(str(out2)).graph.node]
    assert "Identity" in ops and "SigPlugin" not in ops


def test_plugin_replace_bad_config_is_one_line(tmp_path, toy, parity_invoke):
    model, plugins = toy
    config = tmp_path / "config.yaml"
    config.write_text("---\n" + json.dumps({"name": "toyPlugin", "op": "X", "instances": [{"inputs": ["nope"], "outputs": ["s"]}]}) + "\n")
    result = parity_invoke("plugin", "replace", model, "--plugin-dir", plugins, "--config", config, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and "no tensor 'nope'" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("flag", [["--seed", "1"], ["--iterations", "2"], ["--data-loader-script", "x.py"], ["--model-type", "engine"]])
def test_plugin_tools_refuse_flags_that_cannot_apply(toy, parity_invoke, flag):
    model, plugins = toy
    result = parity_invoke("plugin", "list", model, "--plugin-dir", plugins, *flag)
    assert result.exit_code == 2 and flag[0] in result.stderr


def test_plugin_list_sees_loading_flags(tmp_path, toy, parity_invoke):
    model, plugins = toy
    # marking 'a' as an output makes Add's output escape the subgraph: the pattern no longer matches it as internal
    marked = parity_invoke("plugin", "list", model, "--plugin-dir", plugins, "--onnx-outputs", "s", "t", "a")
    assert marked.exit_code == 0 and "toyPlugin: 0 match(es)" in marked.stdout
    bad = parity_invoke("plugin", "list", model, "--plugin-dir", plugins, "--onnx-outputs", "zz*")
    assert bad.exit_code == 2 and "zz*" in bad.stderr


# --- template onnx-gs -------------------------------------------------------------------------------


def _feeds() -> dict:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 3)).astype(np.float32), "y": rng.standard_normal((2, 3)).astype(np.float32)}


def test_template_onnx_gs_script_saves_updated_model(tmp_path, toy, parity_invoke):
    model, _ = toy
    script = tmp_path / "edit.py"
    result = parity_invoke("template", "onnx-gs", model, "-o", script)
    assert result.exit_code == 0, result.stderr
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path / "plugins", capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    updated = tmp_path / "toy_updated.onnx"
    assert updated.exists()
    for got, want in zip(_run(updated, _feeds()), _run(model, _feeds())):
        np.testing.assert_array_equal(got, want)


def test_template_onnx_gs_bakes_in_loading_flags(tmp_path, toy, parity_invoke):
    model, _ = toy
    script = tmp_path / "edit.py"
    args = ["template", "onnx-gs", model, "-o", script, "--onnx-outputs", "a", "--fp-to-fp16", "--shape-inference"]
    assert parity_invoke(*args).exit_code == 0
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    updated = onnx.load(str(tmp_path / "toy_updated.onnx"))
    assert [o.name for o in updated.graph.output] == ["a"]
    assert any(n.op_type == "Cast" for n in updated.graph.node)  # fp16 inside, float32 at the edges
    (got,) = _run(tmp_path / "toy_updated.onnx", _feeds())
    feeds = _feeds()
    np.testing.assert_allclose(got, np.maximum(np.exp(feeds["x"]), 0) - feeds["y"], rtol=2e-3, atol=2e-3)


def test_template_onnx_gs_stdout_and_refusals(tmp_path, toy, parity_invoke):
    model, _ = toy
    result = parity_invoke("template", "onnx-gs", model)
    assert result.exit_code == 0 and "import onnx_graphsurgeon as gs" in result.stdout and "def main()" in result.stdout
    assert parity_invoke("template", "onnx-gs", tmp_path / "missing.onnx").exit_code == 2
    lone = parity_invoke("template", "onnx-gs", model, "--no-onnxruntime-shape-inference")
    assert lone.exit_code == 2 and "--shape-inference" in lone.stderr
    assert parity_invoke("template", "onnx-gs", model, "-o", model).exit_code == 2
    onnx.checker.check_model(onnx.load(str(model)))  # the input is untouched


# --- template shard-hints / multi-device shard --------------------------------------------------------


def _attention(path: Path, layers: int = 1, same_qkv: bool = False) -> Path:
    """``layers`` attention layers (MatMul(q, k) -> Softmax -> MatMul(., v)), each on its own inputs, summed; with
    ``same_qkv`` one input x is Q, K and V of a single layer."""
    vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    nodes, inputs, ends = [], [], []
    for i in range(layers):
        q, k, v = ("x", "x", "x") if same_qkv else (f"q{i}", f"k{i}", f"v{i}")
        inputs += [vi("x", ["seq_len", "seq_len"])] if same_qkv else [vi(q, ["seq_len", 4]), vi(k, [4, "seq_len"]), vi(v, ["seq_len", 4])]
        nodes += [helper.make_node("MatMul", [q, k], [f"s{i}"], name=f"mm1_{i}"), helper.make_node("Softmax", [f"s{i}"], [f"p{i}"], name=f"sm{i}", axis=-1),
                  helper.make_node("MatMul", [f"p{i}", v], [f"o{i}"], name=f"mm2_{i}")]  # fmt: skip
        ends.append(f"o{i}")
    outputs = [vi(e, ["seq_len", "seq_len" if same_qkv else 4]) for e in ends]
    graph = helper.make_graph(nodes, "attention", inputs, outputs)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _collectives(path: Path) -> dict[str, int]:
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    counts: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "DistCollective":
            assert node.domain == "trt"
            op = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "collective_operation").decode()
            counts[op] = counts.get(op, 0) + 1
    return counts


def _as_one_rank(path: Path, out: Path) -> Path:
    """The sharded model with each collective an Identity: what it computes on one rank (collectives are no-ops)."""
    model = onnx.load(str(path))
    for node in model.graph.node:
        if node.op_type == "DistCollective":
            node.op_type, node.domain = "Identity", ""
            del node.attribute[:]
    onnx.save(model, str(out))
    return out


def test_shard_hints_then_shard_native(tmp_path, parity_invoke):
    model = _attention(tmp_path / "att.onnx")
    hints = tmp_path / "hints.json"
    made = parity_invoke("template", "shard-hints", model, "-o", hints)
    assert made.exit_code == 0, made.stderr
    doc = json.loads(hints.read_text())
    assert doc["polygraphy_class"] == "ShardHints" and [layer["q"] for layer in doc["attention_layers"]] == ["q0"]
    assert {t["name"]: t["seq_len_idx"] for t in doc["inputs"]} == {"q0": 0, "k0": 1, "v0": 0}  # from the dims named seq_len
    assert [t["name"] for t in doc["outputs"]] == ["o0"] and doc["kv_rank"] == 2
    out = tmp_path / "sharded.onnx"
    result = parity_invoke("multi-device", "shard", model, "-s", hints, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert _collectives(out) == {"reduce_scatter": 3, "all_gather": 3}  # each input, K and V, the output
    feeds = {"q0": np.ones((3, 4), np.float32), "k0": np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "v0": np.eye(3, 4, dtype=np.float32)}
    np.testing.assert_allclose(_run(_as_one_rank(out, tmp_path / "one.onnx"), feeds)[0], _run(model, feeds)[0], rtol=1e-6)


def test_shard_same_qkv_gathers_once(tmp_path, parity_invoke):
    model = _attention(tmp_path / "same.onnx", same_qkv=True)
    out = tmp_path / "sharded.onnx"
    result = parity_invoke("multi-device", "shard", model, "--one-shot", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert _collectives(out) == {"reduce_scatter": 1, "all_gather": 1}  # Q was gathered with K: the output is whole


def test_shard_follows_edited_hints(tmp_path, parity_invoke):
    model = _attention(tmp_path / "two.onnx", layers=2)
    hints = tmp_path / "hints.json"
    assert parity_invoke("template", "shard-hints", model, "-o", hints).exit_code == 0
    doc = json.loads(hints.read_text())
    assert len(doc["attention_layers"]) == 2 and len(doc["inputs"]) == 6 and len(doc["outputs"]) == 2
    # keep the first layer and what it depends on
    doc["attention_layers"] = doc["attention_layers"][:1]
    doc["inputs"] = [t for t in doc["inputs"] if t["name"].endswith("0")]
    doc["outputs"] = [t for t in doc["outputs"] if t["name"].endswith("0")]
    hints.write_text(json.dumps(doc))
    out = tmp_path / "sharded.onnx"
    assert parity_invoke("multi-device", "shard", model, "-s", hints, "-o", out).exit_code == 0
    assert _collectives(out) == {"reduce_scatter": 3, "all_gather": 3}
    touched = {i for n in onnx.load(str(out)).graph.node if n.op_type == "DistCollective" for i in n.input}
    assert not any(name.endswith("1") for name in touched)


def test_shard_fused_attention(tmp_path, parity_invoke):
    model = _attention(tmp_path / "att.onnx")
    out = tmp_path / "fused.onnx"
    args = ["multi-device", "shard", model, "--one-shot", "--cp-type", "fused", "--is-causal", "--nb-rank", "2", "--q-shuffle", "1", "0", "-o", out]
    result = parity_invoke(*args)
    assert result.exit_code == 0, result.stderr
    nodes = onnx.load(str(out)).graph.node
    (attention,) = [n for n in nodes if n.op_type == "Attention"]
    attrs = {a.name: helper.get_attribute_value(a) for a in attention.attribute}
    assert attention.domain == "trt" and attrs["is_causal"] == 1 and attrs["nb_rank"] == 2
    assert not any(n.op_type in ("Softmax", "MatMul") for n in nodes)
    assert any(n.op_type == "Transpose" and n.output[0] == attention.input[0] for n in nodes)  # Q shuffled first
    assert _collectives(out) == {"reduce_scatter": 3, "all_gather": 1}  # K and V are not gathered: the fused op does it


def test_shard_hints_read_by_polygraphy(tmp_path, parity_invoke):
    multi_device = pytest.importorskip("polygraphy.tools.multi_device")
    model = _attention(tmp_path / "att.onnx")
    hints = tmp_path / "hints.json"
    assert parity_invoke("template", "shard-hints", model, "--cp-type", "fused", "--nb-rank", "4", "-o", hints).exit_code == 0
    loaded = multi_device.ShardHints.load(str(hints))
    assert loaded.attention_layers[0].q == "q0" and loaded.attention_layers[0].replace.nb_rank == 4
    assert loaded.dist_collectives.nb_rank == 4


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "-s/--hint FILE or --one-shot"),
        (["--one-shot", "-s", "h.json"], "-s/--hint FILE or --one-shot"),
        (["--one-shot", "--parallelism", "TP"], "CP"),
        (["-s", "{hints}", "--nb-rank", "2"], "--one-shot"),
        (["--one-shot", "--q-shuffle", "1", "0"], "--cp-type fused"),
    ],
)
def test_shard_refusals(tmp_path, parity_invoke, args, words):
    model = _attention(tmp_path / "att.onnx")
    hints = tmp_path / "hints.json"
    hints.write_text("{}")
    result = parity_invoke("multi-device", "shard", model, *[a.format(hints=hints) for a in args], "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and words in result.stderr, result.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_shape_inference_leaves_no_file_in_the_working_folder(tmp_path, toy, parity_invoke, monkeypatch):
    model, plugins = toy
    proto = onnx.load(str(model))
    proto.graph.node[0].op_type, proto.graph.node[0].domain = "Custom", "example.custom"  # onnxruntime's inference stops here
    proto.opset_import.append(helper.make_opsetid("example.custom", 1))
    custom = tmp_path / "custom.onnx"
    onnx.save(proto, str(custom))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = parity_invoke("plugin", "list", custom, "--plugin-dir", plugins, "--shape-inference")
    assert result.exit_code == 0, result.stderr
    assert list(work.iterdir()) == []
