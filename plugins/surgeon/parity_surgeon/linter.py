"""``parity check lint``: the ONNX checker plus the problems users actually hit, one line each.

Rules (``rule`` in the JSON report): ``checker`` (onnx.checker), ``shape-inference`` (strict inference
errors), ``dangling-input`` (a node reads a tensor nothing produces), ``dangling-output`` (a graph output
nothing produces), ``duplicate-tensor`` (two producers of one name), ``duplicate-node-name``,
``unused-initializer``, ``unused-input``, ``dead-node`` (computes nothing that reaches an output),
``unsorted`` (nodes out of topological order), ``inference`` (the model loads in onnxruntime but fails to
run on the given inputs), ``opset`` / ``ir-version`` (beyond what the installed
onnxruntime loads: probed by loading an empty model with the same header), ``onnxruntime`` (the model
fails to load in onnxruntime for another reason, e.g. an op it does not implement).

No weight byte is read unless the model runs (``feed``; with external data, only with ``run_external``):
external tensors stay references (their files are checked to exist and be long enough, in
``external_data_dir`` or the model's folder); the checker runs on the model's path, or on a graph-only copy
beside sparse stand-ins for the data files when the data is elsewhere or ignored; the onnxruntime load gets
the path or the graph-only message plus the data's folder. ``ignore_external_data``: the structure alone (the
data files need not exist); the onnxruntime load, which needs the weights, is skipped and
:attr:`LintReport.skipped` says so.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from parity.api import BackendError, UsageError, module_available, onnx_external, onnx_models
from parity_surgeon import graph as g

ERROR, WARNING = "error", "warning"


@dataclass
class LintIssue:
    level: str
    rule: str
    message: str
    node: str | None = None
    tensor: str | None = None

    def line(self) -> str:
        where = f" (node '{self.node}')" if self.node else ""
        return f"{self.level.upper():<7} [{self.rule}] {self.message}{where}"

    def entry(self) -> dict[str, Any]:
        """The issue as Polygraphy's lint entry (its levels and sources)."""
        level = "exception" if self.level == ERROR else self.level
        entry: dict[str, Any] = {"level": level, "source": _SOURCES.get(self.rule, "onnx_graphsurgeon"), "message": self.message}
        if self.node:
            entry["nodes"] = [self.node]
        return entry


# Polygraphy's lint entry sources by Parity's rule (the structural rules are its onnx_graphsurgeon checks)
_SOURCES = {
    "checker": "onnx_checker", "shape-inference": "onnx_checker",
    "onnxruntime": "onnxruntime", "inference": "onnxruntime", "opset": "onnxruntime", "ir-version": "onnxruntime",
}  # fmt: skip


@dataclass
class LintReport:
    model: str
    issues: list[LintIssue] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # checks not run, and why (one line each)
    nodes: list[str] = field(default_factory=list)  # every node's name (its label where it has none), in graph order
    ran: bool = False  # the model ran once in onnxruntime, without an error

    @property
    def passed(self) -> bool:
        return not any(i.level == ERROR for i in self.issues)

    def add(self, level: str, rule: str, message: str, node: str | None = None, tensor: str | None = None) -> None:
        self.issues.append(LintIssue(level, rule, message, node, tensor))

    def to_json(self) -> dict[str, Any]:
        """Parity's report (``issues``, ``summary`` counts) with Polygraphy's keys beside it: ``lint_entries`` (level
        exception/warning, source, message, nodes) and the ``summary``'s ``passing`` and ``failing`` nodes (a
        node passes when the model ran in onnxruntime and no error names it; one an error names fails)."""
        counts: dict[str, Any] = {lvl: sum(1 for i in self.issues if i.level == lvl) for lvl in (ERROR, WARNING)}
        failing = list(dict.fromkeys(i.node for i in self.issues if i.level == ERROR and i.node))
        counts["passing"] = [n for n in self.nodes if n not in failing] if self.ran else []
        counts["failing"] = failing
        data = {"format": "parity-lint", "version": 1, "model": self.model, "passed": self.passed, "summary": counts, "issues": [asdict(i) for i in self.issues]}
        data["lint_entries"] = [i.entry() for i in self.issues]
        if self.skipped:
            data["skipped"] = list(self.skipped)
        return data


def _first_line(exc: BaseException) -> str:
    """The message on one line: the checker spreads one problem over several lines."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text[:300] or type(exc).__name__


def lint(
    model: Any,
    label: str | None = None,
    onnxruntime: bool = True,
    *,
    external_data_dir: str | Path | None = None,
    ignore_external_data: bool = False,
    feed: Mapping[str, Any] | None = None,
    run_external: bool = False,
    providers: Sequence[str] = (),
    graph_optimization_level: str | None = None,
) -> LintReport:
    """Lint ``model`` (a path or ModelProto) without reading its weights. ``external_data_dir``: the folder of
    a path's external data (default its folder); ``ignore_external_data``: structure only (see the module).
    ``feed``: inputs to run the model on once after it loads in onnxruntime, as Polygraphy's lint does (an
    error that only running shows is an ``inference`` issue); None: load only. A model whose weights are in
    external data files runs only with ``run_external`` (running reads every weight; lint otherwise reads none).
    ``providers``/``graph_optimization_level``: the onnxruntime session's, as ``--onnxrt`` takes them (default:
    the CPU provider, no graph optimization)."""
    import onnx

    path = Path(model) if isinstance(model, (str, Path)) else None
    proto = g.load(model, lazy=True, external_data_dir=external_data_dir, ignore_external_data=ignore_external_data)
    base = None if path is None or ignore_external_data else onnx_models.data_dir(path, external_data_dir)
    report = LintReport(label or (str(model) if path is not None else "<model>"))
    report.nodes = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(proto.graph.node)]
    try:
        _check(proto, path, base)
    except Exception as exc:  # ValidationError, or protobuf errors on malformed files
        report.add(ERROR, "checker", _first_line(exc))
    try:
        onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    except Exception as exc:
        report.add(ERROR, "shape-inference", _first_line(exc))
    _structure(proto, report)
    if onnxruntime and module_available("onnxruntime"):
        if ignore_external_data and onnx_external.has_external(proto):
            report.skipped.append("the onnxruntime load (it needs the weights; --ignore-external-data)")
        else:
            session = _onnxruntime(proto, report, path, base, providers, graph_optimization_level)
            if session is not None and feed is not None:
                if run_external or not onnx_external.has_external(proto):
                    _run(session, feed, report)
                else:
                    report.skipped.append("the onnxruntime run (it reads every weight, and these are in external data files: a data loader flag such as --seed runs it)")
    return report


def _run(session: Any, feed: Mapping[str, Any], report: LintReport) -> None:
    """One inference; a failure names the node onnxruntime names (``... node. Name:'x'``)."""
    inputs = dict(feed)
    try:
        session.run(None, inputs)
    except Exception as exc:
        message = _first_line(exc)
        named = re.search(r"Name:'([^']*)'", message)
        report.add(ERROR, "inference", f"onnxruntime cannot run the model: {message}", named.group(1) if named else None)
    else:
        report.ran = True


def _check(proto: Any, path: Path | None, base: Path | None) -> None:
    """``onnx.checker.check_model`` without reading a weight: on the path when the external data is beside the
    model (the checker only looks at the data files' existence), else on a graph-only copy in a temporary
    folder beside sparse stand-ins of the data files (holes, no bytes), so the checker's own rules about
    locations still apply."""
    import onnx

    external = [t for t in onnx_external.tensors(proto) if onnx_external.is_external(t)]
    if not external:
        onnx.checker.check_model(proto)
        return
    if path is not None and base is not None and os.path.realpath(base) == os.path.realpath(path.parent):
        onnx.checker.check_model(str(path))
        return
    with tempfile.TemporaryDirectory(prefix="parity-lint-") as folder:
        sizes: dict[str, int] = {}
        for t in external:
            location, offset, length = onnx_external.external_info(t)
            end = offset + (length if length is not None else onnx_external.nbytes(t))
            sizes[location] = max(sizes.get(location, 0), end)
        for location, size in sizes.items():
            if not location or os.path.isabs(location) or ".." in Path(location).parts:
                continue  # the checker reports such a location itself
            stand_in = Path(folder, location)
            stand_in.parent.mkdir(parents=True, exist_ok=True)
            with open(stand_in, "wb") as handle:
                handle.truncate(size)  # a hole: no disk blocks, no weight bytes
        copy = Path(folder, "model.onnx")
        copy.write_bytes(onnx_external.serialize(proto, "the model"))
        onnx.checker.check_model(str(copy))


def _subgraph_reads(node: Any) -> set[str]:
    return set(onnx_models.node_inputs(node)) - set(node.input)


def _structure(model: Any, report: LintReport) -> None:
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    inputs = [vi.name for vi in graph.input]
    produced: dict[str, str] = {}
    names: dict[str, int] = {}
    available = set(inputs) | inits
    for index, node in enumerate(graph.node):
        label = node.name or f"{node.op_type}_{index}"
        if node.name:
            names[node.name] = names.get(node.name, 0) + 1
        for t in node.output:
            if not t:
                continue
            if t in produced:
                report.add(ERROR, "duplicate-tensor", f"tensor '{t}' is produced by both '{produced[t]}' and '{label}'", label, t)
            elif t in inputs or t in inits:
                report.add(ERROR, "duplicate-tensor", f"tensor '{t}' is both a graph input/initializer and an output of '{label}'", label, t)
            produced[t] = label
    all_outputs = set(produced)
    unsorted_reported = False
    for index, node in enumerate(graph.node):
        label = node.name or f"{node.op_type}_{index}"
        for t in [*node.input, *_subgraph_reads(node)]:
            if not t:
                continue
            if t not in all_outputs and t not in available:
                report.add(ERROR, "dangling-input", f"input '{t}' is not produced by any node, graph input or initializer", label, t)
            elif t in all_outputs and t not in available and not unsorted_reported:
                report.add(WARNING, "unsorted", f"'{label}' reads '{t}' before it is produced; run: parity surgeon sanitize --toposort", label, t)
                unsorted_reported = True
        available.update(o for o in node.output if o)
    for name, count in names.items():
        if count > 1:
            report.add(WARNING, "duplicate-node-name", f"{count} nodes are named '{name}'", name)
    outputs = {vi.name for vi in graph.output}
    for t in outputs:
        if t not in all_outputs and t not in inputs and t not in inits:
            report.add(ERROR, "dangling-output", f"graph output '{t}' is not produced by any node", tensor=t)
    used = {t for n in graph.node for t in [*n.input, *_subgraph_reads(n)] if t} | outputs
    for init in graph.initializer:
        if init.name not in used:
            report.add(
                WARNING, "unused-initializer", f"initializer '{init.name}' ({_size(init)}) is never read; run: parity surgeon sanitize --cleanup", tensor=init.name
            )
    for name in inputs:
        if name not in used and name not in inits:
            report.add(WARNING, "unused-input", f"graph input '{name}' is never read", tensor=name)
    _dead_nodes(model, outputs, report)


def _size(init: Any) -> str:
    n = 1
    for d in init.dims:
        n *= d
    return f"{n} element(s)"


def _dead_nodes(model: Any, outputs: set[str], report: LintReport) -> None:
    """Nodes from which no graph output is reachable (reverse reachability from the outputs)."""
    prods = {t: n for n in model.graph.node for t in n.output if t}
    live: set[int] = set()
    stack = list(outputs)
    seen: set[str] = set()
    while stack:
        t = stack.pop()
        if t in seen or t not in prods:
            continue
        seen.add(t)
        node = prods[t]
        live.add(id(node))
        stack.extend(onnx_models.node_inputs(node))
    dead = [n for n in model.graph.node if id(n) not in live]
    for i, node in enumerate(dead[:20]):
        report.add(
            WARNING, "dead-node", f"'{node.name or node.op_type}' ({node.op_type}) computes nothing that reaches a graph output", node.name or f"{node.op_type}_{i}"
        )
    if len(dead) > 20:
        report.add(WARNING, "dead-node", f"... and {len(dead) - 20} more dead node(s); run: parity surgeon sanitize --cleanup")


_PROBES: dict[tuple, str | None] = {}


def _probe_header(model: Any) -> tuple[str, str] | None:
    """Load an empty model with the same IR version and opsets: isolates header problems from op problems."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    key = (model.ir_version, tuple((o.domain, o.version) for o in model.opset_import))
    if key not in _PROBES:
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            "probe",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        probe = helper.make_model(graph, opset_imports=list(model.opset_import))
        probe.ir_version = model.ir_version
        if not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
            probe.opset_import.append(onnx.helper.make_opsetid("", 17))
        options = ort.SessionOptions()
        options.log_severity_level = 4
        try:
            ort.InferenceSession(probe.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
            _PROBES[key] = None
        except Exception as exc:
            _PROBES[key] = _first_line(exc)
    problem = _PROBES[key]
    if problem is None:
        return None
    rule = "ir-version" if "IR version" in problem or "ir_version" in problem.lower() else "opset"
    return rule, problem


def _onnxruntime(
    model: Any, report: LintReport, path: Path | None = None, base: Path | None = None, providers: Sequence[str] = (), level: str | None = None
) -> Any:
    """Load the model in onnxruntime's CPU provider: from the path when its data is beside it, else from the
    graph-only message plus the data's folder (never from a message holding the weights). Returns the
    session, or None when it did not load. ``providers``/``level`` given: the session the onnxrt backend makes
    with them (:class:`parity_onnxrt.api.SessionFromOnnx`, its partial provider names and levels)."""
    import onnxruntime as ort

    header = _probe_header(model)
    if header:
        rule, problem = header
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        report.add(ERROR, rule, f"onnxruntime {ort.__version__} cannot load IR version {model.ir_version} / opsets {opsets}: {problem}")
        return None
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # no pre-packing: MatMul kernels would copy every weight into packed buffers (as much memory as the
    # weights); lint runs the model at most once, which needs no packed copies
    options.add_session_config_entry("session.disable_prepacking", "1")
    try:
        if providers or level:
            return _backend_session(str(path) if path is not None and base is not None else model, base, providers, level)
        # a path onnxruntime cannot take (not UTF-8: its binding encodes str paths so) goes as the model's bytes
        if path is not None and base is not None and os.path.realpath(base) == os.path.realpath(path.parent) and _utf8(str(path)):
            source: Any = str(path)
        else:
            source, entries = onnx_external.runtime_bytes(model, base)
            for key, value in entries.items():
                options.add_session_config_entry(key, value)
        return ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
    except UsageError:
        raise
    except Exception as exc:
        if not any(i.level == ERROR and i.rule != "onnxruntime" for i in report.issues):
            report.add(ERROR, "onnxruntime", f"onnxruntime {ort.__version__} cannot load the model: {_first_line(exc)}")
    return None


def _backend_session(model: Any, base: Path | None, providers: Sequence[str], level: str | None) -> Any:
    """The onnxrt backend's session of ``model`` (a path, or a ModelProto whose data is in ``base``) with
    ``providers`` and ``level``; a provider onnxruntime lacks is a usage error, not the model's."""
    from parity_onnxrt.api import SessionFromOnnx  # here: only --providers/--graph-optimization-level need it

    loader = SessionFromOnnx(model, providers=list(providers) or None, graph_optimization_level=level or "disable", log_severity_level=4, prepack=False, base_dir=base)
    try:
        return loader()
    except BackendError as exc:
        if "no provider matching" in str(exc):
            raise UsageError(f"--providers: {exc}") from None
        raise


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
