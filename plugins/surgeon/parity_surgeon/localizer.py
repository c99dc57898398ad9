"""``parity debug localize``: find the first node whose output diverges between two runners, in bounded memory.

Both search modes answer the one question ``parity run --onnx-outputs mark all`` answers, with the same
function (:func:`parity.compare.divergence.first_divergent`): the first tensor in the model's topological
order (Kahn's algorithm) whose comparison fails, every node output (``Constant`` nodes' included) counting.

* ``batches`` (default): mark consecutive tensors as outputs in batches sized so that both runners' marked
  outputs fit the memory budget, compare, and stop after the batch holding the first failing tensor. Every
  tensor before it was compared and passed.
* ``bisect``: mark one tensor at a time and binary-search the order for the pass/fail boundary (about
  log2(N) pairs of runs), assuming that once a tensor fails every later model output fails too. The answer
  is then verified: the tensors before the boundary are compared in budgeted batches, as in ``batches``.
  Where the assumption does not hold (an error that appears and then disappears: a failing tensor before
  the boundary, or failing tensors while the model outputs pass), the verified scan gives the answer.

Memory: segmented execution. Each side's model runs as a chain of segments in topological order, one per
batch: a segment is the nodes computing its batch's tensors that earlier segments of that side did not run,
cut from the model's graph with its weights left in their files (a graph-only model in a private temporary
folder plus the folder of the weights: onnxruntime reads only that segment's weights, never a message holding
them all). It is fed the model's inputs and the boundary tensors it reads: values earlier segments of the same
side computed and kept (marked as their outputs; held in memory, as copies) because a node not run yet reads
them. Nodes computing from weights alone (a ``Constant``, a ``Cast`` of a weight) run again in each segment
that reads them, so their values stay constants there. The runners run one after the other, each session
released before the next loads. The budget (:class:`_Cost`) counts, per segment: its weights (the larger
side's; external data x1, weights inside the model x3, 16-bit float ones +2 for the float32 copy a CPU backend
makes), and on every side the boundary tensors held on entry, the marked tensors and the new boundary tensors
it returns. So a model of any size, past 2 GiB included, is searched within a budget below its size; a node
whose weights alone do not fit is still checked, in a batch of its own, with a note. Boundaries hold each
side's own values (an fp16 model's stay fp16), so the search compares what the whole model computes; a backend
that computes fp16 nodes at higher precision and, in one run, passes unrounded values from node to node
(onnxruntime on CPU) gives errors that differ at fp16's rounding after a boundary. ``--mode bisect``'s
one-tensor probes run from the model's inputs (the part each probed tensor needs); its verification scan and
``--validate`` run segments. The isolation of the suspect takes the reference's values of its node from the
failing segment; ``isolate='all'`` runs the reference from the model's inputs for the other nodes.

Then it separates error a node *introduces* from error it only *propagates*: the suspect node (or every
node, on request) is cut out as a one-node model, run on the first runner's backend with the reference
runner's values of its inputs, and compared with the reference's value of its output.

Runners come from the registry, so any backend pair works; each side may run its own model
(``reference_model``, e.g. the fp32 model against its fp16 conversion, matched by tensor name; a quantized
QDQ model against its float original, matched as onnxruntime's ``qdq_loss_debug`` does, by the quantizer's
names or by graph position: :mod:`parity_surgeon.qdq`, with the SQNR of every pair).

With ``validate`` and one runner (no reference), the same batches (or bisection) look for the first tensor
holding NaN or Inf instead (:func:`parity.api.first_nonfinite`, what ``parity run --onnx-outputs mark all
--validate`` reports), and summarize its node's inputs.
"""

from __future__ import annotations

import gc
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parity_onnxrt.api import release_freed_memory

from parity.api import (
    DivergenceReport,
    FiniteRow,
    GraphInfo,
    NonFiniteReport,
    RunnerRequest,
    TensorError,
    UsageError,
    check_model_path,
    constant_values,
    describe_first,
    did_you_mean,
    finite_row,
    first_divergent,
    first_nonfinite,
    frozen_heap,
    get_registry,
    is_scanned,
    onnx_external,
    onnx_models,
    parse_size,
    tensor_error,
)
from parity_surgeon import graph as g
from parity_surgeon.extractor import extract_node
from parity_surgeon.qdq import DQ, Pairing, Q, dequantize, pair_models, sqnr_db

DEFAULT_BUDGET_CAP = 2 << 30  # bytes
RUNTIME_OVERHEAD = 200 << 20  # interpreter, onnxruntime and numpy themselves
# what a check's session holds per weight byte it needs: weights in external data files are read once by the
# session (a memory map); weights inside the model are also in the cut model's message and its bytes
EXTERNAL_WEIGHT_FACTOR = 1
INLINE_WEIGHT_FACTOR = 3
# a 16-bit float weight that a computing op reads also has a float32 copy (twice its bytes): onnxruntime's CPU
# kernels compute most fp16 ops in float32 and fold the Cast it inserts (measured: 2.9x the fp16 weights of a
# decoder's segment); ops that only move data keep the dtype
HALF_WEIGHT_EXTRA = 2
HALF_TYPES = frozenset({10, 16})  # TensorProto.FLOAT16, BFLOAT16
MOVE_OPS = frozenset({"Gather", "GatherElements", "GatherND", "Reshape", "Transpose", "Concat", "Slice", "Split", "Squeeze", "Unsqueeze"})
MOVE_OPS |= {"Identity", "Expand", "Flatten", "Tile", "Shape", "Size"}
# a tensor whose segment alone does not fit the budget is checked anyway, in a batch of its own that
# takes the next tensors while its cost stays within this fraction above the first one's (few runs, each near
# the least memory its tensors can be checked in)
OVER_BUDGET_GROWTH = 0.25
# nodes whose value differs between runs: never run again in a later segment
RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"})


BUDGET_ERROR = "{option}: cannot read '{text}'; write a size such as 512M, 2G or 1.5GiB"


def default_budget() -> int:
    """A quarter of the memory available now, at most 2 GiB."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return min(DEFAULT_BUDGET_CAP, int(line.split()[1]) * 1024 // 4)
    except OSError:
        pass
    return DEFAULT_BUDGET_CAP // 2


def _mib(n: float) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


@dataclass
class RunnerSpec:
    """One side of the comparison: a registered backend, its parsed options, and the model it runs."""

    backend: str = "onnxrt"
    options: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None  # default: the model being localized


@dataclass
class NodeVerdict:
    """A node run alone on the first runner with the reference's inputs."""

    node: str
    op_type: str
    tensor: str
    full: TensorError | None  # error at this tensor in the full run
    own: TensorError | None  # error of the node alone, fed the reference's inputs
    overflowed: tuple[str, ...] = ()  # inputs whose reference values do not fit the node's input dtype
    rounded: tuple[str, ...] = ()  # inputs whose reference values were rounded to the node's dtype; then the
    # reference's output is recomputed from the rounded values too, so both sides see exactly the same inputs
    thresholds: dict[str, Any] = field(default_factory=dict)  # what ``own`` was judged against (atol, rtol, stat)

    @property
    def verdict(self) -> str:
        if self.own is None:
            return "not isolated"
        if self.overflowed and not self.own.passed:
            return "input overflow"
        if not self.own.passed:
            return "introduces"
        if self.full is not None and not self.full.passed:
            return "propagates"
        return "ok"


@dataclass
class QuantRow:
    """A quantized model's tensor against its float counterpart."""

    tensor: str
    reference: str
    matched_by: str  # name | position
    kind: str  # dequantized | float (an op's output inside the QDQ model) | weight
    passed: bool
    sqnr_db: float | None
    cosine: float | None
    max_abs: float | None
    own_sqnr_db: float | None = None  # dequantized: against its own value before quantization (qdq_err)


@dataclass
class QuantizationReport:
    """What the QDQ pairing found and the SQNR of every compared pair (lowest first in :meth:`lines`)."""

    counts: dict[str, int]
    activations: list[QuantRow]  # compared, in topological order
    weights: list[QuantRow]
    unpaired: list[str]
    paired: int  # activation pairs the search could compare (it stops early unless --all-tensors)

    def lines(self, shown: int = 5) -> list[str]:
        c = self.counts
        out = [
            f"Quantized model vs float model: {c['dequantized']} dequantized tensors paired ({c['dequantized_by_name']} by name, "
            f"{c['dequantized_by_position']} by graph position), {c['unpaired']} unpaired; {c['float_ops']} float-op outputs; {c['weights']} weights"
            + (f"; compared {len(self.activations)} of {self.paired} activation pairs (--all-tensors compares them all)" if len(self.activations) < self.paired else "")
        ]
        deq = [r for r in self.activations if r.kind == "dequantized" and r.sqnr_db is not None]
        if deq:
            worst = sorted(deq, key=lambda r: r.sqnr_db)[:shown]  # type: ignore[arg-type, return-value]
            out.append(
                "Lowest SQNR, dequantized activations vs float: "
                + ", ".join(f"'{r.tensor}' {r.sqnr_db:.1f} dB" + (f" (own quantization {r.own_sqnr_db:.1f} dB)" if r.own_sqnr_db is not None else "") for r in worst)
            )
        weights = [r for r in self.weights if r.sqnr_db is not None]
        if weights:
            worst = sorted(weights, key=lambda r: r.sqnr_db)[:shown]  # type: ignore[arg-type, return-value]
            out.append("Lowest SQNR, weights vs float: " + ", ".join(f"'{r.reference}' {r.sqnr_db:.1f} dB" for r in worst))
        if self.unpaired:
            out.append(f"Unpaired dequantized tensors (no float counterpart found): {', '.join(self.unpaired[:10])}" + (" ..." if len(self.unpaired) > 10 else ""))
        return out

    def to_json(self) -> dict[str, Any]:
        return _strict(
            {
                "counts": dict(self.counts),
                "activations": [asdict(r) for r in self.activations],
                "weights": [asdict(r) for r in self.weights],
                "unpaired": list(self.unpaired),
            }
        )


@dataclass
class LocalizeResult:
    model: str
    reference_model: str | None
    mode: str
    tensors: list[TensorError]  # compared tensors, topological order
    report: DivergenceReport
    isolation: list[NodeVerdict] = field(default_factory=list)
    candidates: int = 0
    pair_runs: int = 0
    single_runs: int = 0
    budget: int = 0
    largest_batch: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # how the answer was reached, when the search had to fall back
    nonfinite: NonFiniteReport | None = None  # validate: the one runner's NaN/Inf scan
    quantization: QuantizationReport | None = None  # a QDQ model against its float original

    @property
    def validated(self) -> bool:
        return self.nonfinite is not None

    @property
    def first(self) -> TensorError | FiniteRow | None:
        """The answer: the first divergent tensor, or (``validate``) the first one holding NaN or Inf."""
        return self.nonfinite.first if self.nonfinite is not None else self.report.first

    @property
    def suspect(self) -> NodeVerdict | None:
        first = self.first
        return next((v for v in self.isolation if first and v.tensor == first.name), None)

    def lines(self) -> list[str]:
        if self.nonfinite is not None:
            out = [
                f"Scanned {len(self.nonfinite.rows)} floating tensors of {self.candidates} ({self.mode}) for NaN/Inf: {self.pair_runs} run(s), "
                f"memory budget {_mib(self.budget)}, largest batch {_mib(self.largest_batch)}, {self.seconds:.2f}s"
            ]
            return out + self.nonfinite.lines() + [f"Note: {n}" for n in self.notes]
        out = [
            f"Compared {len(self.tensors)} of {self.candidates} tensors ({self.mode}): {self.pair_runs} paired run(s), "
            f"{self.single_runs} single-node run(s), memory budget {_mib(self.budget)}, largest batch {_mib(self.largest_batch)}, {self.seconds:.2f}s"
        ]
        out += self.report.lines()
        if self.quantization is not None:
            out += self.quantization.lines()
        out += [f"Note: {n}" for n in self.notes]
        for v in self.isolation:
            if v.own is None:
                continue
            own = f"max abs {_num(v.own.max_abs)}, max rel {_num(v.own.max_rel)}"
            if v.rounded:
                own += f"; both runners fed the same values, {list(v.rounded)} rounded to the node's dtype"
            if v.verdict == "introduces":
                out.append(f"Node '{v.node}' ({v.op_type}) INTRODUCES the error: run alone on the reference's inputs it is still out of tolerance ({own})")
            elif v.verdict == "input overflow":
                out.append(f"Node '{v.node}' ({v.op_type}) cannot be judged alone: the reference's values of {list(v.overflowed)} overflow its input dtype")
            elif v.verdict == "propagates":
                rule = tolerance_rule(v.thresholds)
                out.append(
                    f"Node '{v.node}' ({v.op_type}) only PROPAGATES error: run alone on the reference's inputs it is within tolerance ({own}"
                    + (f"; {rule}" if rule else "")
                    + "); its inputs' small errors grow through it"
                )
        introducing = [v for v in self.isolation if v.verdict == "introduces"]
        if len(self.isolation) > 1:
            out.append(
                f"Nodes introducing error on their own: {len(introducing)} of {len(self.isolation)}"
                + (": " + ", ".join(f"{v.node} ({v.op_type})" for v in introducing[:20]) if introducing else "")
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "parity-localize",
            "version": 1,
            "model": self.model,
            "reference_model": self.reference_model,
            "mode": self.mode,
            "candidates": self.candidates,
            "pair_runs": self.pair_runs,
            "single_runs": self.single_runs,
            "budget_bytes": self.budget,
            "largest_batch_bytes": self.largest_batch,
            "seconds": self.seconds,
            "notes": list(self.notes),
            "divergence": self.report.to_json(),
            "isolation": [_strict({**asdict(v), "verdict": v.verdict}) for v in self.isolation],
            "validated": self.validated,
            "nonfinite": None if self.nonfinite is None else [self.nonfinite.to_json()],
            "quantization": None if self.quantization is None else self.quantization.to_json(),
        }


def tolerance_rule(thresholds: Mapping[str, Any]) -> str:
    """The pass rule of the simple metric's thresholds in words (core/parity/compare/simple.py): per element, an
    error within atol *or* within rtol of the reference passes, so a max abs error above atol is not a failure
    when those elements' relative error is within rtol (and the max rel may come from another element)."""
    if "atol" not in thresholds or "rtol" not in thresholds:
        return ""
    atol, rtol, stat = thresholds["atol"], thresholds["rtol"], thresholds.get("check_error_stat", "elemwise")
    if stat == "elemwise":
        return f"an element passes if |actual-ref| <= atol {atol:g} or |actual-ref| <= rtol {rtol:g} x |ref|"
    return f"it fails only if the {stat} abs error > atol {atol:g} and the {stat} rel error > rtol {rtol:g}"


def _strict(value: Any) -> Any:
    """NaN/Inf become null, so reports are strict JSON."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _num(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.4g}"


def _fin(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


class _Session:
    """The state of one localization: runners, feeds, graph info, and the compare functions (or, ``scan``:
    one runner whose tensors are checked for NaN/Inf)."""

    def __init__(
        self,
        model: str,
        runners: Sequence[RunnerSpec],
        feed: Mapping[str, Any],
        funcs: Sequence[Any],
        progress: Callable[[str], None] | None,
        scan: bool = False,
        observe: Callable[[str, Any, Any, Sequence[Any]], None] | None = None,
        external_data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model = model
        self.observe = observe
        self.specs = [RunnerSpec(r.backend, dict(r.options), r.model or model) for r in runners]
        self.feed = dict(feed)
        self.funcs = list(funcs)
        self.progress = progress or (lambda _msg: None)
        self.pair_runs = self.single_runs = 0
        self.scan_mode = scan
        self.sides = 1 if scan else 2  # runners holding a batch at once
        self.fail_text = "holds NaN or Inf" if scan else "is out of tolerance"
        self.ok_text = "no NaN or Inf" if scan else "all within tolerance"
        # the graphs only: weights stay in their files (read by each check's session, or by WeightReader)
        self.bases = [str(onnx_models.data_dir(s.model, external_data_dir if s.model == model else None)) for s in self.specs]
        proto = onnx_models.load(model, load_external_data=False, external_data_dir=self.bases[0])
        self.info = GraphInfo.from_onnx(proto)
        self.rank = {t: i for i, t in enumerate(self.info.order)}
        self.sizes = _tensor_bytes(proto, self.feed)
        self.types = g.value_types(g.infer_shapes(_light(proto), data_prop=False)[0])
        self.node_index = {n.name or f"{n.op_type}_{i}": n for i, n in enumerate(g.topo_nodes(proto.graph))}
        self.pairing: Pairing | None = None  # None: each tensor is compared with the reference's of the same name
        self.ref_inputs: set[str] = set()
        self._ref_graph: Any = None
        ref_model = self.specs[1].model if len(self.specs) > 1 else model
        ref = proto
        if ref_model != model:
            ref = onnx_models.load(ref_model, load_external_data=False, external_data_dir=self.bases[1])
            self.pairing = pair_models(proto, ref)
            self.ref_inputs = {i.name for i in ref.graph.input} - {i.name for i in ref.graph.initializer}
            self._ref_graph = ref if self.pairing.quantized else None  # weights are compared from it
        self.proto = proto  # the graph, for cutting out each check's part and single nodes
        self._ref_proto: Any = ref  # the reference's graph (the same proto when both sides run one model)
        self.graphs = [_Graph(proto), *([_Graph(ref) if ref is not proto else None] if len(self.specs) > 1 else [])]
        if len(self.graphs) > 1 and self.graphs[1] is None:
            self.graphs[1] = self.graphs[0]
        # bytes of each side's tensors for this feed (a reference model's may differ: fp32 against fp16)
        self.side_sizes = [self.sizes, *([self.sizes if ref is proto else _tensor_bytes(ref, self.feed)] if len(self.specs) > 1 else [])]
        self.largest = max((s for s in self.sizes.values() if s), default=0)
        self.chain: _Chain | None = None  # set while :func:`_batches` runs the segments
        self.ref_cache: dict[str, Any] = {}  # the reference's values around the first failing tensor (isolation)
        # held for the whole search: weights inside the model(s) (the proto holds them), not those in files
        self.resident = sum(gr.inline_bytes for gr in dict.fromkeys(self.graphs))
        self._tmp = tempfile.mkdtemp(prefix="parity-localize-")
        self._cut = 0
        self.over_budget: list[str] = []
        self.own_sqnr: dict[str, float | None] = {}  # dequantized tensor -> SQNR against its value before quantization
        self.cosines: dict[str, float | None] = {}
        self.kept: tuple[str, dict[str, Any]] | None = None  # scan: the first NaN/Inf tensor so far, with its node's values
        self.last_thresholds: dict[str, Any] = {}  # the thresholds the last compared tensor was judged against

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    @property
    def quantized(self) -> bool:
        return self.pairing is not None and self.pairing.quantized

    # --- runners --------------------------------------------------------------------------------------
    def _runner(self, side: int, outputs: Sequence[str], model: str | None = None) -> Any:
        """A runner of ``model`` (a cut model already written), or of the part of this side's model that
        computes ``outputs`` (cut now): a graph-only model in the private folder, its weights read from the
        side's data folder (``external_data_dir``), its graph outputs ``outputs``; nothing else marked."""
        spec = self.specs[side]
        backend = get_registry().backend(spec.backend)
        if model is None:
            model = self._write(self.graphs[side].cut(outputs), f"side{side}")
        options = {**spec.options, "onnx_outputs": [], "trt_outputs": [], "onnx_exclude_outputs": (), "external_data_dir": self.bases[side]}
        runner = backend.make_runner(RunnerRequest(model, options, side, "onnx"))
        runner.name = f"{spec.backend}-{side}"
        return runner

    def _write(self, model: Any, stem: str) -> str:
        """Write a cut model graph-only (its weights stay references into the side's data folder)."""
        self._cut += 1
        path = Path(self._tmp) / f"{stem}-{self._cut}.onnx"
        path.write_bytes(onnx_external.serialize(model, "the part of the model a check runs"))
        return str(path)

    def infer(self, side: int, outputs: Sequence[str], feed: Mapping[str, Any] | None = None, model: str | None = None) -> dict[str, Any]:
        if model is None and feed is None and self.chain is not None:
            return self._segment(side, outputs)
        import numpy as np

        try:
            with self._runner(side, outputs, model) as runner:
                data = _fit(feed if feed is not None else self.feed, runner.get_input_metadata())
                got = runner.infer(data)
        finally:
            gc.collect()  # the session goes before the other side's loads
        # copies: an output of onnxruntime keeps the memory arena of the session that made it alive (all of its
        # activations); copied once the session is gone, the arena goes before the other side's run loads
        out = {t: np.array(v) if isinstance(v, np.ndarray) else v for t, v in got.items()}
        del got
        release_freed_memory()  # the session's weights go back before the other side's load
        return out

    def _segment(self, side: int, outputs: Sequence[str]) -> dict[str, Any]:
        """Run the next segment of this side's chain: the nodes computing ``outputs`` that earlier segments did
        not run, fed the model's inputs and the boundary tensors those kept. Returns ``outputs``' values; keeps
        the tensors it computed that nodes not run yet read, and drops those no node still needs."""

        chain = self.chain
        assert chain is not None
        graph, kept = self.graphs[side], chain.kept[side]
        ready = {t: v for t, v in kept.items() if _feedable(v)}  # a sequence, map or string tensor is recomputed
        want = [t for t in dict.fromkeys(outputs) if t not in ready]
        nodes = graph.part(want, ready)
        done = chain.done[side] | nodes
        keep = [o for i in sorted(nodes) if i not in graph.constant for o in graph.outputs[i] if graph.alive(o, done)]
        fed = {t: ready[t] for t in dict.fromkeys(t for i in sorted(nodes) for t in graph.reads[i]) if t in ready}
        got: dict[str, Any] = {}
        marks = list(dict.fromkeys([*want, *keep]))
        if marks:
            model = self._write(graph.cut(marks, fed, nodes), f"side{side}")
            got = self.infer(side, [], feed={**self.feed, **fed}, model=model)
        chain.done[side], chain.fed[side] = done, fed
        chain.kept[side] = {t: v for t, v in [*kept.items(), *((t, got[t]) for t in keep if t in got)] if graph.alive(t, done)}
        return {t: got[t] if t in got else ready[t] for t in outputs if t in got or t in ready}

    def cost(self, plan: _Plan | None = None) -> _Cost:
        """An empty batch's memory account (see :class:`_Cost`); ``plan``: segmented execution."""
        return _Cost(self.graphs[: self.sides], self.ref_name if self.sides > 1 else None, self._in_reference, plan)

    def plan(self) -> _Plan:
        """The plan of a segmented scan, each side's tensors sized for this feed (unknown: the largest)."""
        return _Plan(self.graphs[: self.sides], [lambda t, s=s: s.get(t) or self.largest for s in self.side_sizes[: self.sides]])

    def check(self, names: Sequence[str]) -> dict[str, Any]:
        """One batch: compared tensors (two runners) or scanned ones (``scan``), by name."""
        return self.scan(names) if self.scan_mode else self.compare(names)

    def ref_name(self, t: str) -> str:
        return self.pairing.pairs.get(t, t) if self.pairing is not None else t

    def reference_values(self, names: Sequence[str]) -> dict[str, Any]:
        """The reference runner's values of the counterparts of ``names`` (one run), keyed by ``names``;
        a counterpart that is a graph input of the reference comes from the feed."""
        cached = {n: self.ref_cache[n] for n in names if n in self.ref_cache}
        wanted: dict[str, list[str]] = {}
        for n in names:
            if n not in cached and self._in_reference(n):
                wanted.setdefault(self.ref_name(n), []).append(n)
        computed = [r for r in wanted if r not in self.ref_inputs]
        got = self.infer(1, computed) if computed else {}
        out = {}
        for r, ns in wanted.items():
            value = got.get(r) if r in got else self.feed.get(r) if r in self.ref_inputs else None
            if value is not None:
                out.update({n: value for n in ns})
        return {**out, **cached}

    def compare(self, names: Sequence[str]) -> dict[str, TensorError]:
        """Run both sides with ``names`` (or their counterparts) marked; compare tensor by tensor."""
        import numpy as np

        self.pair_runs += 1
        marks = list(names)
        pre = {}
        if self.quantized:  # a dequantized tensor's own quantization error needs its value before quantization
            pre = {n: p.pre for n in names if (p := self.pairing.activations.get(n)) is not None and p.pre}  # type: ignore[union-attr]
            marks += [t for t in dict.fromkeys(pre.values()) if t not in self.feed and t not in names]
        actual = self.infer(0, marks)
        reference = self.reference_values(names)
        out = {}
        for name in names:
            if name not in actual or name not in reference:
                continue
            a = np.asarray(actual[name])
            out[name] = self._error(name, a, np.asarray(reference[name]), observed=True)
            before = actual.get(pre[name], self.feed.get(pre[name])) if name in pre else None
            if before is not None:
                self.own_sqnr[name] = sqnr_db(before, a)
        bad = next((t for t in names if t in out and not out[t].passed), None)
        if bad is not None and self.chain is not None and not self.ref_cache:
            self.ref_cache = self._around(bad, reference)
        return out

    def _around(self, name: str, reference: Mapping[str, Any]) -> dict[str, Any]:
        """The reference's values of the inputs and outputs of the node computing ``name``, from this segment's
        run (marked, or boundary tensors it was fed), so isolating it needs no run from the model's inputs."""
        producer = self.info.producers.get(name)
        node = self.node_index.get(producer.node) if producer is not None else None
        if node is None or self.chain is None:
            return {}
        fed = self.chain.fed[1]
        out = {}
        for t in [*onnx_models.node_inputs(node), *node.output]:
            value = reference.get(t) if t in reference else fed.get(self.ref_name(t)) if self._in_reference(t) else None
            if value is not None:
                out[t] = value
        return out

    def scan(self, names: Sequence[str]) -> dict[str, FiniteRow]:
        """Run the one runner with ``names`` marked; count NaN/Inf in each floating tensor."""
        import numpy as np

        self.pair_runs += 1
        values = self.infer(0, names)
        rows = {}
        for name in names:
            if name in values and is_scanned(values[name]):
                rows[name] = finite_row(name, np.asarray(values[name]), self.rank.get(name, -1), self.info.producers.get(name))
        bad = first_nonfinite(rows.values())
        if bad is not None and (self.kept is None or self.rank.get(bad.name, -1) < self.rank.get(self.kept[0], -1)):
            fed = self.chain.fed[0] if self.chain is not None else {}  # inputs from earlier segments
            self.kept = (bad.name, {t: values[t] if t in values else fed[t] for t in [bad.name, *bad.inputs] if t in values or t in fed})
        return rows

    def first_values(self, names: Sequence[str]) -> dict[str, Any]:
        """Values of the first NaN/Inf tensor and its node's inputs: from the batch that found it, the feed,
        the model's constants, and one more run for inputs scanned in earlier batches."""
        got = dict(self.kept[1]) if self.kept is not None and self.kept[0] == names[0] else {}
        got.update({t: self.feed[t] for t in names if t in self.feed and t not in got})
        got.update(constant_values(self.proto, [t for t in names if t not in got and t in self.info.constants], self.bases[0]))
        rest = [t for t in names if t not in got and t in self.rank]
        if rest:
            self.pair_runs += 1
            got.update(self.infer(0, rest))
        return got

    def _error(self, name: str, a: Any, b: Any, position: int | None = None, observed: bool = False) -> TensorError:
        """``observed``: a tensor of the full model (not a node run alone, nor a weight), shown to ``observe``."""
        import numpy as np

        a, b = np.asarray(a), np.asarray(b)
        checks = [f(name, a, b) for f in self.funcs]
        self.last_thresholds = dict(next((c.thresholds for c in checks if "atol" in c.thresholds), {}))
        if observed and self.observe is not None:
            self.observe(name, a, b, checks)
        if self.quantized:
            self.cosines[name] = next((c.values.get("cosine") for c in checks if "cosine" in c.values), None)
        return tensor_error(name, checks, self.rank.get(name, -1) if position is None else position, self.info.producers.get(name), self.ref_name(name))

    def weight_rows(self) -> list[QuantRow]:
        """Every paired weight, dequantized with NumPy and compared with the float initializer."""
        if not self.quantized or self._ref_graph is None:
            return []
        base = self.bases[1]
        ref_inits = {i.name: i for i in self._ref_graph.graph.initializer}
        ref_consts = {n.output[0]: n for n in self._ref_graph.graph.node if n.op_type == "Constant" and n.output}
        dq_nodes = {n.output[0]: n for n in self.proto.graph.node if n.op_type == DQ and n.output}
        rows = []
        for w in self.pairing.weights:  # type: ignore[union-attr]
            node = dq_nodes.get(w.dequantized)
            if node is None:
                continue
            try:
                values = constant_values(self.proto, [t for t in node.input if t], self.bases[0])
                deq = dequantize(node, values)
                if w.reference in ref_inits:
                    ref = constant_values(self._ref_graph, [w.reference], base)[w.reference]
                else:
                    ref = constant_values(self._ref_graph, [w.reference], base).get(w.reference) if w.reference in ref_consts else None
            except Exception as exc:  # noqa: BLE001 - an unreadable weight is left out, said once
                self.progress(f"weight '{w.reference}' not compared: {exc}")
                continue
            if ref is None or tuple(ref.shape) != tuple(deq.shape):
                continue
            err = self._error(w.dequantized, deq, ref, position=-1)
            rows.append(QuantRow(w.tensor, w.reference, w.matched_by, "weight", err.passed, err.sqnr_db, self.cosines.get(w.dequantized), _fin(err.max_abs)))
        return rows

    # --- isolation ----------------------------------------------------------------------------------
    def isolate(self, nodes: Sequence[str], full: Mapping[str, TensorError], budget: int) -> list[NodeVerdict]:
        """Run each node alone on side 0 with side 1's values of its inputs (fetched in budgeted batches)."""
        verdicts = []
        todo = list(nodes)
        while todo:
            batch, names, cost = [], [], 0
            while todo:
                node = self.node_index[todo[0]]
                ins = [t for t in onnx_models.node_inputs(node) if t not in self.info.constants]
                need = [t for t in dict.fromkeys([*ins, *node.output]) if t and t not in self.feed]
                extra = sum(self.sizes.get(t) or 0 for t in need if t not in names)
                if batch and cost + extra > budget:
                    break
                batch.append(todo.pop(0))
                names += [t for t in need if t not in names]
                cost += extra
            self.single_runs += 1
            ref = self.reference_values(names) if names else {}
            ref.update({k: v for k, v in self.feed.items()})
            with tempfile.TemporaryDirectory(prefix="node-", dir=self._tmp) as tmp:
                for node_name in batch:
                    node = self.node_index[node_name]
                    outs = [t for t in node.output if t]
                    inputs = [t for t in dict.fromkeys(onnx_models.node_inputs(node)) if t not in self.info.constants]
                    if any(t not in ref for t in inputs) or not any(t in ref for t in outs):
                        verdicts.append(NodeVerdict(node_name, node.op_type, outs[0], full.get(outs[0]), None))
                        continue
                    feed = {t: ref[t] for t in inputs}
                    types = {t: (self._dtype(t, ref[t]), tuple(ref[t].shape)) for t in inputs}
                    path = Path(tmp) / "node.onnx"
                    path.write_bytes(onnx_external.serialize(extract_node(self.proto, node_name, types), f"node '{node_name}' alone"))
                    self.single_runs += 1
                    cast, overflowed = _cast_inputs(feed, {t: types[t][0] for t in inputs})
                    got = self.infer(0, [], feed=cast, model=str(path))
                    tensor = next(t for t in outs if t in ref)
                    rounded = () if overflowed else _rounded(feed, cast)
                    expected = self._reference_on(node_name, feed, cast, Path(tmp)) if rounded else None
                    if expected is None or tensor not in expected:
                        expected, rounded = ref, ()
                    self.last_thresholds = {}
                    own = self._error(tensor, got[tensor], expected[tensor]) if tensor in got else None
                    verdicts.append(NodeVerdict(node_name, node.op_type, tensor, full.get(tensor), own, overflowed, rounded, self.last_thresholds))
            del ref
        return verdicts

    def _reference_on(self, node_name: str, feed: Mapping[str, Any], cast: Mapping[str, Any], tmp: Path) -> dict[str, Any] | None:
        """The reference runner's node alone on the values the actual node got (rounded to its dtype, then
        back to the reference's): "with exact inputs" means both sides compute from the same numbers."""
        if node_name not in {n.name for n in self._ref_proto.graph.node}:
            return None
        values = {t: cast[t].astype(feed[t].dtype, copy=False) for t in feed}
        path = tmp / "reference_node.onnx"
        cut = extract_node(self._ref_proto, node_name, {t: (v.dtype, tuple(v.shape)) for t, v in values.items()})
        path.write_bytes(onnx_external.serialize(cut, f"node '{node_name}' of the reference alone"))
        self.single_runs += 1
        return self.infer(1, [], feed=values, model=str(path))

    def _in_reference(self, t: str) -> bool:
        return self.pairing is None or t in self.pairing.pairs

    def _dtype(self, t: str, value: Any) -> Any:
        elem = self.types.get(t, (0, None))[0]
        return (onnx_models.dtype_of(elem) if elem else None) or value.dtype


def _feedable(value: Any) -> bool:
    """Whether a kept value can be a cut model's typed graph input."""
    import numpy as np
    from onnx import helper

    if not isinstance(value, np.ndarray) or value.dtype == object:
        return False
    try:
        helper.np_dtype_to_tensor_dtype(value.dtype)
    except (KeyError, ValueError, TypeError):
        return False
    return True


def _held(tensor: Any, computed: bool = True) -> int:
    """Bytes a check's session holds for one weight it needs (see the factors at the top); ``computed``: a
    computing op reads it (not only ops that move data)."""
    factor = EXTERNAL_WEIGHT_FACTOR if onnx_external.is_external(tensor) else INLINE_WEIGHT_FACTOR
    return onnx_external.nbytes(tensor) * (factor + (HALF_WEIGHT_EXTRA if computed and tensor.data_type in HALF_TYPES else 0))


def _attribute_tensors(node: Any) -> Any:
    """Tensors inside a node's attributes (a Constant's value, subgraphs' initializers and constants)."""
    import onnx

    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.TENSOR:
            yield attr.t
        elif attr.type == onnx.AttributeProto.TENSORS:
            yield from attr.tensors
        elif attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                yield from sub.initializer
                for inner in sub.node:
                    yield from _attribute_tensors(inner)


class _Graph:
    """One side's graph, indexed for cutting out the part that computes given tensors: which node makes each
    tensor, what each node reads (and who reads each tensor), and the weight bytes a session running a part
    holds."""

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        graph = proto.graph
        self.nodes = list(graph.node)
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.outputs = [[o for o in n.output if o] for n in self.nodes]
        self.reads = [onnx_models.node_inputs(n) for n in self.nodes]  # outer-scope names of subgraphs included
        self.readers: dict[str, list[int]] = {}
        for i, reads in enumerate(self.reads):
            for t in reads:
                self.readers.setdefault(t, []).append(i)
        self.weight_cost = {t.name: _held(t, self._computed(t.name)) for t in graph.initializer}
        self.weight_cost.update({sp.values.name: _held(sp.values) + _held(sp.indices) for sp in graph.sparse_initializer})
        self.node_cost = [sum(_held(t) for t in _attribute_tensors(n)) for n in self.nodes]
        # nodes computing from weights alone (Constant, a Cast of a weight): every segment reading them runs
        # them again, so their values stay constants there (folded, prepacked) as in the whole model
        import onnx

        self.constant: set[int] = set()
        known = set(self.weight_cost)
        subgraphs = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        for i in onnx_models.topological_order(self.nodes):
            n = self.nodes[i]
            if n.op_type not in RANDOM_OPS and not any(a.type in subgraphs for a in n.attribute) and all(t in known for t in self.reads[i]):
                self.constant.add(i)
                known.update(self.outputs[i])
        self.inline_bytes = sum(onnx_external.nbytes(t) for t in onnx_external.tensors(proto) if not onnx_external.is_external(t))

    def _computed(self, t: str) -> bool:
        return not all(self.nodes[i].op_type in MOVE_OPS for i in self.readers.get(t, ()))

    def walk(self, names: Sequence[str], nodes: set[int], weights: set[str], done: Collection[int] = ()) -> tuple[set[int], set[str], int]:
        """The nodes computing ``names`` that are not in ``nodes`` yet, the weights they read that are not in
        ``weights``, and those weights' bytes (what adding ``names`` to a part costs). ``done``: nodes earlier
        segments ran, whose outputs are kept: the walk stops there."""
        new_nodes: set[int] = set()
        new_weights: set[str] = set()
        cost = 0
        stack = [self.producer[n] for n in names if n in self.producer]
        while stack:
            i = stack.pop()
            if i in nodes or i in new_nodes or (i in done and i not in self.constant):
                continue
            new_nodes.add(i)
            cost += self.node_cost[i]
            for t in self.reads[i]:
                if t in self.weight_cost:
                    if t not in weights and t not in new_weights:
                        new_weights.add(t)
                        cost += self.weight_cost[t]
                elif t in self.producer:
                    stack.append(self.producer[t])
        return new_nodes, new_weights, cost

    def part(self, names: Sequence[str], ready: Collection[str] = ()) -> set[int]:
        """The nodes computing ``names`` from the model's inputs and the ``ready`` tensors (values kept from
        earlier segments)."""
        nodes: set[int] = set()
        stack = [self.producer[n] for n in names if n in self.producer]
        while stack:
            i = stack.pop()
            if i in nodes:
                continue
            nodes.add(i)
            stack.extend(self.producer[t] for t in self.reads[i] if t in self.producer and t not in ready)
        return nodes

    def alive(self, t: str, done: Collection[int]) -> bool:
        """Whether a node still to run reads ``t`` (then a segment computing it keeps it)."""
        return any(i not in done for i in self.readers.get(t, ()))

    def cut(self, outputs: Sequence[str], fed: Mapping[str, Any] | None = None, nodes: Collection[int] | None = None) -> Any:
        """The part of the model that computes ``outputs``, as a model whose graph outputs they are: ``nodes``
        (default: every node they depend on) in the model's order, the weights those read (external ones stay
        references), every real graph input (a feed holds them all), and a graph input for each ``fed``
        tensor (a value an earlier segment computed, typed from it)."""
        import onnx
        from onnx import helper

        wanted = list(dict.fromkeys(outputs))
        fed = fed or {}
        needed = set(nodes) if nodes is not None else self.part(wanted, fed)
        source = self.proto
        model = onnx.ModelProto()
        for key in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
            setattr(model, key, getattr(source, key))
        model.opset_import.extend(source.opset_import)
        model.functions.extend(source.functions)
        graph, original = model.graph, source.graph
        graph.name = original.name
        graph.node.extend(self.nodes[i] for i in sorted(needed))
        reads = {t for i in needed for t in self.reads[i]}
        weights = set(self.weight_cost)
        graph.initializer.extend(t for t in original.initializer if t.name in reads)
        graph.sparse_initializer.extend(sp for sp in original.sparse_initializer if sp.values.name in reads)
        graph.input.extend(vi for vi in original.input if vi.name not in weights or vi.name in reads)
        for t, value in fed.items():
            graph.input.append(helper.make_tensor_value_info(t, helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape)))
        made = {o for i in needed for o in self.outputs[i]}
        graph.value_info.extend(vi for vi in original.value_info if vi.name in made and vi.name not in wanted)
        infos = {vi.name: vi for vi in [*original.value_info, *original.output, *original.input]}
        graph.output.extend(infos.get(n) or helper.make_empty_tensor_value_info(n) for n in wanted)
        return model


class _Plan:
    """Segmented execution as planned (:func:`_batches`): per side, the nodes earlier segments run, how many
    nodes not run yet read each tensor, and the boundary tensors kept for them."""

    def __init__(self, graphs: Sequence[_Graph], sizes: Sequence[Callable[[str], int]]) -> None:
        self.graphs = list(graphs)
        self.size = list(sizes)  # per side: tensor -> bytes
        self.done: list[set[int]] = [set() for _ in self.graphs]
        self.pending = [{t: len(r) for t, r in gr.readers.items()} for gr in self.graphs]
        self.kept: list[set[str]] = [set() for _ in self.graphs]
        self.kept_bytes = [0 for _ in self.graphs]


@dataclass
class _Delta:
    """What adding one tensor to a batch adds on one side (see :class:`_Cost`)."""

    name: str | None = None
    nodes: set[int] = field(default_factory=set)
    weights: set[str] = field(default_factory=set)
    weight_bytes: int = 0
    marked: int = 0  # the tensor's bytes on this side (0: absent, or marked already)
    out: int = 0  # change of the boundary bytes the segment returns besides its marked tensors
    pending: dict[str, int] = field(default_factory=dict)  # new counts of readers not run yet
    made: set[str] = field(default_factory=set)


class _Cost:
    """The memory account of one batch of marked tensors. The sides run in turn, so the larger side's weights
    count; every side holds the marked tensors (the first side's outputs wait while the second runs).

    Without a plan, each side runs the part of its model that computes them from the model's inputs: its
    weights plus the marked tensors on every side. With a plan (segmented execution), each side runs only
    the nodes earlier segments did not, fed the boundary tensors they kept: the segment's weights (the larger
    side's) plus, on every side, the boundary tensors kept on entry, the marked tensors and the new boundary
    tensors the segment returns for later ones."""

    def __init__(self, graphs: Sequence[_Graph], ref_name: Callable[[str], str] | None, in_reference: Callable[[str], bool], plan: _Plan | None = None) -> None:
        self.graphs = list(graphs)
        self.ref_name = ref_name
        self.in_reference = in_reference
        self.plan = plan
        self.nodes: list[set[int]] = [set() for _ in self.graphs]
        self.weights: list[set[str]] = [set() for _ in self.graphs]
        self.weight_bytes = [0 for _ in self.graphs]
        self.tensor_bytes = 0
        self.made: list[set[str]] = [set() for _ in self.graphs]  # tensors the segment computes
        self.marked: list[set[str]] = [set() for _ in self.graphs]
        self.marked_bytes = [0 for _ in self.graphs]
        self.out_bytes = [0 for _ in self.graphs]

    def _name(self, side: int, t: str) -> str | None:
        if side == 0:
            return t
        return self.ref_name(t) if self.ref_name is not None and self.in_reference(t) else None

    def grow(self, t: str, size: int) -> tuple[int, list[_Delta]]:
        """``(cost of the batch with t added, what to commit)``."""
        deltas = []
        for side, graph in enumerate(self.graphs):
            name = self._name(side, t)
            if name is None:
                deltas.append(_Delta())
                continue
            done = self.plan.done[side] if self.plan is not None else ()
            nodes, weights, cost = graph.walk([name], self.nodes[side], self.weights[side], done)
            d = _Delta(name, nodes, weights, cost)
            if self.plan is not None:
                d.marked = 0 if name in self.marked[side] else (size if side == 0 else self.plan.size[side](name))
                self._boundary(side, d)
            deltas.append(d)
        weights = max(held + d.weight_bytes for held, d in zip(self.weight_bytes, deltas))
        if self.plan is None:
            return weights + len(self.graphs) * (self.tensor_bytes + size), deltas
        tensors = sum(self.plan.kept_bytes[s] + self.marked_bytes[s] + self.out_bytes[s] + d.marked + d.out for s, d in enumerate(deltas))
        return weights + tensors, deltas

    def _boundary(self, side: int, d: _Delta) -> None:
        """The change of the segment's returned boundary bytes when ``d``'s nodes join it: a tensor it computes
        is returned while a node not run yet reads it (marked ones are counted as marked)."""
        assert self.plan is not None
        graph, pending, size = self.graphs[side], self.plan.pending[side], self.plan.size[side]
        for i in d.nodes:
            for r in graph.reads[i]:
                d.pending[r] = d.pending.get(r, pending.get(r, 0)) - 1
        d.made = {o for i in d.nodes if i not in graph.constant for o in graph.outputs[i]}
        made, marked = self.made[side], self.marked[side]
        for x in d.made | (d.pending.keys() & made) | ({d.name} & made):
            before = x in made and pending.get(x, 0) > 0 and x not in marked
            after = d.pending.get(x, pending.get(x, 0)) > 0 and x != d.name and x not in marked
            d.out += size(x) * (int(after) - int(before))

    def commit(self, deltas: Sequence[_Delta], size: int) -> None:
        for side, d in enumerate(deltas):
            self.nodes[side] |= d.nodes
            self.weights[side] |= d.weights
            self.weight_bytes[side] += d.weight_bytes
            if self.plan is not None and d.name is not None:
                self.plan.pending[side].update(d.pending)
                self.made[side] |= d.made
                self.marked[side].add(d.name)
                self.marked_bytes[side] += d.marked
                self.out_bytes[side] += d.out
        self.tensor_bytes += size

    def close(self) -> None:
        """The segment is planned: its nodes are done, and the tensors later nodes read are kept."""
        plan = self.plan
        if plan is None:
            return
        for side in range(len(self.graphs)):
            plan.done[side] |= self.nodes[side]
            pending = plan.pending[side]
            plan.kept[side] = {x for x in plan.kept[side] | self.made[side] if pending.get(x, 0) > 0}
            plan.kept_bytes[side] = sum(plan.size[side](x) for x in plan.kept[side])


class _Chain:
    """Segmented execution as run: per side, the nodes run so far, the boundary tensors kept for nodes not
    run yet (that side's own values: an fp16 model's stay fp16), and those the last segment was fed."""

    def __init__(self, sides: int) -> None:
        self.done: list[set[int]] = [set() for _ in range(sides)]
        self.kept: list[dict[str, Any]] = [{} for _ in range(sides)]
        self.fed: list[dict[str, Any]] = [{} for _ in range(sides)]


def _cast_inputs(feed: Mapping[str, Any], dtypes: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Cast reference values to the node's input dtypes, naming those that overflow (fp32 -> fp16)."""
    import numpy as np

    out, overflowed = {}, []
    for name, value in feed.items():
        with np.errstate(over="ignore", invalid="ignore"):
            cast = value.astype(dtypes[name], copy=False)
        if cast is not value and np.issubdtype(cast.dtype, np.floating) and np.count_nonzero(~np.isfinite(cast)) > np.count_nonzero(~np.isfinite(value)):
            overflowed.append(name)
        out[name] = cast
    return out, tuple(overflowed)


def _rounded(feed: Mapping[str, Any], cast: Mapping[str, Any]) -> tuple[str, ...]:
    """Floating inputs whose values changed when cast to the node's dtype (fp32 -> fp16 rounding)."""
    import numpy as np

    out = []
    for name, value in feed.items():
        new = cast[name]
        if new is value or new.dtype == value.dtype or not np.issubdtype(value.dtype, np.floating):
            continue
        if not np.array_equal(new.astype(value.dtype), value, equal_nan=True):
            out.append(name)
    return tuple(out)


def _fit(feed: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """Cast inputs to each runner's dtypes (an fp16 model compared with its fp32 original)."""
    out = {}
    for name, value in feed.items():
        m = meta.get(name)
        out[name] = value.astype(m.dtype) if m is not None and m.dtype is not None and value.dtype != m.dtype else value
    return out


def _init_bytes(init: Any) -> int:
    n = 1
    for d in init.dims:
        n *= d
    dtype = onnx_models.dtype_of(init.data_type)
    return n * (dtype.itemsize if dtype is not None else 4)


def _light(model: Any) -> Any:
    """The model with big weights replaced by typed inputs: shape inference needs their shapes, not values."""
    import onnx
    from onnx import helper

    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    gr = light.graph
    gr.node.extend(model.graph.node)
    gr.input.extend(model.graph.input)
    gr.output.extend(model.graph.output)
    gr.value_info.extend(model.graph.value_info)
    have = {i.name for i in model.graph.input}
    for init in model.graph.initializer:
        if _init_bytes(init) <= 4096 and not onnx_external.is_external(init):
            gr.initializer.append(init)  # small ones may be shapes that inference propagates
        elif init.name not in have:
            gr.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    return light


def _tensor_bytes(model: Any, feed: Mapping[str, Any]) -> dict[str, int | None]:
    """Bytes of every node output for this feed's shapes (shape inference); ``None`` where unknown."""
    import numpy as np

    light = _light(model)
    g.set_input_shapes(light, {k: tuple(int(d) for d in np.shape(v)) for k, v in feed.items() if k in {i.name for i in light.graph.input}})
    inferred, _ = g.infer_shapes(light)
    types = g.value_types(inferred)
    out: dict[str, int | None] = {}
    for t in g.tensor_order(model):
        elem, shape = types.get(t, (0, None))
        dtype = onnx_models.dtype_of(elem) if elem else None
        if shape is None or dtype is None or not all(isinstance(d, int) and d >= 0 for d in shape):
            out[t] = None
            continue
        out[t] = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return out


def localize(
    model: str,
    runners: Sequence[RunnerSpec | str] = ("onnxrt", "onnxrt"),
    reference_model: str | None = None,
    feed: Mapping[str, Any] | None = None,
    compare_func: Any = None,
    memory_budget: int | str | None = None,
    mode: str = "batches",
    isolate: str = "suspect",
    stop_at_first: bool = True,
    tensors: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    validate: bool = False,
    observe: Callable[[str, Any, Any, Sequence[Any]], None] | None = None,
    external_data_dir: str | os.PathLike[str] | None = None,
) -> LocalizeResult:
    """Find the first tensor of ``model`` whose value differs between ``runners[0]`` and ``runners[1]``.

    ``runners`` are backend names or :class:`RunnerSpec`; the second runs ``reference_model`` when given.
    ``isolate``: ``suspect`` (the first divergent node), ``all`` (every compared node) or ``none``.
    ``validate`` (one runner, no reference): find the first tensor holding NaN or Inf instead
    (``result.nonfinite``), with summaries of its node's inputs. ``observe(name, actual, reference, checks)``
    sees each compared tensor of the whole model while both arrays are in memory (``--save-report-html``
    samples them). ``external_data_dir``: the folder of ``model``'s external data files (default: its
    folder; a reference model's are beside it).

    ``memory_budget`` is the peak to aim for: Parity's own memory, weights held inside the model(s), the
    inputs and a few activations are set aside, and the rest takes each batch's segment: the weights of the
    nodes it adds to each side's chain, its marked tensors and the boundary tensors kept between segments.
    A node whose weights alone do not fit is checked in a batch of its own, with a note.
    """
    from parity.api import DataLoader, resolve_compare_funcs

    started = time.perf_counter()
    if mode not in ("batches", "bisect"):
        raise UsageError(f"--mode: unknown mode '{mode}'; choose batches or bisect")
    if isolate not in ("suspect", "all", "none"):
        raise UsageError(f"--isolate: unknown value '{isolate}'; choose suspect, all or none")
    specs = [r if isinstance(r, RunnerSpec) else RunnerSpec(r) for r in runners]
    if validate and (len(specs) != 1 or reference_model):
        raise UsageError(
            f"--validate looks for the first NaN/Inf with one runner and no reference: give one backend flag (got {len(specs)}"
            + (" and --reference-model" if reference_model else "") + "); parity run --onnx-outputs mark all --validate checks several"
        )  # fmt: skip
    if len(specs) == 1 and reference_model:
        specs.append(RunnerSpec(specs[0].backend, specs[0].options))
    if len(specs) != 2 and not validate:
        raise UsageError(f"localize compares exactly two runners (got {len(specs)}); give two backend flags, or one and --reference-model")
    check_model_path(model)
    if reference_model:
        check_model_path(reference_model)
        specs[1] = RunnerSpec(specs[1].backend, specs[1].options, reference_model)
    if feed is None:
        feed = DataLoader(onnx_models.read_inputs(model))[0]
    budget = (parse_size(memory_budget, "--memory-budget", BUDGET_ERROR) if memory_budget is not None else 0) or default_budget()
    funcs = [] if validate else resolve_compare_funcs(compare_func)
    session = _Session(model, specs, feed, funcs, progress, scan=validate, observe=observe, external_data_dir=external_data_dir)
    # each batch's session is released with a full gc.collect (a cycle must not keep its weights past the budget);
    # the graphs and the caller's objects live through the search, so they go to the permanent generation, which
    # collections skip (frozen_heap): PP-OCR's detector spent 49 of 56 s in 1,344 collections of 37 ms each
    try:
        with frozen_heap():
            return _localize(session, model, specs, reference_model, budget, mode, isolate, stop_at_first, tensors, exclude, validate, started)
    finally:
        session.close()


def _localize(
    session: _Session,
    model: str,
    specs: Sequence[RunnerSpec],
    reference_model: str | None,
    budget: int,
    mode: str,
    isolate: str,
    stop_at_first: bool,
    tensors: Sequence[str] | None,
    exclude: Sequence[str],
    validate: bool,
    started: float,
) -> LocalizeResult:
    candidates = _candidates(session, tensors, exclude)
    feed_bytes = sum(getattr(v, "nbytes", 0) for v in session.feed.values())
    known = [s for s in session.sizes.values() if s]
    largest = max(known, default=0)
    # what the search holds besides each batch's weights and marked outputs (counted per batch, :class:`_Cost`):
    # weights inside the model files (the graphs hold them), the inputs, a few live activations and the
    # comparison scratch, and Parity itself
    baseline = session.resident + 2 * feed_bytes + 4 * largest + RUNTIME_OVERHEAD
    usable = budget - baseline
    if usable < session.sides * largest:
        if usable < 0:
            why = f"is below this model's baseline ({_mib(baseline)})"
        else:  # above the baseline, but not by the largest tensor held on every side
            why = f"leaves {_mib(usable)} above this model's baseline ({_mib(baseline)}); its largest tensor takes {_mib(session.sides * largest)}"
        session.progress(f"memory budget {_mib(budget)} {why}; comparing one tensor at a time (--memory-budget)")
        usable = 0
    sizes = {t: (session.sizes.get(t) or largest) for t in candidates}
    found: dict[str, Any] = {}
    labels = (f"{specs[0].backend}-0", f"{specs[1].backend}-1" if len(specs) > 1 else "")  # no reference: nothing is compared
    result = LocalizeResult(model, reference_model, mode, [], DivergenceReport(*labels, 0, [], model), candidates=len(candidates), budget=budget)
    if mode == "batches":
        result.largest_batch = _batches(session, candidates, sizes, usable, found, stop_at_first)
    else:
        result.largest_batch = _bisect(session, candidates, sizes, usable, found, result.notes)
    if session.over_budget and usable > 0:
        t, need = session.over_budget[0]
        more = f" (and {len(session.over_budget) - 1} more)" if len(session.over_budget) > 1 else ""
        result.notes.append(
            f"'{t}'{more} needs {_mib(need)} (its segment's weights, the tensor and the boundary tensors held), above the "
            f"{_mib(usable)} the memory budget leaves after Parity and the inputs; such tensors were checked past the budget, in batches"
            f" at most {OVER_BUDGET_GROWTH:.0%} above what their first tensor needs"
        )
    ordered = sorted(found.values(), key=lambda t: t.position)
    if validate:
        scan = NonFiniteReport(labels[0], 0, ordered, model)
        sources = {**{t: "constant" for t in session.info.constants}, **{t: "input" for t in session.feed}}
        result.nonfinite = describe_first(scan, session.first_values, sources)
        result.pair_runs = session.pair_runs
        result.seconds = time.perf_counter() - started
        return result
    result.tensors = ordered
    result.report = DivergenceReport(*labels, 0, ordered, model, set(session.info.constants), sqnr=session.quantized)
    first = first_divergent(ordered)
    if isolate == "all":
        nodes = list(dict.fromkeys(t.node for t in ordered if t.node in session.node_index))
    elif isolate == "suspect" and first is not None and first.node in session.node_index:
        nodes = [first.node]
    else:
        nodes = []
    if session.quantized:  # a QuantizeLinear/DequantizeLinear reads or writes integers the float model lacks
        nodes = [n for n in nodes if session.node_index[n].op_type not in (Q, DQ)]
    if nodes:
        session.progress(f"isolating {len(nodes)} node(s) with the reference's inputs")
        result.isolation = session.isolate(nodes, found, max(usable, 2 * largest))
    if session.quantized:
        result.quantization = _quantization(session, ordered, candidates)
    result.pair_runs, result.single_runs = session.pair_runs, session.single_runs
    result.seconds = time.perf_counter() - started
    return result


def _quantization(session: _Session, ordered: Sequence[TensorError], candidates: Sequence[str]) -> QuantizationReport:
    pairing = session.pairing
    assert pairing is not None
    rows = []
    for t in ordered:
        p = pairing.activations.get(t.name)
        if p is None:
            continue
        rows.append(QuantRow(t.name, p.reference, p.matched_by, p.kind, t.passed, t.sqnr_db, session.cosines.get(t.name), _fin(t.max_abs), session.own_sqnr.get(t.name)))
    session.progress(f"comparing {len(pairing.weights)} dequantized weight(s) with the float model's")
    paired = sum(1 for t in candidates if t in pairing.activations)
    return QuantizationReport(pairing.counts(), rows, session.weight_rows(), list(pairing.unpaired), paired)


def _candidates(session: _Session, tensors: Sequence[str] | None, exclude: Sequence[str]) -> list[str]:
    """Every node output in topological order, ``Constant`` nodes' included (an fp16 conversion may clamp
    one: it is then the first divergence, as ``--onnx-outputs mark all`` reports)."""
    order = list(session.info.order)
    if tensors and list(tensors) not in (["mark", "all"], ["mark all"], ["*"]):
        known = set(order)
        for t in tensors:
            if t not in known:
                raise UsageError(f"--onnx-outputs: the model has no computed tensor '{t}'{did_you_mean(t, known)}")
        wanted = set(tensors)
        order = [t for t in order if t in wanted]
    known = set(session.info.order)
    for t in exclude:
        if t not in known:
            raise UsageError(f"--onnx-exclude-outputs: the model has no computed tensor '{t}'{did_you_mean(t, known)}")
    skip = set(exclude)
    order = [t for t in order if t not in skip and session._in_reference(t)]
    if not order:
        raise UsageError("no tensors to compare (every computed tensor was excluded or is missing from the reference model)")
    return order


def _batches(session: _Session, order: list[str], sizes: Mapping[str, int], usable: int, found: dict[str, Any], stop: bool) -> int:
    """Greedy packing in topological order into segments: a batch grows while its cost (:class:`_Cost` with a
    :class:`_Plan`: the weights of the nodes it adds to each side's chain, its tensors and the boundary
    tensors held) fits ``usable``. Each batch then runs as one segment per side, fed the boundary tensors
    earlier segments of that side kept. Returns the largest cost."""
    batches: list[list[str]] = [[]]
    costs = [0]
    plan = session.plan()
    account = session.cost(plan)
    start = 0  # the cost of the batch's first tensor: a batch past the budget grows to OVER_BUDGET_GROWTH above it
    for t in order:
        cost, deltas = account.grow(t, sizes[t])
        # (a budget below the baseline, usable 0, means one tensor at a time, as said then)
        fits = cost <= usable or (0 < usable < start and cost <= start * (1 + OVER_BUDGET_GROWTH))
        if batches[-1] and not fits:
            account.close()
            batches.append([])
            costs.append(0)
            account = session.cost(plan)
            cost, deltas = account.grow(t, sizes[t])
        if not batches[-1]:
            start = cost
        account.commit(deltas, sizes[t])
        batches[-1].append(t)
        costs[-1] = cost
    largest = 0
    session.chain = _Chain(session.sides)
    try:
        for i, batch in enumerate(batches):
            largest = max(largest, costs[i])
            if costs[i] > usable:  # one tensor whose segment alone does not fit
                session.over_budget.append((batch[0], costs[i]))
            result = session.check(batch)
            found.update(result)
            bad = [t for t in batch if t in result and not result[t].passed]
            session.progress(f"batch {i + 1}/{len(batches)}: {len(batch)} tensor(s), {_mib(costs[i])}: " + (f"first failing '{bad[0]}'" if bad else session.ok_text))
            if bad and stop:
                break
    finally:
        session.chain = None  # the kept boundary tensors go
    return largest


def _bisect(session: _Session, order: list[str], sizes: Mapping[str, int], usable: int, found: dict[str, Any], notes: list[str]) -> int:
    """Binary search for the pass/fail boundary with one tensor marked per run, then verify it: every tensor
    before the boundary is compared (budgeted batches, stopping at the first failure), so the answer is the
    first divergence by definition even where the search's assumption (pass, then fail for good) is wrong."""
    largest = 0

    def probe(names: Sequence[str]) -> None:
        nonlocal largest
        todo = [t for t in names if t not in found]
        if todo:
            account = session.cost()
            for t in todo:
                cost, deltas = account.grow(t, sizes.get(t, 0))
                account.commit(deltas, sizes.get(t, 0))
            if cost > usable:
                session.over_budget.append((todo[0], cost))
            largest = max(largest, cost)
            found.update(session.check(todo))

    def fails(t: str) -> bool:
        probe([t])
        return t in found and not found[t].passed

    outputs = set(_graph_outputs(session))
    outs = [t for t in order if t in outputs] or order[-1:]
    probe(outs)
    failing = [t for t in outs if t in found and not found[t].passed]
    if failing:
        hi, lo = order.index(failing[0]), -1
        while hi - lo > 1:  # invariant: order[hi] fails; order[lo] passes (or lo is -1)
            mid = (lo + hi) // 2
            if fails(order[mid]):
                hi = mid
            else:
                lo = mid
            session.progress(f"bisect: boundary within positions {lo + 1}..{hi}")
        prefix = order[:hi]
        session.progress(f"bisect: boundary at '{order[hi]}'; verifying the {sum(t not in found for t in prefix)} tensor(s) before it")
    else:
        prefix = order
        session.progress(f"bisect: the model outputs pass ({session.ok_text}); verifying that no tensor fails inside the model")
    largest = max(largest, _batches(session, [t for t in prefix if t not in found], sizes, usable, found, True))
    first = first_divergent(found.values())
    if first is not None and (not failing or first.name != order[hi]):
        where = f"before the bisected boundary '{order[hi]}'" if failing else "although every model output passes"
        notes.append(
            f"bisect's assumption failed: '{first.name}' {session.fail_text} {where} (the error appears, then disappears);"
            " the answer comes from the verified scan of every earlier tensor"
        )
    return largest


def _graph_outputs(session: _Session) -> list[str]:
    return [o.name for o in session.proto.graph.output]


def runner_specs_from_cli(chosen: Sequence[tuple[str, Mapping[str, str]]], params: Mapping[str, Any], cast: Callable[[Any, Mapping[str, str]], dict]) -> list[RunnerSpec]:
    """``--onnxrt --onnxrt=graph-optimization-level=disable`` -> runner specs with per-runner settings."""
    registry = get_registry()
    specs = []
    for name, overrides in chosen:
        backend = registry.backend(name)
        specs.append(RunnerSpec(name, {**params, **cast(backend, overrides)}))
    return specs


os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
