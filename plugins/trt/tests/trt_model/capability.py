"""The ONNX parser's capability queries, modelled: ``supports_model`` (10.x until 11), ``supports_model_v2``,
``num_subgraphs``, ``is_subgraph_supported``, ``get_subgraph_nodes`` (pyOnnx.cpp@v11.0: supports_model_v2 (L185),
num_subgraphs, is_subgraph_supported, get_subgraph_nodes (L187-189)).

Semantics follow onnx-tensorrt's ModelImporter (supportsModel/supportsModelV2 parse the model, then
``reportSubgraphs``): the nodes, in topological order, are split into runs around the node of the last parser error
(the node the parse failed on); every run is "unknown" (False) except when the model parsed without an error into
one run, which is supported (True). A caller that wants the supported runs re-queries each unknown run on its own,
as Polygraphy's ``inspect capability --with-partitioning`` does. The model keeps the nodes in file order (the
models tests use are sorted) and its parser reports every unsupported node (see network.OnnxParser._read): the
last of them is the one the runs are split around, as in reportSubgraphs. Indices out of range raise
``IndexError``, as ONNXTRT_CHECK's kINVALID_VALUE error reaches Python."""

from __future__ import annotations

from typing import Any


def _partition(parser: Any, model: Any, path: str | None) -> tuple[bool, list[tuple[list[int], bool]]]:
    import onnx

    parser.clear_errors()
    supported = parser.parse(model, path) if path else parser.parse(model)
    try:
        count = len(onnx.load_from_string(memoryview(model).tobytes()).graph.node)
    except Exception:  # noqa: BLE001 - an unreadable model has no nodes to report (parse recorded why)
        count = 0
    nodes = [parser.get_error(i).node() for i in range(parser.num_errors)]
    failed = next((n for n in reversed(nodes) if n != -1), -1)
    runs: list[tuple[list[int], bool]] = []
    fresh = True
    for index in range(count):
        if index == failed:
            fresh = True
            continue
        if fresh:
            runs.append(([], False))
            fresh = False
        runs[-1][0].append(index)
    if supported and len(runs) == 1:
        runs[0] = (runs[0][0], True)
    return supported, runs


def supports_model(self: Any, model: Any, path: str | None = None) -> tuple[bool, list[tuple[list[int], bool]]]:
    return _partition(self, model, path)


def supports_model_v2(self: Any, model: Any, path: str | None = None) -> bool:
    supported, self._subgraphs = _partition(self, model, path)
    return supported


def _subgraph(self: Any, index: int) -> tuple[list[int], bool]:
    runs = getattr(self, "_subgraphs", [])
    if not 0 <= int(index) < len(runs):
        raise IndexError(f"Query index {index} exceeds subgraph support vector (size = {len(runs)}). Have you called supports_model_v2 or parse?")
    return runs[int(index)]


def is_subgraph_supported(self: Any, index: int) -> bool:
    return _subgraph(self, index)[1]


def get_subgraph_nodes(self: Any, index: int) -> list[int]:
    return list(_subgraph(self, index)[0])


PARSER_MEMBERS = {
    "supports_model": supports_model,
    "supports_model_v2": supports_model_v2,
    "num_subgraphs": property(lambda self: len(getattr(self, "_subgraphs", []))),  # 0 before supports_model_v2
    "is_subgraph_supported": is_subgraph_supported,
    "get_subgraph_nodes": get_subgraph_nodes,
}
