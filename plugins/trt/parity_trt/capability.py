"""``parity inspect capability``: which parts of an ONNX model TensorRT's ONNX parser supports.

Without ``--with-partitioning`` the model is parsed once and every parser error is listed (operator, node,
reason). With it, the parser's capability query (``supports_model_v2``, or ``supports_model`` before TensorRT
10.7) splits the nodes around the node it failed on; each part it could not vouch for is queried again on its own,
until every node is in a supported part or between two of them. Each supported part and each unsupported stretch
is written as an ONNX model (``supported_subgraph-nodes-A-B.onnx``, ``unsupported_subgraph-nodes-A-B.onnx``, A and
B the first and last node index) with ``results.txt``, the table printed at the end."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parity.api import ConvertRequest, ModelError, UsageError, echo, get_registry, onnx_external, onnx_models, write_text_atomic
from parity_trt import versions
from parity_trt._trt import get_logger, import_trt


@dataclass
class Failure:
    """One unsupported stretch of nodes ``[start, end)``, its first node's op type and the parser's reasons."""

    op: str
    reason: str
    ranges: list[tuple[int, int]] = field(default_factory=list)


def _parser() -> tuple[Any, tuple[Any, Any]]:
    """A parser and what it refers to (builder, network), which the caller keeps alive as long as the parser."""
    from parity_trt.network import create_network  # here: it loads the TensorRT loaders, which --help never needs

    builder, network = create_network()
    return import_trt().OnnxParser(network, get_logger()), (builder, network)


def errors(parser: Any) -> list[tuple[str, str, str]]:
    """``[(operator, node name, reason)]`` of every error the parser recorded."""
    rows = []
    for index in range(parser.num_errors):
        error = parser.get_error(index)
        rows.append((error.node_operator() or "-", error.node_name() or "-", " ".join(str(error).split())))
    return rows


def parse_errors(data: bytes, path: str | None) -> list[tuple[str, str, str]]:
    """The parser's errors for a whole model ([] when it parses)."""
    parser, _keep = _parser()
    ok = parser.parse(data, path) if path else parser.parse(data)
    return [] if ok else errors(parser) or [("-", "-", "the parser failed without naming a node")]


def query(data: bytes, path: str | None = None) -> tuple[bool, list[tuple[list[int], bool]], Any]:
    """The parser's capability query: ``(supported, [(node indices, known supported)], (parser, its network))``."""
    trt = import_trt()
    parser, keep = _parser()
    args = (data, path) if path else (data,)
    if versions.has(trt, "OnnxParser.supports_model_v2"):
        supported = parser.supports_model_v2(*args)
        runs = [(list(parser.get_subgraph_nodes(i)), bool(parser.is_subgraph_supported(i))) for i in range(parser.num_subgraphs)]
    elif versions.has(trt, "OnnxParser.supports_model"):
        supported, runs = parser.supports_model(*args)
        runs = [(list(nodes), bool(flag)) for nodes, flag in runs]
    else:
        raise versions.unavailable(trt, "OnnxParser.supports_model_v2", "inspect capability --with-partitioning")
    return bool(supported), runs, (parser, keep)


class Partitioner:
    """Splits ``model`` (a ModelProto, nodes in topological order) into supported parts and unsupported stretches."""

    def __init__(self, model: Any) -> None:
        import onnx  # here: the command's --help never needs it

        self.model = model
        self.nodes = list(model.graph.node)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False) if self.nodes else model
        graph = inferred.graph
        self.types = {v.name: v for v in [*graph.value_info, *graph.input, *graph.output]}
        self.initializers = {t.name: t for t in model.graph.initializer}
        self.graph_outputs = {o.name for o in model.graph.output}

    def extract(self, start: int, end: int) -> Any:
        """Nodes ``[start, end)`` as a model: inputs are the tensors they read that none of them writes, outputs
        those they write that a later node or the graph's outputs read (all they write, if none is)."""
        import onnx

        chosen = self.nodes[start:end]
        produced = [o for n in chosen for o in n.output if o]
        read = [i for n in chosen for i in n.input if i]
        outside = {i for k, n in enumerate(self.nodes) if not start <= k < end for i in n.input} | self.graph_outputs
        ins = [name for name in dict.fromkeys(read) if name not in set(produced) and name not in self.initializers]
        outs = [name for name in produced if name in outside] or [n for n in produced if n not in set(read)] or produced
        inits = [self.initializers[name] for name in dict.fromkeys(read) if name in self.initializers and name not in set(produced)]
        graph = onnx.helper.make_graph(chosen, f"nodes_{start}_{end - 1}", [self._info(n) for n in ins], [self._info(n) for n in outs], inits)
        graph.value_info.extend(self.types[n] for n in produced if n in self.types and n not in outs)
        sub = onnx.helper.make_model(graph, opset_imports=list(self.model.opset_import), ir_version=self.model.ir_version)
        sub.functions.extend(self.model.functions)
        return sub

    def _info(self, name: str) -> Any:
        import onnx

        info = self.types.get(name)
        if info is None or not info.type.tensor_type.elem_type:
            raise ModelError(f"tensor '{name}' has no known type, so the subgraph that reads it cannot be cut out (try --shape-inference)")
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(info)
        return copy

    def supported_parts(self, runs: Sequence[tuple[list[int], bool]], offset: int = 0, whole: int | None = None) -> list[list[int]]:
        """The supported parts among ``runs`` (indices relative to ``offset``), each unknown run queried alone."""
        parts: list[list[int]] = []
        for nodes, known in runs:
            absolute = [offset + i for i in nodes]
            if not absolute:
                continue
            if known:
                parts.append(absolute)
                continue
            if whole is not None and len(absolute) >= whole:
                continue  # the parser failed outside any node (an input, say): nothing here can be vouched for
            start, end = absolute[0], absolute[-1] + 1
            supported, inner, _ = query(self.extract(start, end).SerializeToString())
            if supported and all(flag for _, flag in inner):
                parts.append(list(range(start, end)))
            else:
                parts += self.supported_parts(inner, start, end - start)
        return parts

    def reasons(self, start: int, end: int) -> str:
        rows = parse_errors(self.extract(start, end).SerializeToString(), None)
        return " | ".join(reason for _op, _node, reason in rows) or "the parser gave no reason"


def gaps(parts: Sequence[Sequence[int]], count: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` stretches of ``range(count)`` that no part covers."""
    covered = sorted({i for part in parts for i in part})
    stretches, start = [], 0
    for index in [*covered, count]:
        if index > start:
            stretches.append((start, index))
        start = max(start, index + 1)
    return stretches


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: " | ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)])


def _write_model(model: Any, path: str, external: Any, validate: bool) -> None:
    onnx_external.save_model(model, path, external=external, what=os.path.basename(path), validate=validate, missing_kernels_ok=True)


def run(model_path: str, output: str, params: Mapping[str, Any], with_partitioning: bool) -> int:
    """The command: prints the verdict and the table, writes the models and results.txt under ``output``."""
    from parity.commands import external_data_from_params  # here: only this command writes models

    if params.get("ignore_external_data"):
        raise UsageError("--ignore-external-data: TensorRT's parser needs the weights to judge the model")
    if params.get("no_onnxruntime_shape_inference") and not params.get("shape_inference"):
        raise UsageError("--no-onnxruntime-shape-inference applies with --shape-inference")
    external = external_data_from_params(params)
    if os.path.exists(output) and not os.path.isdir(output):
        raise UsageError(f"-o {output}: not a folder")
    model = _load(model_path, params)
    data = model.SerializeToString()
    path = os.path.join(onnx_models.data_dir(model_path, params.get("external_data_dir")), os.path.basename(model_path))
    if not with_partitioning:
        rows = parse_errors(data, path)
        if not rows:
            echo("the graph is fully supported by TensorRT: nothing to report")
            return 0
        text = table(["Operator", "Node", "Reason"], rows)
        _results(output, text)
        return 0
    supported, runs, _ = query(data, path)
    if supported and all(flag for _, flag in runs):
        echo("the graph is fully supported by TensorRT: no subgraphs written")
        return 0
    parts = Partitioner(model)
    found = parts.supported_parts(runs, 0, len(parts.nodes))
    valid = _valid(model_path)
    os.makedirs(output, exist_ok=True)
    for part in found:
        _write_model(parts.extract(part[0], part[-1] + 1), os.path.join(output, f"supported_subgraph-nodes-{part[0]}-{part[-1]}.onnx"), external, valid)
    failures: dict[tuple[str, str], Failure] = {}
    for start, end in gaps(found, len(parts.nodes)):
        _write_model(parts.extract(start, end), os.path.join(output, f"unsupported_subgraph-nodes-{start}-{end - 1}.onnx"), external, valid)
        op, reason = parts.nodes[start].op_type, parts.reasons(start, end)
        failures.setdefault((op, reason), Failure(op, reason)).ranges.append((start, end))
    rows = [(f.op, str(len(f.ranges)), f.reason, ", ".join(f"{a}-{b - 1}" for a, b in f.ranges)) for f in failures.values()]
    echo(f"{len(found)} supported subgraph(s), {sum(len(f.ranges) for f in failures.values())} unsupported")
    _results(output, table(["Operator", "Count", "Reason", "Nodes"], rows))
    return 0


def _results(output: str, text: str) -> None:
    os.makedirs(output, exist_ok=True)
    echo(text)
    results = os.path.join(output, "results.txt")
    write_text_atomic(results, text + "\n")
    echo(f"wrote {results}")


def _valid(path: str) -> bool:
    """Whether the input passes the full ONNX checker: then every subgraph written must too. A model with op
    types no ONNX schema knows (custom ops, plugins) cannot, and neither can its parts: they are written as cut."""
    try:
        onnx_models.validate(path, "the model", missing_kernels_ok=True)
    except ModelError:
        echo(f"parity: note: {path} fails the ONNX checker, so its subgraphs are written without that check", err=True)
        return False
    return True


def _load(path: str, params: Mapping[str, Any]) -> Any:
    if params.get("fp_to_fp16"):
        with tempfile.TemporaryDirectory(prefix="parity-capability-") as tmp:
            model = onnx_models.load(fp16_copy(path, params.get("external_data_dir"), tmp))
    else:
        model = onnx_models.load(path, external_data_dir=params.get("external_data_dir"))
    if params.get("shape_inference"):
        model = _infer(model, onnxruntime=not params.get("no_onnxruntime_shape_inference"))
    return model


def fp16_copy(path: str, data_dir: str | None, folder: str) -> str:
    """``--fp-to-fp16``: the model converted to float16 (inputs and outputs kept float32) in ``folder``, by the ONNX
    converter another plugin registers (parity-surgeon's, as ``parity convert --fp-to-fp16``); its path."""
    converter = get_registry().converters.get("onnx")
    if converter is None:
        raise UsageError("--fp-to-fp16 needs the ONNX converter of parity-surgeon (pip install parity-surgeon)")
    out = os.path.join(folder, "fp16_" + os.path.basename(path))
    converter.convert(ConvertRequest(path, out, {"fp_to_fp16": True, "keep_io_types": True, "external_data_dir": data_dir}))
    return out


def _infer(model: Any, onnxruntime: bool) -> Any:
    import onnx

    if onnxruntime:
        try:
            return onnx_models.symbolic_shapes(model)  # the weights are in memory: nothing to find relative to a folder
        except Exception as exc:  # noqa: BLE001 - it fails in many unnamed ways; ONNX's inference is the fallback
            echo(f"parity: note: onnxruntime's shape inference failed ({type(exc).__name__}); used ONNX's", err=True)
    return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
