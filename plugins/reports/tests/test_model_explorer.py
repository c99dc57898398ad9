"""``--save-model-explorer``: the file is node data Model Explorer reads, keyed by the node ids its ONNX adapter
shows (``parity_reports.model_explorer``).

Checked against Model Explorer itself (dev requirements): the real ONNX adapter (``model-explorer-onnx``) converts
each model and names its nodes; the file is rebuilt with Model Explorer's own node-data classes
(``model_explorer.node_data_builder``, read with dacite as its server reads graphs) and must say the same; and the
UI's rule for telling one graph's data from data keyed by graph id (``getNodeDataProviderData`` in
``src/ui/src/components/visualizer/node_data_provider_extension_service.ts``) must pick the intended form.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from core_models import save, tensor
from onnx import TensorProto, helper, numpy_helper
from parity_reports.model_explorer import FAIL, FIRST, adapter_node_ids, error_node_data

adapter = pytest.importorskip("model_explorer_onnx.main", reason="Model Explorer is a dev requirement: pip install -r requirements-dev.txt")
ndb = pytest.importorskip("model_explorer.node_data_builder", reason="Model Explorer is a dev requirement: pip install -r requirements-dev.txt")
dacite = pytest.importorskip("dacite")


def explorer_graph(path: Path):
    """The main graph as Model Explorer's ONNX adapter builds it."""
    return adapter.ONNXAdapter().convert(str(path), {})["graphs"][0]


def tags(node) -> list[str]:
    """The output tensor names the adapter put on a node (``__tensor_tag`` of its outputs' metadata)."""
    return [kv.value for item in node.outputsMetadata for kv in item.attrs if kv.key == "__tensor_tag"]


def ui_graph_data(text: str, graph: str) -> dict:
    """``getNodeDataProviderData``: an object with ``results`` and no ``results.results`` is the shown graph's data;
    anything else is keyed by graph id."""
    obj = json.loads(text)
    if obj.get("results") is not None and not (isinstance(obj["results"], dict) and obj["results"].get("results") is not None):
        return obj
    return obj[graph]


def explorer_reads(text: str, graph: str) -> dict:
    """The data as Model Explorer's classes hold it (unknown fields refused), written back by its own builder."""
    data = ui_graph_data(text, graph)
    parsed = dacite.from_dict(ndb.GraphNodeData, data, config=dacite.Config(strict=True, check_types=False))
    for key, result in parsed.results.items():
        assert isinstance(result, ndb.NodeDataResult), key
        value = result.value
        assert (isinstance(value, (int, float)) and np.isfinite(value)) or value in ("inf", "ok", "FAIL"), (key, value)
        assert re.fullmatch(r"#[0-9a-f]{6}", result.bgColor), result.bgColor  # hex, as the UI's getRgbFromColor reads
    return json.loads(parsed.to_json_string())


def expected_value(row: dict, counts: dict) -> float | str:
    """What a tensor's node shows, from --report: NaN or inf for a failure with such values, else max abs error
    (null there: none measured, then the verdict)."""
    values = counts[row["name"]]
    if not row["passed"] and values["nan_actual"] + values["nan_reference"]:
        return "NaN"
    if not row["passed"] and values["inf_mismatches"]:
        return "inf"
    return row["max_abs"] if row["max_abs"] is not None else "ok" if row["passed"] else "FAIL"


def rank(value: float | str) -> tuple[int, float]:
    return {"NaN": (3, 0.0), "inf": (2, 0.0), "FAIL": (0, 1.0), "ok": (0, 0.0)}.get(value, (1, value))  # type: ignore[arg-type]


def awkward_model(path: Path) -> Path:
    """Unnamed nodes, a repeated name, a node named 'results', and an If whose branches hold unnamed nodes too."""
    then_g = helper.make_graph([helper.make_node("Neg", ["a"], ["t_out"])], "then", [], [tensor("t_out", TensorProto.FLOAT, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Abs", ["a"], ["e_out"])], "else", [], [tensor("e_out", TensorProto.FLOAT, [1, 4])])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),  # unnamed -> node
        helper.make_node("Mul", ["a", "k"], ["b"], name="dup"),
        helper.make_node("Add", ["b", "k"], ["c"], name="dup"),  # repeated -> dup_1
        helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),  # unnamed -> node_1
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="results"),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),  # unnamed
    ]
    inits = [numpy_helper.from_array(np.array(1.5, np.float32), "k"), numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    return save(helper.make_graph(nodes, "", [tensor("x", TensorProto.FLOAT, [1, 4])], [tensor("y", TensorProto.FLOAT, [1, 4])], inits), path)


@pytest.mark.parametrize("which", ["awkward", "ppocr_det", "ppocr_rec", "silero_vad_op15"])
def test_node_ids_are_the_adapters(which, tmp_path, corpus_model):
    """Every main-graph node's id is the one the adapter shows, on the node carrying the same output tensors."""
    path = awkward_model(tmp_path / "m.onnx") if which == "awkward" else corpus_model(which)
    model = onnx.load(str(path), load_external_data=False)
    ids = adapter_node_ids(model)
    shown = {n.id: n for n in explorer_graph(path).nodes}
    assert len(set(ids)) == len(ids) == len(model.graph.node)
    for node, node_id in zip(model.graph.node, ids):
        assert node_id in shown, (node.name, node.op_type, node_id)
        if node.op_type != "If":  # the adapter flattens If branches into a (Phi) node of its own
            assert tags(shown[node_id]) == [t for t in node.output], node_id
    if which == "awkward":
        assert ids == ["node", "dup", "dup_1", "node_1", "results", "node_2"]


def test_run_file_colours_the_adapters_nodes(corpus_model, main, tmp_path, monkeypatch):
    """PP-OCRv4 det against its fp16 conversion, layerwise: every compared tensor's producer is keyed by its id in
    the adapter, with the largest max abs error of its outputs; the first divergence purple, failures red."""
    monkeypatch.chdir(tmp_path)
    src = corpus_model("ppocr_det")
    assert main("convert", "--fp-to-fp16", src, "-o", "det16.onnx")[0] == 0
    mark = ("--onnx-outputs", "mark", "all")
    assert main("run", src, "--onnxrt", "--input-shapes", "x:[1,3,64,64]", *mark, "--save-inputs", "in.npz", "--save-outputs", "golden.npz")[0] == 0
    saved = ("--load-inputs", "in.npz", "--load-outputs", "golden.npz", "--tolerance-preset", "fp16")
    code, out, err = main("run", "det16.onnx", "--onnxrt", *saved, *mark, "--report", "r.json", "--save-model-explorer", "me.json")
    assert code == 1, out + err
    graph = explorer_graph(Path("det16.onnx"))
    text = Path("me.json").read_text()
    assert "results" not in json.loads(text)["results"]  # one graph's data: the UI shows it on the graph in view
    data = explorer_reads(text, graph.id)
    shown = {n.id: n for n in graph.nodes}
    assert set(data["results"]) <= set(shown)
    run = json.loads(Path("r.json").read_text())
    (layerwise,) = run["layerwise"]
    by_tensor = {t["name"]: t for t in layerwise["tensors"]}
    (iteration,) = run["comparisons"][0]["iterations"]
    counts = {o["name"]: o["values"] for o in iteration["outputs"]}
    for node_id, result in data["results"].items():
        if node_id.startswith("[value] "):
            assert result["value"] == expected_value(by_tensor[node_id[8:]], counts)  # a graph output's node
            continue
        outputs = [by_tensor[t] for t in tags(shown[node_id]) if t in by_tensor]
        assert outputs, node_id
        assert result["value"] == max((expected_value(t, counts) for t in outputs), key=rank)
        if any(t["name"] == layerwise["first"] for t in outputs):
            assert result["bgColor"] == FIRST
        elif not all(t["passed"] for t in outputs):
            assert result["bgColor"] == FAIL
    producers = {shown_id for shown_id, n in shown.items() if any(t in by_tensor for t in tags(n)) and not shown_id.startswith("[value]")}
    assert producers == {k for k in data["results"] if not k.startswith("[value]")}  # every compared node, no other
    assert list(data["results"].values()).count({"value": by_tensor[layerwise["first"]]["max_abs"], "bgColor": FIRST}) == 1


def test_a_node_named_results_gets_the_graph_keyed_form(tmp_path):
    path = awkward_model(tmp_path / "m.onnx")
    graph = explorer_graph(path)
    data = error_node_data(path, [{"name": "cond", "passed": False, "max_abs": 1.0}, {"name": "a", "passed": True, "max_abs": 0.0, "atol": 1e-3}])
    text = json.dumps(data)
    assert list(data) == [graph.id] == [""]  # an unnamed graph: the adapter's id is its empty name
    read = explorer_reads(text, graph.id)
    assert read["results"] == {"results": {"value": 1.0, "bgColor": FAIL}, "node": {"value": 0.0, "bgColor": "#e8f5e9"}}
