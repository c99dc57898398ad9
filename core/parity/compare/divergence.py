"""The first-divergence report: layerwise errors in topological order, and the first tensor out of tolerance.

When every tensor is marked as an output (the options backends declare in ``Backend.mark_options``:
``--onnx-outputs mark all``, ``--trt-outputs``, ``--mark-debug``), the comparison yields one check per
tensor. The report names the first divergent tensor's producing node, op type and inputs, and the command
that cuts the node out as a standalone model, when a plugin offers one (hook ``parity_divergence_hint``).

**The first divergence** (one definition, :func:`first_divergent`, used by ``parity run --onnx-outputs mark
all`` and both modes of ``parity debug localize``): among the compared tensors, the one earliest in the
model's topological order (:meth:`GraphInfo.from_onnx`: Kahn's algorithm over node dependencies, file order
among ready nodes) whose comparison fails, a tensor failing when any metric fails it. Every output of a
node counts, ``Constant`` nodes' outputs included; graph inputs and initializers are not compared. Every
tensor before it in the order was compared and passed (mark all, and localize, which verifies the prefix),
so in particular every input of its node did.

For anything that is not an ONNX model (engines) the order is the one the runner returned its outputs in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parity import onnx_models
from parity.compare.result import OutputCheck
from parity.from_options import mark_params, outputs_were_marked  # noqa: F401 - there a plain run finds them without importing this module
from parity.plugins import call_hook


@dataclass(frozen=True)
class Producer:
    node: str
    op_type: str
    inputs: tuple[str, ...]
    origin: str | None = None  # where the node came from, as a plugin reads its metadata (hook parity_node_origins)


@dataclass
class GraphInfo:
    """What the report needs from the model: tensor order, producers, which tensors are constants, and the
    graph's outputs."""

    order: list[str] = field(default_factory=list)
    producers: dict[str, Producer] = field(default_factory=dict)
    constants: set[str] = field(default_factory=set)
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def from_onnx(cls, model: Any) -> GraphInfo:
        """From an ``onnx.ModelProto`` or a path to one (its graph only: external data files are neither read
        nor looked for, so any model, past 2 GiB or with its data in another folder, costs its graph)."""
        if isinstance(model, (str, Path)):
            model = onnx_models.load(model, load_external_data=False, ignore_external_data=True)
        nodes = list(model.graph.node)
        order = onnx_models.topological_order(nodes)
        placed = set(order)
        order += [i for i in range(len(nodes)) if i not in placed]  # a cycle: keep going in file order
        info = cls(constants={init.name for init in model.graph.initializer}, outputs=[o.name for o in model.graph.output])
        origins = node_origins(nodes)
        for i in order:
            n = nodes[i]
            name = n.name or f"{n.op_type}_{i}"
            if n.op_type == "Constant":
                info.constants.update(n.output)
            for t in n.output:
                if t:
                    info.order.append(t)
                    info.producers[t] = Producer(name, n.op_type, tuple(n.input), origins.get(name))
        return info


def node_origins(nodes: Sequence[Any]) -> dict[str, str]:
    """``{node name: origin}`` from the plugins that recognise the nodes' ``metadata_props`` (hook
    ``parity_node_origins``; a node without a name is ``<op_type>_<index>``): empty, and no hook called, when no node
    carries metadata."""
    described = {n.name or f"{n.op_type}_{i}": {p.key: p.value for p in n.metadata_props} for i, n in enumerate(nodes) if len(n.metadata_props)}
    if not described:
        return {}
    found: dict[str, str] = {}
    for answer in call_hook("parity_node_origins", nodes=described):
        for name, origin in (answer or {}).items():
            if name in described and origin:
                found.setdefault(name, str(origin))
    return found


@dataclass
class TensorError:
    """One compared tensor: its position in the order, verdict, error, and producer."""

    name: str
    position: int
    passed: bool
    max_abs: float = math.nan
    max_rel: float = math.nan
    message: str = ""
    node: str | None = None
    op_type: str | None = None
    inputs: tuple[str, ...] = ()
    sqnr_db: float | None = None  # signal (reference) to error ratio, from the metric that measured it
    reference_name: str | None = None  # the reference's tensor it was compared with, when named otherwise
    origin: str | None = None  # where its node came from (hook parity_node_origins): "PyTorch module 'layer1.0' (Block)"


@dataclass
class DivergenceReport:
    actual: str
    reference: str
    iteration: int
    tensors: list[TensorError]
    model: str | None = None
    constants: set[str] = field(default_factory=set)
    sqnr: bool = False  # show the SQNR column (a quantized model against its float original)

    @property
    def first(self) -> TensorError | None:
        return first_divergent(self.tensors)

    @property
    def failing(self) -> int:
        return sum(1 for t in self.tensors if not t.passed)

    def outside_inputs(self) -> list[str]:
        """The first divergent node's inputs that are not weights or constants (once each, in order): what a
        model of that node alone takes as its inputs."""
        first = self.first
        return [t for t in dict.fromkeys(first.inputs) if t and t not in self.constants] if first else []

    def extract_command(self, output: str | None = None) -> str | None:
        """The command line that cuts the first divergent node out as a model of its own (written to
        ``output``), from the first plugin that offers one (hook ``parity_divergence_hint``); None when
        nothing diverged, the tensor has no producing node, or no plugin offers a line."""
        first = self.first
        if first is None or first.node is None or not self.model:
            return None
        hints = call_hook("parity_divergence_hint", report=self, output=output)
        return hints[0] if hints else None

    def lines(self, max_rows: int = 60) -> list[str]:
        first = self.first
        head = f"Layerwise comparison ({self.actual} vs {self.reference}, iteration {self.iteration}): {len(self.tensors)} tensors in topological order"
        if first is None:
            return [f"{head}: all within tolerance."]
        out = [head + f", {self.failing} out of tolerance."]
        rows = _window(self.tensors, self.tensors.index(first), max_rows)
        sqnr = f"  {'SQNR dB':>8}" if self.sqnr else ""
        out.append(f"  {'#':>5}  {'':6}  {'max abs':>10}  {'max rel':>10}{sqnr}  tensor <- node (op)")
        for row in rows:
            if row is None:
                out.append("  " + " " * 5 + "  ...")
                continue
            mark = ">>" if row is first else "  "
            verdict = "ok" if row.passed else "FAIL"
            where = f" <- {row.node} ({row.op_type})" if row.node else ""
            if row.reference_name:
                where += f" vs '{row.reference_name}'"
            sqnr = f"  {_db(row.sqnr_db):>8}" if self.sqnr else ""
            out.append(f"{mark}{row.position:>5}  {verdict:6}  {_g(row.max_abs):>10}  {_g(row.max_rel):>10}{sqnr}  {row.name}{where}")
        what = f"'{first.name}'"
        if first.node:
            what += f", produced by node '{first.node}' ({first.op_type}) from {list(first.inputs)}"
        if first.reference_name:
            what += f", compared with the reference's '{first.reference_name}'"
        if first.origin:
            what += f", origin: {first.origin}"
        out.append(f"First divergence: {what}" + (f": {first.message}" if first.message else ""))
        command = self.extract_command()
        if command:
            out.append(f"Extract it: {command}")
        return out

    def to_json(self) -> dict[str, Any]:
        first = self.first
        return {
            "actual": self.actual,
            "reference": self.reference,
            "iteration": self.iteration,
            "first": None if first is None else first.name,
            "extract_command": self.extract_command(),
            "tensors": [_finite({**asdict(t), "inputs": list(t.inputs)}) for t in self.tensors],
        }


def first_divergent(tensors: Iterable[TensorError]) -> TensorError | None:
    """THE first divergence: the failing tensor earliest in topological order (lowest ``position``; ties,
    i.e. tensors the graph does not know, in the order given). ``None`` when every tensor passed."""
    return min((t for t in tensors if not t.passed), key=lambda t: t.position, default=None)


def tensor_error(name: str, checks: Sequence[OutputCheck], position: int, producer: Producer | None = None, reference_name: str | None = None) -> TensorError:
    """One tensor's row from its checks (one per metric): it passes only if every metric passed it; the
    errors shown are those of the first check that measured ``max_abs`` (the SQNR: of the first that measured
    ``sqnr_db``). ``reference_name``: the reference's tensor compared with it, when named otherwise."""
    values: Mapping[str, float] = next((c.values for c in checks if "max_abs" in c.values), {})
    sqnr = next((c.values["sqnr_db"] for c in checks if "sqnr_db" in c.values), None)
    failed = [c for c in checks if not c.passed]
    return TensorError(
        name,
        position,
        not failed,
        float(values.get("max_abs", math.nan)),
        float(values.get("max_rel", math.nan)),
        failed[0].message if failed else "",
        producer.node if producer else None,
        producer.op_type if producer else None,
        producer.inputs if producer else (),
        None if sqnr is None or not math.isfinite(sqnr) else float(sqnr),
        reference_name if reference_name and reference_name != name else None,
        producer.origin if producer else None,
    )


def _db(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """NaN/Inf errors become null so the report is strict JSON."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}


def _g(value: float) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"


def _window(rows: list[TensorError], focus: int, limit: int) -> list[TensorError | None]:
    """All rows when few; else the start, the rows around ``focus`` and the end, with gaps as ``None``."""
    if len(rows) <= limit:
        return list(rows)
    keep = set(range(3)) | set(range(max(0, focus - limit // 2), min(len(rows), focus + limit // 4))) | set(range(len(rows) - 3, len(rows)))
    out: list[TensorError | None] = []
    for i in range(len(rows)):
        if i in keep:
            out.append(rows[i])
        elif out and out[-1] is not None:
            out.append(None)
    return out


def divergence_from_checks(
    checks: Sequence[OutputCheck],
    actual: str = "actual",
    reference: str = "reference",
    iteration: int = 0,
    model: str | None = None,
    graph: GraphInfo | None = None,
) -> DivergenceReport:
    """Group checks by tensor (a tensor passes only if every metric passed) and sort them topologically."""
    by_name: dict[str, list[OutputCheck]] = {}
    for check in checks:
        if check.metric == "missing":
            continue
        by_name.setdefault(check.name, []).append(check)
    graph = graph or GraphInfo()
    rank = {t: i for i, t in enumerate(graph.order)}
    returned = {t: i for i, t in enumerate(by_name)}  # tensors the graph does not know go last, as returned
    position = {t: rank.get(t, len(rank) + i) for t, i in returned.items()}
    names = sorted(returned, key=lambda t: (position[t], returned[t]))
    tensors = [tensor_error(name, by_name[name], position[name], graph.producers.get(name)) for name in names]
    return DivergenceReport(actual, reference, iteration, tensors, model, set(graph.constants))


def _graph_for(model: str | None) -> GraphInfo:
    if not model:
        return GraphInfo()
    try:
        return GraphInfo.from_onnx(model)
    except Exception:  # not an ONNX model (an engine): fall back to the order outputs came back in
        return GraphInfo()


def first_divergence(summary: Any, model: str | None = None) -> list[DivergenceReport]:
    """One report per compared pair, for its first failing iteration (or its first iteration if all pass)."""
    graph = _graph_for(model)
    reports = []
    for pair in summary.accuracy:
        if not pair.iterations:
            continue
        it = next((i for i in pair.iterations if not i.passed), pair.iterations[0])
        reports.append(divergence_from_checks(it.checks, pair.actual, pair.reference, it.iteration, model, graph))
    return reports
