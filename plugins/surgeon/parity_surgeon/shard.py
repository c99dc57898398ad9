"""``parity template shard-hints`` and ``parity multi-device shard``: context-parallel (CP) sharding of the attention
layers of an ONNX model for TensorRT's multi-device collectives.

``shard-hints`` finds the attention layers (MatMul -> Softmax -> MatMul, or with ``--attention-pattern 1`` the
scaled variant whose Q and K are each multiplied by a square root of a scale computed from Q's shape) and writes a
JSON hints file: the layers (by their Q tensor), the graph inputs and outputs they depend on (with the index of the
sequence dimension, and the rank), the collective settings. The file has the layout Polygraphy 0.53.6 reads and
writes (``polygraphy_class`` keys), so either tool reads the other's.

``shard`` then splits the sequence across ranks: each hinted input is ``reduce_scatter``-ed, each layer's K and V
are ``all_gather``-ed before it (native), or the layer becomes one ``Attention`` node (``--cp-type fused``), and the
hinted outputs are ``all_gather``-ed back. A collective acts on dimension 0: a tensor whose sequence index is not 0
is transposed around it. Collectives are ``DistCollective`` nodes, and the fused layer an ``Attention`` node, in
the ``trt`` domain (TensorRT's parser imports by op type; the domain lets the ONNX checker accept the model)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parity.api import UsageError

TRT_DOMAIN = "trt"
CLASS = "polygraphy_class"  # the class tag of Polygraphy's JSON objects
REDUCE_OPS = ("sum", "prod", "min", "max", "avg")
SEQ_NAMES = ("sequence_length", "seq_len")
DEFAULTS = {
    "parallelism": "CP", "root": -1, "gpus": 0, "groups": (), "cp_type": "native", "no_suggest_io": False, "i_idx": 0, "o_idx": 0,
    "k_idx": 0, "v_idx": 0, "i_rank": None, "o_rank": None, "kv_rank": None, "reduce_op": "max", "attention_pattern": 0,
    "q_shuffle": None, "k_shuffle": None, "v_shuffle": None, "is_causal": False, "nb_rank": 1,
}  # fmt: skip


@dataclass
class Hints:
    """What to shard (the JSON hints file, as dicts)."""

    parallelism: str
    attention_layers: list[dict[str, Any]]
    dist_collectives: dict[str, Any]
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    k_seq_len_idx: int = 0
    v_seq_len_idx: int = 0
    kv_rank: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        tag = lambda obj, name: {**obj, CLASS: name}  # noqa: E731
        layers = [tag({**layer, "replace": tag(layer["replace"], "FusedAttention") if layer.get("replace") else None}, "AttentionLayerHint")
                  for layer in self.attention_layers]  # fmt: skip
        doc = {
            "parallelism": self.parallelism, "attention_layers": layers, "dist_collectives": tag(self.dist_collectives, "DistCollective"),
            "inputs": [tag(t, "ShardTensor") for t in self.inputs], "outputs": [tag(t, "ShardTensor") for t in self.outputs],
            "k_seq_len_idx": self.k_seq_len_idx, "v_seq_len_idx": self.v_seq_len_idx, "kv_rank": self.kv_rank,
        }  # fmt: skip
        return json.dumps(tag(doc, "ShardHints"), indent=4) + "\n"

    @classmethod
    def load(cls, path: str) -> Hints:
        try:
            with open(path, encoding="utf-8") as handle:
                doc = json.load(handle, object_hook=lambda d: {k: v for k, v in d.items() if k != CLASS})
            hints = cls(doc["parallelism"], list(doc["attention_layers"]), dict(doc["dist_collectives"]), list(doc["inputs"]),
                        list(doc["outputs"]), doc.get("k_seq_len_idx", 0), doc.get("v_seq_len_idx", 0), doc.get("kv_rank"))  # fmt: skip
        except OSError as exc:
            raise UsageError(f"--hint: cannot read {path}: {exc.strerror or exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--hint: {path} is not a shard hints file ({type(exc).__name__}: {exc})") from None
        if any(not isinstance(layer, dict) or "q" not in layer for layer in hints.attention_layers):
            raise UsageError(f"--hint: {path}: each attention layer needs its 'q' tensor")
        return hints


def settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """The hint flags with Polygraphy's defaults where not given; refuses what cannot apply."""
    got = {k: (params.get(k) if params.get(k) not in (None, ()) else v) for k, v in DEFAULTS.items()}
    got["no_suggest_io"] = bool(params.get("no_suggest_io"))
    got["is_causal"] = bool(params.get("is_causal"))
    if got["parallelism"] == "TP":
        raise UsageError("--parallelism TP: Parity shards context-parallel (CP) only; tensor-parallel weight splitting is not implemented")
    return got


# --- finding attention layers -------------------------------------------------------------------------


def attention_pattern(kind: int) -> Any:
    """The onnx-graphsurgeon pattern of an attention layer: 0 plain, 1 the scaled variant (see the module)."""
    import onnx_graphsurgeon as gs  # here: the commands' --help never needs it

    from parity_surgeon.onnx_load import quiet_graphsurgeon

    quiet_graphsurgeon()
    p = gs.GraphPattern()
    q, k, v = p.variable(), p.variable(), p.variable()
    if kind == 1:
        starts, ends, numerator = p.variable(), p.variable(), p.variable()
        dims = p.add("shape", "Shape", inputs=[q])
        depth = p.add("slice", "Slice", inputs=[dims, starts, ends])
        root = p.add("cast_2", "Cast", inputs=[p.add("sqrt_1", "Sqrt", inputs=[p.add("cast_1", "Cast", inputs=[depth])])])
        scale = p.add("cast_3", "Cast", inputs=[p.add("div", "Div", inputs=[numerator, root])])
        q = p.add("mul_1", "Mul", inputs=[q, p.add("sqrt_2", "Sqrt", inputs=[scale])])
        k = p.add("mul_2", "Mul", inputs=[k, p.add("sqrt_3", "Sqrt", inputs=[scale])])
    scores = p.add("Softmax", "Softmax", inputs=[p.add("MatMul1", "MatMul", inputs=[q, k])])
    p.set_output_tensors([p.add("MatMul2", "MatMul", inputs=[scores, v])])
    return p


def _node(match: Any, name: str) -> Any:
    """The graph node a pattern node matched (graphsurgeon releases differ: a mapping with onnx_node, or the node)."""
    found = match[name]
    return getattr(found, "onnx_node", found)


def _qkv(match: Any) -> tuple[Any, Any, Any]:
    return match.inputs[0], match.inputs[1], match.inputs[2]


def _seq_index(tensor: Any, default: int) -> int:
    for index, dim in enumerate(tensor.shape or ()):
        if dim in SEQ_NAMES:
            return index
    return default


def _rank(tensor: Any, default: int | None) -> int | None:
    return len(tensor.shape) if tensor.shape else default


def _dependents(graph: Any, node: Any, backwards: bool, taken: set[str]) -> list[Any]:
    """Graph inputs ``node`` depends on (``backwards``), or graph outputs that depend on it; each once over all calls."""
    ends = {t.name: t for t in (graph.inputs if backwards else graph.outputs)}
    found, seen, todo = [], set(), [node]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for tensor in current.inputs if backwards else current.outputs:
            if tensor.name in ends and tensor.name not in taken:
                taken.add(tensor.name)
                found.append(ends[tensor.name])
            todo.extend(tensor.inputs if backwards else tensor.outputs)
    return found


def build_hints(graph: Any, opts: Mapping[str, Any]) -> Hints:
    """Hints for every attention layer of ``graph`` (``opts``: :func:`settings`)."""
    layers, inputs, outputs = [], [], []
    taken_in: set[str] = set()
    taken_out: set[str] = set()
    kv_rank = None
    fused = opts["cp_type"] == "fused"
    replace = {"is_causal": opts["is_causal"], "q_shuffle": _ints(opts["q_shuffle"]), "k_shuffle": _ints(opts["k_shuffle"]),
               "v_shuffle": _ints(opts["v_shuffle"]), "nb_rank": opts["nb_rank"]} if fused else None  # fmt: skip
    for match in attention_pattern(opts["attention_pattern"]).match_all(graph):
        q, k, v = _qkv(match)
        kv_rank = kv_rank or _rank(k if k.shape else v, None)
        if not opts["no_suggest_io"]:
            last = _node(match, "MatMul2")
            inputs += _dependents(graph, last, True, taken_in)
            outputs += _dependents(graph, last, False, taken_out)
        layers.append({"q": q.name, "gather_kv": not fused, "gather_q": False, "replace": replace})
    shard = lambda tensors, idx, rank: [{"name": t.name, "seq_len_idx": _seq_index(t, idx), "rank": _rank(t, rank)} for t in tensors]  # noqa: E731
    collectives = {"group_size": opts["gpus"], "root": opts["root"], "nb_rank": opts["nb_rank"], "reduce_op": opts["reduce_op"],
                   "groups": [int(g) for g in opts["groups"]]}  # fmt: skip
    return Hints(opts["parallelism"], layers, collectives, shard(inputs, opts["i_idx"], opts["i_rank"]), shard(outputs, opts["o_idx"], opts["o_rank"]),
                 opts["k_idx"], opts["v_idx"], kv_rank or opts["kv_rank"])  # fmt: skip


def _ints(values: Sequence[Any] | None) -> list[int] | None:
    return [int(v) for v in values] if values else None


# --- sharding -----------------------------------------------------------------------------------------


class Sharder:
    """Inserts the collectives of ``hints`` into ``graph`` (an onnx-graphsurgeon graph), context-parallel."""

    def __init__(self, graph: Any, hints: Hints) -> None:
        self.graph, self.hints = graph, hints
        self.counter = itertools.count()
        self.taken = {n.name for n in graph.nodes} | set(graph.tensors())
        self.common = {k: hints.dist_collectives.get(k) for k in ("group_size", "root", "nb_rank")}
        self.groups = [int(g) for g in hints.dist_collectives.get("groups") or []]

    def name(self, stem: str) -> str:
        while True:
            candidate = f"{stem}_{next(self.counter)}"
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate

    def _after(self, tensor: Any, op: str, attrs: dict[str, Any], domain: str = "") -> Any:
        """A node ``op`` reading ``tensor``; everything that read ``tensor`` (the graph's outputs too) reads its output."""
        import onnx_graphsurgeon as gs  # here: see attention_pattern

        readers = list(tensor.outputs)
        out = gs.Variable(self.name(f"{tensor.name}_{op.lower()}"), dtype=tensor.dtype)
        node = gs.Node(op, self.name(op.lower()), attrs=attrs, inputs=[tensor], outputs=[out], domain=domain or None)
        for reader in readers:
            for index, read in enumerate(list(reader.inputs)):  # graphsurgeon's input lists take items, not slices
                if read is tensor:
                    reader.inputs[index] = out
        self.graph.outputs = [out if t is tensor else t for t in self.graph.outputs]
        self.graph.nodes.append(node)
        return out

    def collective(self, tensor: Any, operation: str, seq_index: int | None = 0, rank: int | None = None) -> Any:
        """``operation`` on dimension 0; a sequence index elsewhere is swapped to 0 and back around it."""
        reduce = {"all_gather": "none", "all_reduce": "sum"}.get(operation, self.hints.dist_collectives.get("reduce_op") or "max")
        attrs = {**self.common, "reduce_op": reduce, "collective_operation": operation}
        whole = tensor.shape if operation == "all_gather" else None  # a gather gives back the full tensor's shape
        if not seq_index:
            out = self._after(tensor, "DistCollective", attrs, TRT_DOMAIN)
            out.shape = whole
            return out
        rank = rank or _rank(tensor, None)
        if rank is None or seq_index >= rank:
            raise UsageError(f"tensor '{tensor.name}': sequence index {seq_index} needs its rank (give it in the hints, or run --shape-inference)"
                             if rank is None else f"tensor '{tensor.name}': sequence index {seq_index} is beyond its rank {rank}")  # fmt: skip
        perm = list(range(rank))
        perm[0], perm[seq_index] = seq_index, 0
        swapped = self._after(tensor, "Transpose", {"perm": perm})
        gathered = self._after(swapped, "DistCollective", attrs, TRT_DOMAIN)
        out = self._after(gathered, "Transpose", {"perm": perm})
        out.shape = whole
        return out

    def shard(self, pattern: int) -> dict[str, int]:
        tensors = self.graph.tensors()
        renamed: dict[str, str] = {}
        scattered = gathered = 0
        for item in self.hints.inputs:
            tensor = self._tensor(tensors, item["name"], "input")
            renamed[tensor.name] = self.collective(tensor, "reduce_scatter", item.get("seq_len_idx"), item.get("rank")).name
            scattered += 1
        by_q = {layer["q"]: layer for layer in self.hints.attention_layers}
        by_q.update({renamed[q]: layer for q, layer in list(by_q.items()) if q in renamed})
        whole = any(layer.get("gather_q") for layer in self.hints.attention_layers)
        fused = 0
        for match in list(attention_pattern(pattern).match_all(self.graph)):
            q, k, v = _qkv(match)
            layer = by_q.get(q.name)
            if layer is None:
                continue
            if layer.get("replace"):
                self._fuse(match, layer["replace"])
                fused += 1
                continue
            done: set[str] = set()
            for tensor, wanted, index in ((q, layer.get("gather_q"), None), (k, layer.get("gather_kv"), self.hints.k_seq_len_idx),
                                          (v, layer.get("gather_kv"), self.hints.v_seq_len_idx)):  # fmt: skip
                if wanted and tensor.name not in done:
                    self.collective(tensor, "all_gather", index, None if index is None else self.hints.kv_rank)
                    done.add(tensor.name)
                    gathered += 1
            whole |= bool(layer.get("gather_kv")) and (q is k or q is v)  # Q itself was gathered: outputs are whole
        if not whole:
            for item in self.hints.outputs:
                self.collective(self._tensor(self.graph.tensors(), item["name"], "output"), "all_gather", item.get("seq_len_idx"), item.get("rank"))
                gathered += 1
        self.graph.cleanup().toposort()
        return {"reduce_scatter": scattered, "all_gather": gathered, "fused": fused}

    def _tensor(self, tensors: Mapping[str, Any], name: str, what: str) -> Any:
        if name not in tensors:
            raise UsageError(f"--hint: the model has no {what} tensor '{name}'")
        return tensors[name]

    def _fuse(self, match: Any, replace: Mapping[str, Any]) -> None:
        """The layer's nodes become one Attention node reading Q, K, V (each transposed first if asked)."""
        import onnx_graphsurgeon as gs  # here: see attention_pattern

        q, k, v = _qkv(match)
        (out,) = match.outputs
        out.inputs.clear()  # the layer's last MatMul no longer writes it; cleanup drops the orphaned nodes
        feeds = []
        for tensor, shuffle in ((q, replace.get("q_shuffle")), (k, replace.get("k_shuffle")), (v, replace.get("v_shuffle"))):
            if shuffle:
                shuffled = gs.Variable(self.name(f"{tensor.name}_transpose"), dtype=tensor.dtype)
                self.graph.nodes.append(gs.Node("Transpose", self.name("transpose"), {"perm": list(shuffle)}, [tensor], [shuffled]))
                tensor = shuffled
            feeds.append(tensor)
        attrs = {"is_causal": int(bool(replace.get("is_causal"))), "scale": 1.0, "TRT_decomposable": 0, "nb_rank": int(replace.get("nb_rank") or 1)}
        self.graph.nodes.append(gs.Node("Attention", self.name("attention"), attrs, feeds, [out], domain=TRT_DOMAIN))


def export(graph: Any, groups: Sequence[int], template: Any) -> Any:
    """The sharded model: the ``groups`` attribute on each collective (an INTS even when empty, which
    graphsurgeon cannot type), the ``trt`` domain declared."""
    import onnx  # here: see attention_pattern
    import onnx_graphsurgeon as gs

    model = gs.export_onnx(graph)
    model.ir_version = template.ir_version
    for node in model.graph.node:
        if node.op_type == "DistCollective":
            node.attribute.append(onnx.helper.make_attribute("groups", list(groups), attr_type=onnx.AttributeProto.INTS))
    if any(n.domain == TRT_DOMAIN for n in model.graph.node) and not any(o.domain == TRT_DOMAIN for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(TRT_DOMAIN, 1))
    return model


def unique_names(graph: Any) -> list[str]:
    """Renames nodes whose name another node has (hints and matching go by node); returns the notes."""
    seen: set[str] = set()
    notes = []
    for index, node in enumerate(graph.nodes):
        if not node.name or node.name in seen:
            old, node.name = node.name, f"{node.name or node.op.lower()}_{index}"
            notes.append(f"node '{old}' ({node.op}) renamed to '{node.name}': node names must be unique")
        seen.add(node.name)
    return notes
