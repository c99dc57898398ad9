"""``--save-model-explorer``: per-node data for Google's Model Explorer (PyPI ``ai-edge-model-explorer``), so the
graph is coloured by error (or, for ``debug precision``, by the nodes kept fp32).

The file is Model Explorer's node-data JSON for one graph, as its own builder writes it:
``GraphNodeData.to_json_string()`` in ``src/server/package/src/model_explorer/node_data_builder.py`` of
github.com/google-ai-edge/model-explorer (followed at commit c0f8dba)::

    {"name": "...", "results": {"<node id>": {"value": 0.0123, "bgColor": "#d32f2f"}, ...}}

Its UI reads such a file in ``getNodeDataProviderData`` (``src/ui/src/components/visualizer/
node_data_provider_extension_service.ts``): an object with ``results`` (and no ``results.results``) is the data
of the graph being shown; each key of ``results`` is a node id (or an output tensor name the graph's
``outputsMetadata`` carries as ``tensor_name``, which the ONNX adapter does not set, so Parity keys by node id);
an explicit ``bgColor`` wins over thresholds and gradients. ``value`` is a number; where the error is not finite
it is the string ``"inf"`` (or ``"NaN"`` for a failing tensor with NaN values), and where none was measured (an
empty tensor, a metric without one) the verdict, ``"ok"`` or ``"FAIL"`` (the UI shows any value as text), never
a made-up number.

A model with a node named ``results`` gets the other form the UI reads, ``{"<graph id>": {"name": ..., "results":
...}}`` (``ModelNodeData``), since a ``results`` key inside ``results`` is how the UI tells the two apart.

Node ids are those of Model Explorer's ONNX adapter (PyPI ``model-explorer-onnx``, github.com/justinchuby/
model-explorer-onnx, ``src/model_explorer_onnx/main.py`` at commit 41c34ab): a node's id is its name after
onnx_ir's ``NameFixPass`` (``onnx_ir/passes/common/naming.py``): an unnamed node becomes ``node``, ``node_1``, ...
and a repeated name ``name_1``, ..., in the order of a depth-first walk (each node, then its subgraphs), with one
set of names per graph and one counter per preferred name for the whole model. A graph output's node is
``[value] <output name>``. :func:`adapter_node_ids` computes the ids of the main graph's nodes that way.
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from parity.api import onnx_models, write_text_atomic

FIRST = "#6a1b9a"  # the first divergent node
FAIL = "#d32f2f"
PASS_ABOVE_ATOL = "#ffb74d"  # passed, max abs above atol (within rtol)
PASS_NEAR = "#fff176"  # within atol, above atol/10
PASS_SMALL = "#81c784"  # within atol/10
PASS_TINY = "#c8e6c9"  # within atol/100
ZERO = "#e8f5e9"
FP32 = "#ef5350"  # debug precision: kept fp32
LOW = "#90caf9"  # debug precision: runs in the lower precision


def adapter_node_ids(model: Any) -> list[str]:
    """The id Model Explorer's ONNX adapter gives each node of the main graph, in file order (see the module
    docstring); ``model`` is an ``onnx.ModelProto`` or a path."""
    model = _load(model)
    counter: collections.Counter[str] = collections.Counter()
    ids: list[str] = []

    def unique(preferred: str, used: set[str]) -> str:
        name = preferred
        while name in used:
            counter[preferred] += 1
            name = f"{preferred}_{counter[preferred]}"
        used.add(name)
        return name

    def walk(graph: Any, top: bool) -> None:
        used: set[str] = set()
        for node in graph.node:
            if not node.name:
                name = unique("node", used)
            elif node.name in used:
                name = unique(node.name, used)
            else:
                name = node.name
                used.add(name)
            if top:
                ids.append(name)
            for attr in node.attribute:
                if attr.type == 5:  # AttributeProto.GRAPH
                    walk(attr.g, False)
                elif attr.type == 10:  # AttributeProto.GRAPHS
                    for sub in attr.graphs:
                        walk(sub, False)

    walk(model.graph, True)
    return ids


def _load(model: Any) -> Any:
    """The graph only: node data needs names, not weights (external data files are neither read nor looked
    for, so a model past 2 GiB, or one whose data is in another folder, costs its graph)."""
    if isinstance(model, (str, Path)):
        return onnx_models.load(model, load_external_data=False, ignore_external_data=True)
    return model


def _colour(passed: bool, max_abs: float | None, atol: float | None) -> str:
    if not passed:
        return FAIL
    if max_abs is None or math.isnan(max_abs):
        return PASS_SMALL
    if max_abs == 0:
        return ZERO
    if atol is None or math.isnan(atol) or atol <= 0:
        return PASS_SMALL
    if max_abs > atol:
        return PASS_ABOVE_ATOL
    if max_abs > atol / 10:
        return PASS_NEAR
    if max_abs > atol / 100:
        return PASS_SMALL
    return PASS_TINY


def error_node_data(model: Any, tensors: Iterable[Mapping[str, Any]], first: str | None = None, name: str = "parity: max abs error") -> dict[str, Any]:
    """Node data colouring each node by the error of its outputs: ``tensors`` are rows with ``name``,
    ``passed``, ``max_abs`` and optionally ``atol``, ``nan`` and ``inf`` (NaN values and infinite mismatches
    counted by the metric; :func:`parity_reports.html_report.tensor_detail` gives them). A tensor's value is its max abs
    error (the statistic ``--report`` calls ``max_abs``, over the finite errors), except that a failing tensor
    with NaN or infinite mismatches shows ``"NaN"`` or ``"inf"``, and one with no error measured its verdict.
    A node's value is the worst of its compared outputs'; its colour says first divergence (purple), failed
    (red) or, passing, how close to atol it came. Graph outputs' nodes (``[value] name``) get their tensor's."""
    proto = _load(model)
    ids = adapter_node_ids(proto)
    producer = {t: i for i, n in enumerate(proto.graph.node) for t in n.output if t}
    outputs = {o.name for o in proto.graph.output}
    per_node: dict[int, list[dict[str, Any]]] = {}
    results: dict[str, dict[str, Any]] = {}
    for row in tensors:
        entry = _entry(row, first)
        if row["name"] in outputs:
            results[f"[value] {row['name']}"] = entry["data"]
        i = producer.get(row["name"])
        if i is not None:
            per_node.setdefault(i, []).append(entry)
    for i, entries in sorted(per_node.items()):
        worst = max(entries, key=lambda e: e["rank"])
        colour = FIRST if any(e["first"] for e in entries) else FAIL if not all(e["passed"] for e in entries) else worst["data"]["bgColor"]
        results[ids[i]] = {"value": worst["data"]["value"], "bgColor": colour}
    return _graph_data(proto, {"name": name, "results": results})


def _entry(row: Mapping[str, Any], first: str | None) -> dict[str, Any]:
    """One tensor's value and colour, with its rank among a node's outputs (NaN > inf > larger > none)."""
    passed = bool(row.get("passed"))
    raw = row.get("max_abs")
    max_abs = None if raw is None or math.isnan(float(raw)) else float(raw)  # NaN: none measured (an empty tensor)
    atol = None if row.get("atol") is None else float(row["atol"])
    value: float | str
    if not passed and row.get("nan"):
        value, rank = "NaN", (3, 0.0)
    elif not passed and (row.get("inf") or (max_abs is not None and math.isinf(max_abs))):
        value, rank = "inf", (2, 0.0)
    elif max_abs is not None:
        value, rank = max_abs, (1, max_abs)
    else:
        value, rank = ("ok" if passed else "FAIL"), (0, 0.0 if passed else 1.0)
    colour = FIRST if row["name"] == first else _colour(passed, max_abs, atol)
    return {"data": {"value": value, "bgColor": colour}, "rank": rank, "passed": passed, "first": row["name"] == first}


def graph_id(model: Any) -> str:
    """The main graph's id in the ONNX adapter: the graph's name as the file has it (``""`` when unnamed; the
    adapter's ``<main>`` is for a graph whose name is None, which a file cannot hold)."""
    return _load(model).graph.name


def _graph_data(proto: Any, data: dict[str, Any]) -> dict[str, Any]:
    """One graph's node data as it stands (the UI shows it on the graph in view), unless a node is named
    ``results``: the UI takes an object whose ``results`` holds a ``results`` key for data keyed by graph id
    (``getNodeDataProviderData``), so then the data is written under the main graph's id."""
    return {graph_id(proto): data} if "results" in data["results"] else data


def fp32_node_data(model: Any, fp32_nodes: Sequence[str], candidates: Sequence[str], name: str = "parity: nodes kept fp32") -> dict[str, Any]:
    """``debug precision``'s answer as node data: value 1 (red) for each node that must stay fp32, 0 (blue) for
    each other candidate, which runs in the lower precision. Nodes are matched by name in ``model`` (the mixed
    model, which has every candidate; a candidate it lacks is left out)."""
    proto = _load(model)
    ids = adapter_node_ids(proto)
    by_name: dict[str, str] = {}
    for node, node_id in zip(proto.graph.node, ids):
        if node.name and node.name not in by_name:
            by_name[node.name] = node_id
    keep = set(fp32_nodes)
    results = {}
    for node in candidates:
        node_id = by_name.get(node)
        if node_id is not None:
            results[node_id] = {"value": 1 if node in keep else 0, "bgColor": FP32 if node in keep else LOW}
    return _graph_data(proto, {"name": name, "results": results})


def write_node_data(path: Any, data: Mapping[str, Any]) -> None:
    """Write node data atomically (strict JSON, as Model Explorer's ``to_json_string(indent=2)``)."""
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
