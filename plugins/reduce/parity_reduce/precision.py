"""``parity debug precision`` for strongly typed engines (TensorRT 11 has no per-layer precision flags).

The precision of each node is written into the ONNX model itself: a node "in fp16" reads fp16 copies of
its float inputs (Cast) and its outputs are cast back to fp32 where an fp32 node or a graph output reads
them. Chained fp16 nodes pass fp16 tensors directly (fp16 -> fp32 -> fp16 is exact, so this is only
fewer casts, not different numbers). The search finds a small set of nodes that must stay fp32 for the
check to pass, with the same strategies as ``reduce`` (interesting = passes), so it can return any set
of nodes, not only a prefix or suffix as Polygraphy's did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

from parity.debug import DebugSession, PredicateCheck, Summary
from parity.errors import ExitCode, ParityError
from parity.util.fs import write_bytes_atomic
from parity_reduce.reducer import Search, load_model
from parity_reduce.strategies import DEFAULT_MODE, STRATEGIES

LOW = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
# Ops whose float inputs are not all "data" of one type T (scales, ROIs, dtypes in attributes), or that
# only move data: leave them as they are.
SKIP_OPS = {
    "Cast",
    "CastLike",
    "Shape",
    "Size",
    "Resize",
    "Upsample",
    "ConstantOfShape",
    "Constant",
    "Range",
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "NonMaxSuppression",
    "If",
    "Loop",
    "Scan",
    "Identity",
    "EyeLike",
    "Multinomial",
}


class AlwaysFails(ParityError):
    exit_code = ExitCode.MISMATCH


@dataclass
class PrecisionResult:
    model: onnx.ModelProto
    fp32_nodes: list[str]
    candidates: list[str]
    summary: Summary
    history: list = field(default_factory=list)

    @property
    def checks(self) -> int:
        return self.summary.total

    def save(self, path: str | Path) -> None:
        write_bytes_atomic(path, self.model.SerializeToString())


def tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {i.name: i.data_type for i in model.graph.initializer}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        if vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    return types


class MixedPrecision:
    """Builds the model with a chosen set of nodes kept in fp32 and the other candidates in ``low``."""

    def __init__(self, model: onnx.ModelProto, low: str = "float16") -> None:
        self.model = model
        self.low = LOW[low]
        self.types = tensor_types(model)
        self.candidates = [i for i, n in enumerate(model.graph.node) if self._castable(n)]

    def _castable(self, node: onnx.NodeProto) -> bool:
        if node.op_type in SKIP_OPS or node.domain not in ("", "ai.onnx"):
            return False
        floats = [t for t in [*node.input, *node.output] if t and self.types.get(t) == TensorProto.FLOAT]
        outs = [self.types.get(o) for o in node.output if o]
        return bool(floats) and all(t == TensorProto.FLOAT for t in outs if t in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE))

    def name(self, i: int) -> str:
        node = self.model.graph.node[i]
        return node.name or f"{node.op_type}_{i}"

    def build(self, keep_fp32: frozenset[int] | set[int]) -> onnx.ModelProto:
        low_nodes = set(self.candidates) - set(keep_fp32)
        graph = self.model.graph
        low_name: dict[str, str] = {}  # fp32 tensor -> its low-precision twin
        consumers_fp32 = set()  # tensors read in fp32 somewhere (fp32 node or graph output)
        for i, node in enumerate(graph.node):
            if i not in low_nodes:
                consumers_fp32.update(t for t in node.input if t)
        consumers_fp32.update(o.name for o in graph.output)
        nodes: list[onnx.NodeProto] = []
        for i, node in enumerate(graph.node):
            if i not in low_nodes:
                nodes.append(node)
                continue
            new = onnx.NodeProto()
            new.CopyFrom(node)
            for k, t in enumerate(node.input):
                if not t or self.types.get(t) != TensorProto.FLOAT:
                    continue
                if t not in low_name:
                    low_name[t] = f"{t}__low"
                    nodes.append(helper.make_node("Cast", [t], [low_name[t]], name=f"{t}__cast_low", to=self.low))
                new.input[k] = low_name[t]
            back = []
            for k, o in enumerate(node.output):
                if not o or self.types.get(o) != TensorProto.FLOAT:
                    continue
                low_name[o] = f"{o}__low"
                new.output[k] = low_name[o]
                if o in consumers_fp32:
                    back.append(helper.make_node("Cast", [low_name[o]], [o], name=f"{o}__cast_fp32", to=TensorProto.FLOAT))
            nodes.append(new)
            nodes.extend(back)
        out = onnx.ModelProto()
        out.CopyFrom(self.model)
        del out.graph.node[:]
        out.graph.node.extend(nodes)
        del out.graph.value_info[:]  # the types of retyped tensors changed
        return out


class PrecisionSearch:
    """Find a small set of nodes that must stay fp32 (Python API of ``parity debug precision``).

    :param predicate: ``f(candidate_model) -> bool``, True when the candidate *passes*; or pass ``session``
        (its check's verdict good means passing).
    """

    def __init__(
        self,
        model: str | Path | onnx.ModelProto,
        predicate: Callable[[onnx.ModelProto], bool] | None = None,
        *,
        session: DebugSession | None = None,
        mode: str = DEFAULT_MODE,
        low: str = "float16",
    ) -> None:
        from parity.errors import UsageError

        if (predicate is None) == (session is None):
            raise UsageError("give PrecisionSearch either a predicate or a DebugSession")
        if low not in LOW:
            raise UsageError(f"--precision: expected one of {', '.join(LOW)}, got '{low}'")
        self.mixed = MixedPrecision(load_model(model), low)
        # A Python predicate says "passes"; the session's verdict is "bad", so invert it there.
        self.session = session or DebugSession(PredicateCheck(lambda it: not predicate(it.payload)))  # type: ignore[misc]
        self.mode = mode

    def strategy(self) -> Any:
        if self.mode in STRATEGIES:
            return STRATEGIES[self.mode][0]({})
        from parity.plugins import get_registry

        return get_registry().strategy(self.mode).factory({})

    def run(self) -> PrecisionResult:
        strategy = self.strategy()
        cands = self.mixed.candidates
        # Items are positions in the candidate list; the subset is the set kept in fp32.
        search = Search(self.session, lambda s: self.mixed.build({cands[k] for k in s}), describe=lambda s: f"{len(s)} node(s) in fp32")
        oracle = search.oracle(False, empty=None)
        full = list(range(len(cands)))
        if not oracle(full):
            raise AlwaysFails("the check fails even with every node in fp32: precision is not the cause")
        keep = frozenset(strategy.minimize(full, oracle))
        best = oracle.best if oracle.best is not None and len(oracle.best) < len(keep) else keep
        summary = self.session.finish()
        nodes = sorted(cands[k] for k in best)
        return PrecisionResult(self.mixed.build(set(nodes)), [self.mixed.name(i) for i in nodes], [self.mixed.name(i) for i in cands], summary, search.history)
