"""``parity surgeon sanitize``: constant folding to a fixed point, cleanup, toposort, input-shape overrides.

Constant folding is onnx-graphsurgeon's ``Graph.fold_constants`` (it evaluates constant subgraphs with
onnxruntime), repeated until a pass removes no node: folding a ``Shape`` can make its consumers constant,
which the next pass folds. Tensors larger than ``size_threshold`` bytes are left unfolded so a ``Tile`` or
``Expand`` of a constant cannot blow the model up.

Models with external data (``base_dir`` given with a lazily loaded model): weights stay in their files. Folding
evaluates constant subgraphs from a serialized copy, so only the external tensors that a foldable node reads
(a node whose inputs are all constants, transitively; a ``Shape`` counts as constant) are read into the proto
first (:func:`foldable_external`); those that survive folding unchanged go back to being references, and
every other weight (an LLM's MatMul weights) is never read. Any other value graphsurgeon asks for is read from
``base_dir`` (:func:`parity_surgeon.graph.external_values`), not from the current directory.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.api import UsageError, did_you_mean, first_line, onnx_external, onnx_models
from parity_surgeon import graph as g

DEFAULT_FOLD_LIMIT = 64 << 20  # bytes; larger folded tensors stay computed at run time


@dataclass
class SanitizeReport:
    nodes_before: int = 0
    nodes_after: int = 0
    initializers_before: int = 0
    initializers_after: int = 0
    passes: int = 0
    shape_inference: str = "not run"
    overridden: dict[str, list] = field(default_factory=dict)
    removed_ops: dict[str, int] = field(default_factory=dict)  # op type -> count removed
    pass_nodes: list[tuple[int, int]] = field(default_factory=list)  # (nodes before, after) of each folding pass
    symbolic: bool = False  # onnxruntime's symbolic shape inference ran (else onnx.shape_inference, or none)
    symbolic_failed: bool = False  # it raised: the later passes use onnx.shape_inference without trying it again
    notes: list[str] = field(default_factory=list)  # one line each, for stderr
    verbose_notes: list[str] = field(default_factory=list)  # the same, only with --verbose
    upper_bounds: dict[str, int] = field(default_factory=dict)  # tensor -> bound set with a Min node

    def lines(self) -> list[str]:
        out = [f"nodes: {self.nodes_before} -> {self.nodes_after} | initializers: {self.initializers_before} -> {self.initializers_after}"]
        if self.passes:
            out.append(f"constant folding: {self.passes} pass(es)")
            out += [f"  Pass {i}: nodes {a} -> {b}" for i, (a, b) in enumerate(self.pass_nodes, 1)]
        if self.removed_ops:
            out.append("removed: " + ", ".join(f"{n} {op}" for op, n in sorted(self.removed_ops.items(), key=lambda kv: (-kv[1], kv[0]))))
        if self.overridden:
            out.append("input shapes: " + ", ".join(f"{k}:{v}" for k, v in self.overridden.items()))
        if self.upper_bounds:
            out.append("upper bounds: " + ", ".join(f"{k}<={v}" for k, v in self.upper_bounds.items()))
        out.append(f"shape inference: {self.shape_inference}")
        return out


def _count_ops(model: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def sanitize(
    model: Any,
    fold_constants: bool = False,
    cleanup: bool = False,
    toposort: bool = False,
    override_input_shapes: Mapping[str, tuple] | None = None,
    size_threshold: int | None = DEFAULT_FOLD_LIMIT,
    max_passes: int = 10,
    fold_shapes: bool = True,
    shape_inference: bool = True,
    base_dir: str | Path | None = None,
    *,
    partitioning: str | None = None,
    per_pass_shape_inference: bool = True,
    onnxruntime_shape_inference: bool = True,
    outputs: Sequence[str] = (),
    force_fallback: bool = False,
    upper_bounds: Mapping[str, int] | None = None,
    exclude_outputs: Sequence[str] = (),
    feed: Mapping[str, Any] | None = None,
) -> tuple[Any, SanitizeReport]:
    """Return a sanitized copy of ``model`` (path or ModelProto) and what changed; the input is not modified.

    ``base_dir``: the folder of ``model``'s external data when it was loaded lazily (``graph.load(path,
    lazy=True)``); the result's untouched weights are still references into it (write it with
    ``graph.save(..., base_dir=base_dir)``). Folded tensors are inside the result.

    ``partitioning``: graphsurgeon's folding partitions (None, ``basic``, ``recursive``): a part that fails to
    fold leaves the others folded. ``onnxruntime_shape_inference``: infer shapes with onnxruntime's symbolic
    shape inference where it applies (a model whose weights are all inside it), else ``onnx.shape_inference``.
    ``outputs``: the tensors to make the graph outputs (``["mark", "all"]``: every tensor). ``force_fallback``:
    shapes and dtypes of every tensor from one onnxruntime run on generated inputs (dynamic dims become
    those of the run). ``upper_bounds``: tensor -> bound (key ``""``: every tensor with an unbounded
    data-dependent shape) clamped by a ``Min`` node. ``exclude_outputs``: outputs to unmark (fnmatch patterns);
    ``feed``: the inputs of the ``force_fallback`` run (default: generated)."""
    import onnx

    original = g.load(model)
    work = onnx.ModelProto()
    work.CopyFrom(original)  # cheap for a lazy model: its weights are references
    report = SanitizeReport(len(work.graph.node), 0, len(work.graph.initializer))
    before_ops = _count_ops(work)

    def infer(m: Any) -> Any:
        # onnxruntime's symbolic inference runs once: its dims stay in the model's value_info, which onnx's own
        # inference keeps and propagates in the later passes. Run again after each folding pass, it cost
        # minutes on PP-OCR's detector (sympy simplifying the Resize chain's dims, ~1 min a run), for the same dims.
        # Where it raised, it is not tried again: on each corpus model where it raised (an assertion of its own, on
        # PP-OCR's classifier and both silero-vad models) it raised again after every folding pass, 0.3-0.4 s each
        symbolic = onnxruntime_shape_inference and not force_fallback and not report.symbolic and not report.symbolic_failed
        m, report.shape_inference = _infer(m, symbolic, report, in_place=True)  # each m is sanitize's own
        return m

    if outputs or exclude_outputs:
        marked = _expand_patterns(work, list(outputs)) if outputs else [vi.name for vi in work.graph.output]
        onnx_models.mark_outputs(work, marked, _expand_patterns(work, list(exclude_outputs), "--exclude-outputs"))
        if not work.graph.output:
            raise UsageError("--exclude-outputs: no graph output would be left")
    if override_input_shapes:
        work = _override_shapes(work, dict(override_input_shapes), report)
    if force_fallback:
        work = fallback_shapes(work, base_dir, report.notes, feed)
        report.shape_inference = "from one onnxruntime run (--force-fallback-shape-inference)"
    elif shape_inference:
        work = infer(work)
    if fold_constants or cleanup or toposort or outputs or exclude_outputs:
        per_pass = infer if shape_inference and per_pass_shape_inference and not force_fallback else None
        marked = bool(outputs) or bool(exclude_outputs)  # what no output needs goes
        work = _graphsurgeon_passes(
            work, original, report, fold_constants, cleanup or marked, toposort, size_threshold, max_passes, fold_shapes, per_pass, base_dir, partitioning
        )
        if shape_inference and not force_fallback:
            work = infer(work)
    if upper_bounds:
        work = set_upper_bounds(work if report.shape_inference.startswith("ok") else infer(work), upper_bounds, report)
        if shape_inference and not force_fallback:
            work = infer(work)
    _type_outputs(work)
    report.nodes_after, report.initializers_after = len(work.graph.node), len(work.graph.initializer)
    after_ops = _count_ops(work)
    report.removed_ops = {op: n - after_ops.get(op, 0) for op, n in before_ops.items() if n > after_ops.get(op, 0)}
    return g.keep_header(work, original), report


def _expand_patterns(model: Any, names: list[str], option: str = "--outputs") -> list[str]:
    """``--outputs`` names with fnmatch wildcards (``conv_*``), as Polygraphy's: each pattern that is not a
    tensor's own name becomes the tensors it matches, in graph order; one that matches none is refused."""
    if onnx_models.wants_all(names):
        return names
    produced = list(dict.fromkeys([t for node in model.graph.node for t in node.output if t] + [vi.name for vi in model.graph.input]))
    out: list[str] = []
    for name in names:
        if name in produced or not any(c in name for c in "*?["):
            out.append(name)
            continue
        hits = fnmatch.filter(produced, name)
        if not hits:
            raise UsageError(f"{option}: no tensor matches '{name}'")
        out += hits
    return list(dict.fromkeys(out))


def outputs_of_types(model: Any, op_types: Sequence[str]) -> list[str]:
    """``--outputs-by-type``: the output tensors of the nodes whose op type is one of ``op_types`` (any case), in
    graph order; a type no node has is refused, naming the closest op types the model has."""
    wanted = {t.lower() for t in op_types}
    present = {n.op_type.lower(): n.op_type for n in model.graph.node}
    for name in op_types:
        if name.lower() not in present:
            types = ", ".join(sorted(set(present.values())))
            raise UsageError(f"--outputs-by-type: the model has no {name} node{did_you_mean(name, present.values())}; op types: {types}")
    return [t for n in model.graph.node if n.op_type.lower() in wanted for t in n.output if t]


def _symbolic_blocker(model: Any) -> str | None:
    """Why onnxruntime's symbolic shape inference cannot run on ``model``, or None: it reads weights from the
    proto itself, so every weight must be inside it, and the model it sees (:func:`_shape_skeleton`, without
    its large weights) must serialize as one protobuf. Sizes are summed from dims: upb's ``ByteSize``
    serializes the whole model (0.5 s for ResNet-50's 100 MB)."""
    if any(onnx_external.is_external(t) for t in onnx_external.tensors(model)):
        return "the model keeps weights in external data"
    if onnx_models.inline_bytes(model) - _stripped_bytes(model) > onnx_external.PROTOBUF_LIMIT - (64 << 20):
        return "the model is past protobuf's 2 GiB limit"
    return None


# element types of shape values (Reshape's shape, Slice's starts, ...): their values are kept whatever their size
_SHAPE_TYPES = {6, 7}  # INT32, INT64
_STRIP = 4096  # bytes: main-graph initializers larger than this reach shape inference as dims and type only


def _strippable(t: Any) -> bool:
    return t.data_type not in _SHAPE_TYPES and onnx_external.nbytes(t) > _STRIP


def _stripped_bytes(model: Any) -> int:
    return sum(onnx_external.nbytes(t) for t in model.graph.initializer if _strippable(t))


def _shape_skeleton(model: Any) -> tuple[Any, dict[str, Any]]:
    """A copy of ``model`` whose large main-graph initializers (weights, not shape values) have name, type and
    dims but no data, and those initializers by name: shape inference reads the values of shape tensors only,
    and a model with its weights is serialized and parsed several times inside onnxruntime's symbolic
    inference (ResNet-50 after folding: 100 MB each time)."""
    import onnx

    skeleton = onnx.ModelProto()
    big: dict[str, Any] = {}
    onnx_models.copy_fields(model, skeleton, skip="graph")
    onnx_models.copy_fields(model.graph, skeleton.graph, skip="initializer")
    for t in model.graph.initializer:
        if _strippable(t) and t.name not in big:
            big[t.name] = t
            bare = skeleton.graph.initializer.add()
            bare.name, bare.data_type = t.name, t.data_type
            bare.dims.extend(t.dims)
        else:
            skeleton.graph.initializer.append(t)
    return skeleton, big


def _refill(inferred: Any, big: dict[str, Any]) -> Any:
    """The inferred skeleton with its stripped initializers' data back (each copied once from the original)."""
    for k, t in enumerate(inferred.graph.initializer):
        source = big.get(t.name)
        if source is not None and not t.raw_data and list(t.dims) == list(source.dims):
            inferred.graph.initializer[k].CopyFrom(source)
    return inferred


def _adopt(model: Any, inferred: Any, big: dict[str, Any]) -> Any:
    """``model`` given everything of the inferred skeleton but the initializers, which it keeps: the result
    :func:`_refill` gives, without copying the weights (only when the skeleton's initializers are the model's)."""
    def key(graph: Any) -> list[tuple[str, int, list[int]]]:
        return [(t.name, t.data_type, list(t.dims)) for t in graph.initializer]

    if key(inferred.graph) != key(model.graph):
        return _refill(inferred, big)
    for target, source, skip in ((model, inferred, "graph"), (model.graph, inferred.graph, "initializer")):
        for descriptor in target.DESCRIPTOR.fields:
            if descriptor.name != skip:
                target.ClearField(descriptor.name)
        onnx_models.copy_fields(source, target, skip=skip)
    return model


def _infer(model: Any, onnxruntime: bool, report: SanitizeReport, in_place: bool = False) -> tuple[Any, str]:
    """Shape inference: onnxruntime's symbolic shape inference where it applies and succeeds (it resolves
    data-dependent dims as named symbols), else ``onnx.shape_inference``. Each skip or failure is noted once.
    Symbolic inference sees the model without its large weights (:func:`_shape_skeleton`); ``in_place``: the
    result is ``model`` itself, which keeps its weights (no copy of them)."""
    if onnxruntime:
        blocker = _symbolic_blocker(model)
        if blocker is None:
            skeleton, big = _shape_skeleton(model)
            resolved = _onnx_resolves(skeleton)
            if resolved is not None:
                _note_once(report, "onnx's shape inference gave every tensor a type and fixed dims: onnxruntime's symbolic inference had nothing to add")
                return (_adopt(model, resolved, big) if in_place else _refill(resolved, big)), "ok"
            try:
                inferred = onnx_models.symbolic_shapes(skeleton)  # the model has no external data to find: _symbolic_blocker
            except Exception as exc:  # noqa: BLE001 - any failure falls back to onnx's inference
                blocker = f"it failed ({first_line(exc, 120)})"
                report.symbolic_failed = True
            else:
                if inferred is not None:
                    report.symbolic = True
                    return (_adopt(model, inferred, big) if in_place else _refill(inferred, big)), "ok"
                blocker = "it gave no model"
        _note_once(report, f"onnxruntime's symbolic shape inference skipped: {blocker}; used onnx.shape_inference")
    return g.infer_shapes(model)


def _note_once(report: SanitizeReport, note: str) -> None:
    """A -v note for the whole sanitize: inference runs once before folding and once after, with the same reason."""
    if note not in report.verbose_notes:
        report.verbose_notes.append(note)


def _onnx_resolves(skeleton: Any) -> Any | None:
    """``skeleton`` inferred by onnx's own shape inference (C++, milliseconds) when that leaves nothing to resolve:
    every node output a tensor of known type and fixed dims, no subgraphs. onnxruntime's symbolic inference (sympy's
    import and a Python pass over the nodes: most of a static model's sanitize) can add nothing there; else None."""
    import onnx

    graph = skeleton.graph
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in graph.node for a in n.attribute):
        return None
    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # noqa: BLE001 - onnxruntime's inference gets its chance
        return None
    graph = inferred.graph
    known = {vi.name: vi.type for vi in (*graph.value_info, *graph.output, *graph.input)}
    constants = {t.name for t in graph.initializer}
    for node in graph.node:
        for name in node.output:
            if not name or name in constants:
                continue
            kind = known.get(name)
            if kind is None or not kind.HasField("tensor_type") or not kind.tensor_type.elem_type or not kind.tensor_type.HasField("shape"):
                return None
            if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in kind.tensor_type.shape.dim):
                return None
    return inferred


def infer_shapes(model: Any, onnxruntime: bool = True) -> tuple[Any, str, bool, list[str]]:
    """Shape inference as sanitize runs it, for the other commands' ``--shape-inference``: returns the model,
    the status ("ok" or why not), whether onnxruntime's symbolic inference ran, and the notes on why it did not."""
    report = SanitizeReport()
    inferred, status = _infer(model, onnxruntime, report)
    return inferred, status, report.symbolic, report.verbose_notes


def _override_shapes(model: Any, shapes: dict[str, tuple], report: SanitizeReport) -> Any:
    """``--override-input-shapes``: graph inputs get the given shapes; a computed tensor named there becomes a
    graph input of that shape (what computed it, if nothing else needs it, is removed), as Polygraphy does."""
    import onnx_graphsurgeon as gs

    inputs = {vi.name for vi in model.graph.input}
    cut = {k: v for k, v in shapes.items() if k not in inputs}
    if cut:
        graph = gs.import_onnx(model)
        tensors = graph.tensors()
        for name in cut:
            if name not in tensors or isinstance(tensors[name], gs.Constant):
                known = ", ".join(sorted(inputs)) or "none"
                raise UsageError(f"--override-input-shapes: the model has no input '{name}' (nor such a computed tensor){did_you_mean(name, tensors)}; inputs: {known}")
            tensor = tensors[name]
            tensor.inputs.clear()
            if tensor.dtype is None:
                tensor.dtype = onnx_models.dtype_of(g.value_types(g.infer_shapes(model)[0]).get(name, (1, None))[0])
            graph.inputs.append(tensor)
            report.notes.append(f"--override-input-shapes: '{name}' was not a graph input; it is one now (what computed it is cut off)")
        graph.cleanup(remove_unused_graph_inputs=False)
        original = model
        model = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
    g.set_input_shapes(model, shapes)
    report.overridden = {k: list(v) for k, v in shapes.items()}
    return model


def fallback_shapes(model: Any, base_dir: str | Path | None = None, notes: list[str] | None = None, feed: Mapping[str, Any] | None = None) -> Any:
    """``--force-fallback-shape-inference``: run ``model`` once in onnxruntime on generated inputs with every
    tensor marked, and write what was seen as the shapes and dtypes of the inputs, outputs and every other
    tensor (dynamic dims become the run's: 1 where nothing else says, noted in ``notes``). ``feed``: the run's
    inputs (the data loader flags), instead of generated ones."""
    from onnx import helper

    from parity_surgeon.extractor import fallback_feed, observe

    produced = [t for node in model.graph.node for t in node.output if t]
    seen = observe(model, produced, dict(feed) if feed is not None else fallback_feed(model, notes), base_dir, with_feed=True)

    def info(name: str) -> Any:
        arr = seen[name]
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape))

    for group in (model.graph.input, model.graph.output):
        for vi in group:
            if vi.name in seen:
                vi.CopyFrom(info(vi.name))
    outs = {vi.name for vi in model.graph.output}
    del model.graph.value_info[:]
    model.graph.value_info.extend(info(t) for t in produced if t in seen and t not in outs)
    return model


def set_upper_bounds(model: Any, bounds: Mapping[str, int], report: SanitizeReport) -> Any:
    """``--set-unbounded-dds-upper-bound``: clamp each tensor whose value sets a data-dependent output size
    (the limit of a Range, the pads of a Pad, the sizes of a Resize, the repeats of a Tile, the shape of an
    Expand, when computed at run time) with a ``Min`` against its bound; ``bounds[""]`` is the bound of those
    not named. A named tensor is clamped even if it is not such a tensor. Needs inferred shapes."""
    import numpy as np
    import onnx_graphsurgeon as gs

    graph = gs.import_onnx(model)
    tensors = graph.tensors()
    for name in bounds:
        if name and name not in tensors:
            raise UsageError(f"--set-unbounded-dds-upper-bound: the model has no tensor '{name}'{did_you_mean(name, tensors)}")
    targets = [t.name for t in _unbounded_dds_tensors(graph)]
    targets += [n for n in bounds if n and n not in targets]
    for name in targets:
        bound = bounds.get(name, bounds.get(""))
        tensor = tensors[name]
        if bound is None or len(tensor.inputs) != 1:
            continue
        producer = tensor.inputs[0]
        raw = gs.Variable(f"{name}_unbounded", dtype=tensor.dtype, shape=tensor.shape)
        producer.outputs[producer.outputs.index(tensor)] = raw
        limit = gs.Constant(f"{name}_upper_bound", np.array(bound, dtype=tensor.dtype or np.int64))
        graph.nodes.append(gs.Node("Min", name=f"{name}_upper_bound_min", inputs=[raw, limit], outputs=[tensor]))
        report.upper_bounds[name] = bound
    if not report.upper_bounds:
        report.notes.append("--set-unbounded-dds-upper-bound: no tensor with an unbounded data-dependent shape found")
    graph.cleanup(remove_unused_graph_inputs=False).toposort()
    return g.keep_header(gs.export_onnx(graph, do_type_check=False), model)


_DDS_INPUTS = {"Range": 1, "Pad": 1, "Resize": 3, "Tile": 1, "Expand": 1}  # op -> input whose value sets the output size


def _unbounded_dds_tensors(graph: Any) -> list[Any]:
    """Run-time inputs that set the size of an output whose shape is data dependent: a node whose output has
    a dim that is unknown or a symbol no earlier tensor had, reading such an input not already clamped by Min."""
    import onnx_graphsurgeon as gs

    graph.toposort()
    symbols = {d for t in graph.inputs for d in (t.shape or []) if isinstance(d, str)}
    found: list[Any] = []
    for node in graph.nodes:
        new = False
        for out in node.outputs:
            for d in out.shape if out.shape is not None else [None]:
                if d is None or (isinstance(d, str) and d not in symbols):
                    new = True
                    if isinstance(d, str):
                        symbols.add(d)
        index = _DDS_INPUTS.get(node.op)
        if not new or index is None or index >= len(node.inputs):
            continue
        value = node.inputs[index]
        if not isinstance(value, gs.Constant) and value.inputs and value.inputs[0].op != "Min" and value not in found:
            found.append(value)
    return found


def _type_outputs(model: Any) -> None:
    """Graph outputs (newly marked ones) get the types inference found for them, where they carry none."""
    known = {vi.name: vi for vi in model.graph.value_info if vi.type.tensor_type.elem_type}
    for vi in model.graph.output:
        if not vi.type.tensor_type.elem_type and vi.name in known:
            vi.CopyFrom(known[vi.name])


def _graphsurgeon_passes(work, original, report, fold, cleanup, toposort, size_threshold, max_passes, fold_shapes, infer, base_dir=None, partitioning=None) -> Any:
    import onnx_graphsurgeon as gs

    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
    references: dict[str, Any] = {}
    if fold and base_dir is not None:
        references = _read_foldable(work, base_dir, fold_shapes)
    graph = gs.import_onnx(work)
    g.external_values(graph, base_dir)
    if fold:
        count = len(graph.nodes)
        for _ in range(max_passes):
            report.passes += 1
            # flatten_subgraphs=False: graphsurgeon's inlining of an If with a constant condition left readers
            # of the If's outputs dangling (silero-vad: the folded model did not load)
            with _one_thread_sessions():
                graph.fold_constants(
                    fold_shapes=fold_shapes, partitioning=partitioning, size_threshold=size_threshold or None, error_ok=True, flatten_subgraphs=False
                ).cleanup()
            report.pass_nodes.append((count, len(graph.nodes)))
            if len(graph.nodes) == count:
                break
            count = len(graph.nodes)
            # newly constant shapes let inference resolve more, which lets the next pass fold more; a graph whose
            # every tensor already has a type and a static shape has nothing left to resolve
            if infer is not None and not _all_static(graph):
                model = infer(g.keep_header(gs.export_onnx(graph, do_type_check=False), original))
                graph = gs.import_onnx(model)
                g.external_values(graph, base_dir)
    if cleanup or fold:
        graph.cleanup(remove_unused_graph_inputs=False)
    if toposort or fold:
        graph.toposort()
    out = g.keep_header(gs.export_onnx(graph, do_type_check=False), original)
    _restore_references(out, references)
    return out


@contextlib.contextmanager
def _one_thread_sessions() -> Iterator[None]:
    """graphsurgeon evaluates constant subgraphs in onnxruntime sessions made with default options: a thread pool
    of one thread per core, whose start costs more than the evaluation on many cores, and warnings of its graph
    optimizers on the user's terminal (silero-vad: "UnsqueezeElimination cannot remove node ..." twice, about
    subgraphs the user never asked to run). Sessions made meanwhile without options get one thread and log
    errors only (same kernels and graph optimizations, so the same values)."""
    import onnxruntime as ort

    real = ort.InferenceSession

    class OneThread(real):  # type: ignore[misc,valid-type]
        def __init__(self, model: Any, sess_options: Any = None, *args: Any, **kwargs: Any) -> None:
            if sess_options is None:
                sess_options = ort.SessionOptions()
                sess_options.intra_op_num_threads = sess_options.inter_op_num_threads = 1
                sess_options.log_severity_level = 3
            super().__init__(model, sess_options, *args, **kwargs)

    ort.InferenceSession = OneThread
    try:
        yield
    finally:
        ort.InferenceSession = real


def _all_static(graph: Any) -> bool:
    """Every tensor of an onnx-graphsurgeon graph (no subgraphs) has a type and a shape of fixed dims."""
    import onnx_graphsurgeon as gs

    if any(isinstance(v, gs.Graph) or (isinstance(v, list) and any(isinstance(x, gs.Graph) for x in v)) for n in graph.nodes for v in n.attrs.values()):
        return False
    for t in graph.tensors().values():
        if isinstance(t, gs.Variable) and (t.dtype is None or t.shape is None or not all(isinstance(d, int) and d >= 0 for d in t.shape)):
            return False
    return True


_NO_FOLD = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}  # graphsurgeon never folds these


def foldable_external(model: Any, fold_shapes: bool = True) -> set[str]:
    """Names of the external tensors that constant folding may read: inputs of nodes all of whose inputs are
    constant (initializers, Constant outputs, with ``fold_shapes`` also ``Shape`` outputs, whose input shape
    may become static), transitively, in subgraphs too (a subgraph sees its outer scope's constants)."""
    external = {t.name for t in onnx_external.tensors(model) if onnx_external.is_external(t)}
    wanted: set[str] = set()

    def walk(graph: Any, outer: set[str]) -> None:
        constant = set(outer) | {i.name for i in graph.initializer}
        nodes = list(graph.node)
        for i in onnx_models.topological_order(nodes):
            node = nodes[i]
            for attr in node.attribute:  # subgraphs fold on their own, with what is constant here
                for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    walk(sub, constant)
            reads = onnx_models.node_inputs(node)
            if node.op_type == "Constant" or (fold_shapes and node.op_type == "Shape"):
                constant.update(o for o in node.output if o)
            elif node.op_type not in _NO_FOLD and all(t in constant for t in reads):
                constant.update(o for o in node.output if o)
                wanted.update(t for t in reads if t in external)

    walk(model.graph, set())
    return wanted


def _read_foldable(model: Any, base_dir: str | Path, fold_shapes: bool) -> dict[str, Any]:
    """Bring the external tensors folding may read inside ``model``; returns copies of their references."""
    import onnx

    names = foldable_external(model, fold_shapes)
    references = {}
    for tensor in onnx_external.tensors(model):
        if tensor.name in names and onnx_external.is_external(tensor):
            references[tensor.name] = onnx.TensorProto()
            references[tensor.name].CopyFrom(tensor)  # a few bytes: the reference
    if names:
        onnx_external.load_values(model, names, base_dir)
    return references


def _restore_references(model: Any, references: Mapping[str, Any]) -> None:
    """Tensors read in for folding that are still in the model unchanged become references to their file again
    (they are written from there, and the model stays small)."""
    if not references:
        return
    for tensor in onnx_external.tensors(model):
        ref = references.get(tensor.name)
        if (
            ref is not None
            and not onnx_external.is_external(tensor)
            and tensor.data_type == ref.data_type
            and list(tensor.dims) == list(ref.dims)
            and len(tensor.raw_data) == onnx_external.nbytes(ref)
        ):
            tensor.Clear()
            tensor.CopyFrom(ref)


class SanitizeOnnx:
    """Lazy loader: ``SanitizeOnnx(OnnxFromPath("m.onnx"), fold_constants=True)()`` -> ModelProto."""

    def __init__(self, model: Any, **options: Any) -> None:
        self.model, self.options = model, options

    def __call__(self) -> Any:
        from parity.api import invoke_if_callable

        model, _ = invoke_if_callable(self.model)
        return sanitize(model, **self.options)[0]
