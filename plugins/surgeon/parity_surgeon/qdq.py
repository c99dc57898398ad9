"""Pair the tensors of a quantized (QDQ) model with those of its float original.

What onnxruntime's ``onnxruntime.quantization.qdq_loss_debug`` pairs, found the same way where the names
allow it and by graph position where they do not:

* **Dequantized activations** (a ``DequantizeLinear`` whose input comes from a ``QuantizeLinear``): the float
  model's tensor that the quantized tensor stands for. By name first, onnxruntime's quantizer's naming:
  ``X_DequantizeLinear_Output`` (or ``..._Output_1``) stands for ``X``, and a graph output ``Y`` keeps its
  name on the ``DequantizeLinear`` while the producer writes ``Y_QuantizeLinear_Input``
  (``create_activation_matching``). Otherwise by position: the float model's tensor that the matching node
  reads at the same input slot (the consumer's view: the quantizer may drop a ``Relu``/``Clip`` whose range
  the quantization clamps anyway), else the float counterpart of the tensor before quantization.
* **Outputs of the float ops inside the QDQ model** (a ``Conv`` between its ``DequantizeLinear`` inputs and
  its ``QuantizeLinear``): the same output of the matching node of the float model. Nodes match by name
  (same op type), else by position: same op type, reading the float counterparts of the same inputs (walking
  both graphs in topological order). Tensor names alone are not trusted here: the quantizer gives a
  removed ``Relu``'s output name to the node before it.
* **Weights** (a ``DequantizeLinear`` of an initializer): the float initializer, by name (``W_quantized`` ->
  ``W``) or by the slot the matching node reads it at; dequantized here with NumPy, as
  ``create_weight_matching`` does (per tensor, per channel along ``axis``, or in blocks).

Quantized ``QuantizeLinear`` outputs (integers) have no float counterpart and are never compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from parity.api import onnx_models

Q, DQ = "QuantizeLinear", "DequantizeLinear"
DQ_SUFFIXES = ("_DequantizeLinear_Output", "_DequantizeLinear_Output_1")
Q_INPUT_SUFFIX = "_QuantizeLinear_Input"
WEIGHT_SUFFIX = "_quantized"
REMOVABLE = {"Relu", "Clip"}  # activations onnxruntime's QDQ quantizer folds into the quantization range


@dataclass
class ActivationPair:
    tensor: str  # in the quantized model
    reference: str  # in the float model
    matched_by: str  # "name" or "position"
    kind: str  # "dequantized" (a DequantizeLinear output) or "float" (an output of a float op in the QDQ model)
    pre: str | None = None  # dequantized: the tensor that was quantized (for its own quantization's SQNR)


@dataclass
class WeightPair:
    tensor: str  # the quantized initializer
    dequantized: str  # the DequantizeLinear output
    reference: str  # the float initializer
    matched_by: str
    node: str  # the DequantizeLinear node


@dataclass
class Pairing:
    """actual tensor -> reference tensor. ``quantized`` False: the identity on the names both models have."""

    pairs: dict[str, str]
    quantized: bool = False
    activations: dict[str, ActivationPair] = field(default_factory=dict)
    weights: list[WeightPair] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)  # dequantized tensors with no float counterpart

    def counts(self) -> dict[str, int]:
        deq = [p for p in self.activations.values() if p.kind == "dequantized"]
        return {
            "dequantized": len(deq),
            "dequantized_by_name": sum(p.matched_by == "name" for p in deq),
            "dequantized_by_position": sum(p.matched_by == "position" for p in deq),
            "float_ops": sum(p.kind == "float" for p in self.activations.values()),
            "weights": len(self.weights),
            "unpaired": len(self.unpaired),
        }


def count_dq(model: Any) -> int:
    return sum(1 for n in model.graph.node if n.op_type == DQ)


def pair_models(actual: Any, reference: Any) -> Pairing:
    """Pair ``actual``'s computed tensors with ``reference``'s (both ``onnx.ModelProto``): the QDQ pairing when
    ``actual`` has ``DequantizeLinear`` nodes the reference lacks, else tensors of the same name."""
    ref_tensors = {t for n in reference.graph.node for t in n.output if t} | {i.name for i in reference.graph.input}
    if count_dq(actual) <= count_dq(reference):
        return Pairing({t: t for n in actual.graph.node for t in n.output if t and t in ref_tensors})
    return _QdqMatcher(actual, reference).run()


class _Graph:
    def __init__(self, model: Any) -> None:
        nodes = list(model.graph.node)
        self.nodes = [nodes[i] for i in onnx_models.topological_order(nodes)]
        self.inits = {i.name for i in model.graph.initializer}
        self.inputs = [i.name for i in model.graph.input if i.name not in self.inits]
        self.outputs = [o.name for o in model.graph.output]
        self.producer = {t: n for n in self.nodes for t in n.output if t}
        self.consumers: dict[str, list[tuple[Any, int]]] = {}
        for n in self.nodes:
            for i, t in enumerate(n.input):
                if t:
                    self.consumers.setdefault(t, []).append((n, i))
        self.constants = self.inits | {t for n in self.nodes if n.op_type == "Constant" for t in n.output}
        # computed from constants alone (a Reshape of a weight, a Cast of a Constant): no input reaches them
        self.folded = set(self.constants)
        for n in self.nodes:
            if all(not t or t in self.folded for t in n.input):
                self.folded.update(t for t in n.output if t)
        self.by_name = {n.name: n for n in self.nodes if n.name}


class _QdqMatcher:
    def __init__(self, actual: Any, reference: Any) -> None:
        self.a, self.f = _Graph(actual), _Graph(reference)
        self.f_tensors = {t for n in self.f.nodes for t in n.output if t} | set(self.f.inputs)
        self.f_rank = {id(n): i for i, n in enumerate(self.f.nodes)}
        self.node_map: dict[int, tuple[Any, str]] = {}  # id(actual node) -> (float node, how)
        self.taken: set[int] = set()  # ids of float nodes matched
        self.tmap: dict[str, str] = {}  # actual tensor (before any quantization) -> float tensor
        for i, name in enumerate(self.a.inputs):
            if name in self.f.inputs:
                self.tmap[name] = name
            elif len(self.a.inputs) == len(self.f.inputs):
                self.tmap[name] = self.f.inputs[i]

    # --- what a tensor of the QDQ model stands for ------------------------------------------------------
    def source(self, t: str) -> str:
        """Through DequantizeLinear(QuantizeLinear(x)) chains: the float-valued tensor ``t`` stands for."""
        seen = 0
        while seen < 16:
            dq = self.a.producer.get(t)
            if dq is None or dq.op_type != DQ:
                return t
            q = self.a.producer.get(dq.input[0])
            if q is None or q.op_type != Q:
                return t
            t = q.input[0]
            seen += 1
        return t

    def is_constant(self, t: str) -> bool:
        s = self.source(t)
        if s in self.a.folded:
            return True
        dq = self.a.producer.get(s)
        return dq is not None and dq.op_type == DQ and dq.input[0] in self.a.inits

    # --- nodes ------------------------------------------------------------------------------------------
    def _float_equivalent(self, g: str, want: str) -> bool:
        """Float tensor ``g`` read where the QDQ model reads the counterpart ``want``: the same, or ``want``
        through an activation the quantizer removed (``Relu(want)``)."""
        if g == want:
            return True
        p = self.f.producer.get(g)
        return p is not None and p.op_type in REMOVABLE and p.input and p.input[0] == want

    def match_node(self, node: Any) -> tuple[Any, str] | None:
        twin = self.f.by_name.get(node.name) if node.name else None
        if twin is not None and twin.op_type == node.op_type and id(twin) not in self.taken:
            return twin, "name"
        wanted = []
        for t in node.input:
            if not t or self.is_constant(t):
                wanted.append(None)
                continue
            mapped = self.tmap.get(self.source(t))
            if mapped is None:
                return None  # an input with no counterpart: its position cannot be told
            wanted.append(mapped)
        if all(w is None for w in wanted):
            return self._by_output_name(node)  # constants only: no input anchors its position
        anchor = next(w for w in wanted if w is not None)
        readers = [n for n, _ in self.f.consumers.get(anchor, [])]
        for r in list(readers):
            if r.op_type in REMOVABLE and r.input[0] == anchor and r.output:
                readers += [n for n, _ in self.f.consumers.get(r.output[0], [])]
        for cand in sorted({id(n): n for n in readers}.values(), key=lambda n: self.f_rank[id(n)]):
            if cand.op_type != node.op_type or id(cand) in self.taken or len(cand.input) != len(node.input):
                continue
            if all(w is None or self._float_equivalent(g, w) for g, w in zip(cand.input, wanted)):
                return cand, "position"
        return None

    def _by_output_name(self, node: Any) -> tuple[Any, str] | None:
        """A node computing a constant (a ``Constant``, a ``Reshape`` of one): the float node writing its
        first output's name, if it is of the same op type."""
        twin = self.f.producer.get(node.output[0]) if node.output else None
        if twin is not None and twin.op_type == node.op_type and id(twin) not in self.taken:
            return twin, "name"
        return None

    # --- the pairing --------------------------------------------------------------------------------------
    def run(self) -> Pairing:
        out = Pairing({}, quantized=True)
        for node in self.a.nodes:
            if node.op_type in (Q, DQ):
                continue
            hit = self.match_node(node)
            if hit is None:
                continue
            twin, how = hit
            self.node_map[id(node)] = hit
            self.taken.add(id(twin))
            for t, g in zip(node.output, twin.output):
                if t and g:
                    self.tmap[t] = g
                    out.activations[t] = ActivationPair(t, g, how, "float")
        for node in self.a.nodes:
            if node.op_type != DQ or not node.output or not node.output[0]:
                continue
            o = node.output[0]
            src = node.input[0]
            if src in self.a.inits:
                w = self._weight(node)
                if w is not None:
                    out.weights.append(w)
                continue
            q = self.a.producer.get(src)
            if q is None or q.op_type != Q:
                continue  # dequantizes a computed integer tensor: no float counterpart to look for
            pre = q.input[0]
            hit = self._dequantized(o, pre)
            if hit is None:
                out.unpaired.append(o)
                continue
            ref, how = hit
            out.activations[o] = ActivationPair(o, ref, how, "dequantized", pre)
        out.pairs = {t: p.reference for t, p in out.activations.items()}
        return out

    def _dequantized(self, o: str, pre: str) -> tuple[str, str] | None:
        for suffix in DQ_SUFFIXES:
            if o.endswith(suffix) and o[: -len(suffix)] in self.f_tensors:
                return o[: -len(suffix)], "name"
        if pre.endswith(Q_INPUT_SUFFIX) and o in self.f_tensors and o == pre[: -len(Q_INPUT_SUFFIX)]:
            return o, "name"
        for consumer, slot in self.a.consumers.get(o, []):
            hit = self.node_map.get(id(consumer))
            if hit is not None and slot < len(hit[0].input) and hit[0].input[slot] in self.f_tensors:
                return hit[0].input[slot], "position"
        if o in self.a.outputs and len(self.a.outputs) == len(self.f.outputs):
            g = self.f.outputs[self.a.outputs.index(o)]
            if g in self.f_tensors:
                return g, "position"
        mapped = self.tmap.get(self.source(pre))
        return (mapped, "position") if mapped is not None else None

    def _weight(self, dq: Any) -> WeightPair | None:
        name, o = dq.input[0], dq.output[0]
        if name.endswith(WEIGHT_SUFFIX) and name[: -len(WEIGHT_SUFFIX)] in self.f.constants:
            return WeightPair(name, o, name[: -len(WEIGHT_SUFFIX)], "name", dq.name or o)
        for consumer, slot in self.a.consumers.get(o, []):
            hit = self.node_map.get(id(consumer))
            if hit is not None and slot < len(hit[0].input) and hit[0].input[slot] in self.f.constants:
                return WeightPair(name, o, hit[0].input[slot], "position", dq.name or o)
        return None


# --- weights: dequantized with NumPy ---------------------------------------------------------------------


def dequantize(node: Any, values: Mapping[str, Any]) -> Any:
    """``DequantizeLinear`` of constant inputs (``values``: name -> array), per tensor, per axis or blocked."""
    import numpy as np

    attrs = {a.name: a for a in node.attribute}
    x = np.asarray(values[node.input[0]])
    scale = np.asarray(values[node.input[1]])
    zp = np.asarray(values[node.input[2]]) if len(node.input) > 2 and node.input[2] else np.zeros((), np.int32)
    wide = x.astype(np.int64) if x.dtype.kind in "iub" else x.astype(np.float32)
    zp = zp.astype(np.int64) if zp.dtype.kind in "iub" else zp.astype(np.float32)
    if scale.ndim == 0 or scale.size == 1 and x.ndim == 0:
        return ((wide - zp) * scale.reshape(())).astype(scale.dtype)
    axis = attrs["axis"].i if "axis" in attrs else 1
    axis = axis % max(x.ndim, 1)
    block = attrs["block_size"].i if "block_size" in attrs else 0
    if block:
        scale = np.repeat(scale, block, axis=axis).take(range(x.shape[axis]), axis=axis)
        zp = np.repeat(zp, block, axis=axis).take(range(x.shape[axis]), axis=axis) if zp.ndim else zp
    else:
        shape = [1] * x.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zp = zp.reshape(shape) if zp.ndim else zp
    return ((wide - zp) * scale).astype(scale.dtype)


def sqnr_db(signal: Any, other: Any) -> float | None:
    """onnxruntime's ``compute_signal_to_quantization_noice_ratio``: 20 log10(|signal| / |signal - other|),
    norms clamped below at float64's epsilon. None with NaN/Inf."""
    import numpy as np

    x = np.asarray(signal, dtype=np.float64).reshape(-1)
    y = np.asarray(other, dtype=np.float64).reshape(-1)
    if x.shape != y.shape:
        return None
    eps = float(np.finfo(np.float64).eps)
    with np.errstate(invalid="ignore", over="ignore"):
        num, den = float(np.linalg.norm(x)), float(np.linalg.norm(x - y))
    if not (math.isfinite(num) and math.isfinite(den)):
        return None
    return 20.0 * math.log10(max(num, eps) / max(den, eps))
