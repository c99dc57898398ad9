"""``Reducer``: the Python API of ``parity debug reduce`` (and the engine behind the command).

    from parity_reduce import Reducer

    result = Reducer("model.onnx", predicate=lambda model: still_fails(model)).run()
    result.save("reduced.onnx")          # atomically
    print(result.nodes, result.checks)

``predicate(candidate: onnx.ModelProto) -> bool`` returns True while the failure still shows. The CLI
passes a :class:`parity.debug.DebugSession` instead, whose check runs the ``--check`` command on the
file each iteration writes.

Models with external data (past 2 GiB included) are loaded lazily: the weights stay in their files, a
candidate is a graph whose tensors refer to them, and every check's candidate file shares one copy of them
(a reflink clone where the filesystem has them) in a private work folder (:mod:`parity_reduce.external`);
nothing serializes the weights into one protobuf message. A predicate gets such candidates as they are:
their external tensors resolve in ``Reducer.base_dir`` (run one with
``parity.api.runtime_bytes(candidate, reducer.base_dir)``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from parity.api import (
    Candidate,
    CommandCheck,
    DataLoader,
    DebugSession,
    ExitCode,
    ExternalData,
    Iteration,
    ModelError,
    Oracle,
    OriginalNotFailing,
    ParityError,
    PredicateCheck,
    SavedModel,
    Summary,
    UsageError,
    counted,
    first_line,
    get_registry,
    onnx_external,
    onnx_models,
    save_model,
    subset_key,
    write_bytes_atomic,
)
from parity.api import warn as print_warning
from parity_reduce.external import CandidateFiles, clone_file
from parity_reduce.graph import GraphIndex, Reference, against_reference, cast_float_feeds, prepare, run_reference, unfeedable
from parity_reduce.strategies import REDUCE_DEFAULT_MODE

# where cut tensors get their types: ONNX shape inference, then the reference run (default); the reference run
# only (Polygraphy's --no-shape-inference); the reference run only, and it must succeed (--force-fallback-shape-inference)
SHAPE_INFERENCE = ("onnx", "none", "fallback")
SAVE_AT_ONCE = 256 << 20  # bytes of weights: an improvement this small is written to save_best as soon as found


class NotFailing(ParityError):
    """The full model does not fail the check: there is nothing to reduce."""

    exit_code = ExitCode.USAGE


@dataclass
class ReduceResult:
    model: onnx.ModelProto
    indices: list[int]
    nodes: list[str]
    summary: Summary
    index: GraphIndex
    reference: Reference | None
    min_good: onnx.ModelProto | None = None
    history: list[tuple[frozenset[int], bool]] = field(default_factory=list)
    stopped: str | None = None  # why the search stopped early (--max-checks / --max-time), None when it completed
    base_dir: Path | None = None  # where the external tensors of ``model`` and ``min_good`` resolve
    golden: Reference | None = None  # the outputs' expected values (the --reference-model's run), else ``reference``

    @property
    def checks(self) -> int:
        return self.summary.total

    def save(self, path: str | Path, external: ExternalData | None = None) -> SavedModel:
        """Write the minimal model with its weights only (``save_model``: model and data files together,
        validated on the path by the full checker and an onnxruntime load, then renamed into place; a minimal
        model the user cannot open answers nothing: that is a ModelError, exit 3). ``external``: the
        ``--save-external-data`` flags; without them the weights go inside unless that would pass 2 GiB."""
        what = f"the minimal model ({counted(len(self.nodes), 'node')})"
        return save_model(self.model, path, base_dir=self.base_dir, external=external, what=what, missing_kernels_ok=True)

    def save_min_good(self, path: str | Path, external: ExternalData | None = None) -> SavedModel:
        """Write ``min_good`` (Polygraphy's --min-good) the same way."""
        assert self.min_good is not None
        return save_model(self.min_good, path, base_dir=self.base_dir, external=external, what="the largest passing model", missing_kernels_ok=True)

    def inputs(self) -> list[dict[str, np.ndarray]]:
        """Per-sample feeds for the reduced model's inputs, from the reference run."""
        names = [i.name for i in self.model.graph.input if i.name not in {w.name for w in self.model.graph.initializer}]
        return self.reference.feeds(names) if self.reference else []

    def expected(self) -> list[dict[str, np.ndarray]]:
        """Per-sample values its outputs had in the full model (the reference run)."""
        names = [o.name for o in self.model.graph.output]
        expected = self.golden or self.reference
        return expected.feeds(names) if expected and all(expected.has(n) for n in names) else []


def load_model(model: str | Path | onnx.ModelProto, external_data_dir: str | Path | None = None) -> onnx.ModelProto:
    """A ModelProto as given, or the file loaded lazily: external weights stay in their files (each reference
    checked to resolve, in ``external_data_dir`` or the model's folder)."""
    if isinstance(model, onnx.ModelProto):
        return model
    return onnx_models.load(str(model), load_external_data=False, external_data_dir=external_data_dir)


def data_dir_of(model: str | Path | onnx.ModelProto, external_data_dir: str | Path | None = None) -> Path:
    """The folder a model's external data locations are relative to (``--external-data-dir``, else the
    model file's folder; the working directory for a ModelProto)."""
    if isinstance(model, onnx.ModelProto):
        return Path(external_data_dir) if external_data_dir is not None else Path(".")
    return Path(onnx_models.data_dir(str(model), external_data_dir))


def work_near(session: DebugSession | None) -> Path | None:
    """Where a session's candidates go: the --iter-artifact's folder; None for a predicate (nothing written)."""
    if session is None or isinstance(session.check, PredicateCheck):
        return None
    return Path(session.iter_artifact).parent


def make_reference(
    model: onnx.ModelProto, inputs: Sequence[Mapping[str, np.ndarray]] | None, warn: Callable[[str], None], base_dir: str | Path | None = None
) -> Reference | None:
    """Run the prepared model once per sample; ``None`` (with a warning) when onnxruntime cannot."""
    if inputs is None:
        inputs = list(DataLoader(onnx_models.graph_inputs(model)))
    inputs, casts = cast_float_feeds(model, inputs)
    if casts:
        warn(f"casting inputs to the float types the model expects, as parity run does: {', '.join(casts)}")
    try:
        return run_reference(model, inputs, base_dir)
    except ParityError:
        raise
    except Exception as exc:
        warn(f"reference run with onnxruntime failed ({first_line(exc, 200)}); cut tensors get types from shape inference and no values")
        return None


class Search:
    """What reduce and precision share: a subset -> model builder, a session, a strategy, an oracle."""

    def __init__(
        self,
        session: DebugSession,
        build: Callable[[frozenset[int]], onnx.ModelProto],
        *,
        iter_inputs: str | None = None,
        inputs_for: Callable[[onnx.ModelProto], list[dict[str, np.ndarray]]] | None = None,
        describe: Callable[[frozenset[int]], str] = lambda s: counted(len(s), "node"),
        files: CandidateFiles | None = None,
        iter_expected: str | None = None,
        expected_for: Callable[[onnx.ModelProto], list[dict[str, np.ndarray]]] | None = None,
    ) -> None:
        self.iter_expected = iter_expected
        self.expected_for = expected_for
        self.session = session
        self.files = files  # a model with external data: candidates are written there (parity_reduce.external)
        self.build = build
        self.iter_inputs = iter_inputs
        self.inputs_for = inputs_for
        self.describe = describe
        self.history: list[tuple[frozenset[int], bool]] = []
        self.outcomes: dict[frozenset[int], str] = {}  # subset -> good / bad / unresolved

    def candidate(self, subset: frozenset[int]) -> Candidate:
        def make_artifact(it: Iteration) -> str | None:
            model = self.build(subset)
            it.payload = model
            if isinstance(self.session.check, PredicateCheck):
                return None
            written = None
            if self.files is not None:  # the check gets the candidate in the work folder, beside the shared weights
                written = str(self.files.write(model, Path(it.artifact).name))
            else:
                write_bytes_atomic(it.artifact, onnx_external.serialize(model, "the candidate"))
            if self.iter_inputs and self.inputs_for:
                from parity.api import save_inputs

                save_inputs(self.inputs_for(model), it.slot_path(self.iter_inputs))
            if self.iter_expected and self.expected_for:
                save_expected(self.expected_for(model), it.slot_path(self.iter_expected))
            return written

        return Candidate(subset_key(subset), make_artifact, {"label": self.describe(subset), "size": len(subset)})

    def oracle(self, interesting_if_bad: bool, closure: Callable[[frozenset[int]], frozenset[int]] | None = None, empty: bool | None = False) -> Oracle:
        oracle = Oracle(self.session, self.candidate, interesting_if_bad=interesting_if_bad, closure=closure, empty=empty)
        oracle.on_result = lambda subset, hit: self.history.append((subset, hit))
        self.outcomes = oracle.verdicts
        return oracle

    def original(self, subset: frozenset[int], what: str) -> None:
        """Check the unchanged input first (its failure signature defines bad); stop if it does not fail."""
        try:
            self.session.original(self.candidate(subset), what)
        except OriginalNotFailing as exc:
            raise NotFailing(str(exc)) from None


def save_expected(samples: Sequence[Mapping[str, np.ndarray]], path: str) -> None:
    """Per-sample expected outputs in Parity's results format (what ``parity run --load-outputs`` reads)."""
    from parity.api import IterationResult, RunResults, save_results

    save_results(RunResults([("reference", [IterationResult(dict(e)) for e in samples])]), path)


def model_outputs_of(expected: Reference | None) -> Callable[[onnx.ModelProto], list[dict[str, np.ndarray]]]:
    """A candidate's expected outputs: those with a value in ``expected`` (the reference model's run)."""

    def outputs(model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
        names = [o.name for o in model.graph.output if expected is not None and expected.has(o.name)]
        return expected.feeds(names) if expected else []

    return outputs


def model_inputs_of(reference: Reference | None) -> Callable[[onnx.ModelProto], list[dict[str, np.ndarray]]]:
    def inputs(model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
        weights = {w.name for w in model.graph.initializer}
        return reference.feeds([i.name for i in model.graph.input if i.name not in weights]) if reference else []

    return inputs


class Reducer:
    """Shrinks a failing ONNX model to a small failing subgraph (see the module docstring).

    :param model: path or ``onnx.ModelProto`` (never modified).
    :param predicate: ``f(candidate_model) -> bool``, True while it still fails; or pass ``session``.
    :param mode: a strategy name (``staged``, the default, ``dichotomic``, ``quickxplain``, ``ddmin``, ``bisect``,
        ``linear``, or one a plugin registers).
    :param inputs: feeds (one dict per sample) for the reference run; random data if ``None``.
    :param cut: ``input`` (cut tensors become graph inputs) or ``constant`` (frozen to reference values).
    :param reduce_inputs/reduce_outputs: ``False`` keeps the graph inputs / outputs (the model's start / end).
    :param external_data_dir: the folder of the model's external data (default: the model file's folder).
    :param save_best: write improvements there as the search finds them (see :meth:`_saver`: models with more
        than 256 MiB of weights only when they halve the last one written).
    :param external: how ``save_best`` writes (the ``--save-external-data`` flags).

    A model with external data is loaded lazily and never copied: see the module docstring. Call
    :meth:`close` (or use the Reducer as a context manager) to remove the candidates' work folder at once;
    it also goes when the Reducer is collected.
    """

    def __init__(
        self,
        model: str | Path | onnx.ModelProto,
        predicate: Callable[[onnx.ModelProto], bool] | None = None,
        *,
        session: DebugSession | None = None,
        mode: str = REDUCE_DEFAULT_MODE,
        inputs: Sequence[Mapping[str, np.ndarray]] | None = None,
        cut: str = "input",
        input_shapes: Mapping[str, Sequence[int | str]] | None = None,
        reduce_inputs: bool = True,
        reduce_outputs: bool = True,
        reference: bool = True,
        iter_inputs: str | None = None,
        check_full: bool = True,
        warn: Callable[[str], None] | None = None,
        max_checks: int | None = None,
        max_time: float | None = None,
        save_best: str | Path | None = None,
        external_data_dir: str | Path | None = None,
        external: ExternalData | None = None,
        reference_model: str | Path | onnx.ModelProto | None = None,
        iter_expected: str | None = None,
        shape_inference: str = "onnx",
    ) -> None:
        if (predicate is None) == (session is None):
            raise UsageError("give the Reducer either a predicate or a DebugSession")
        if cut not in ("input", "constant"):
            raise UsageError(f"--cut-tensors: expected 'input' or 'constant', got '{cut}'")
        if not reduce_inputs and not reduce_outputs:
            raise UsageError("--no-reduce-inputs and --no-reduce-outputs together leave nothing to reduce")
        self.warn = warn or print_warning
        self.base_dir = data_dir_of(model, external_data_dir)
        # a model loaded here is ours to edit; a caller's ModelProto is copied (only its graph, when lazy)
        if shape_inference not in SHAPE_INFERENCE:
            raise UsageError(f"shape inference: expected one of {', '.join(SHAPE_INFERENCE)}, got '{shape_inference}'")
        infer = shape_inference == "onnx"
        self.model = prepare(load_model(model, external_data_dir), input_shapes, copy=isinstance(model, onnx.ModelProto), infer_shapes=infer)
        self.data_files = onnx_external.data_files(self.model, self.base_dir)  # the input's weights: never written
        self.index = GraphIndex(self.model)
        self.reference = make_reference(self.model, inputs, self.warn, self.base_dir) if reference else None
        if shape_inference == "fallback" and self.reference is None:  # Polygraphy's fallback: shapes from an onnxruntime run
            raise ModelError("--force-fallback-shape-inference: the reference run with onnxruntime failed, so no tensor shapes are known")
        if shape_inference == "fallback":  # as Polygraphy: the model's inputs and outputs get the shapes the run saw
            for info in [*self.model.graph.input, *self.model.graph.output]:
                if self.reference.has(info.name):
                    info.CopyFrom(self.index.tensor_info(info.name, self.reference))
            self.index = GraphIndex(self.model)
        # what a candidate's outputs are compared with: the reference model's values (--reference-model), else the
        # model's own (the repro bundle's expected.npz)
        self.expected: Reference | None = self.reference
        self.unfeedable: set[str] = set()
        if reference_model is not None:
            self.reference, self.expected, self.unfeedable = self._against(reference_model, inputs, input_shapes)
        self.iter_expected = iter_expected
        if cut == "constant" and self.reference and len(self.reference.samples) > 1:
            self.warn("--cut-tensors constant with several samples: tensors whose values differ between samples stay inputs")
        self.session = session or DebugSession(PredicateCheck(lambda it: predicate(it.payload)))  # type: ignore[misc]
        self.mode = mode
        self.cut = cut
        self.reduce_inputs = reduce_inputs
        self.reduce_outputs = reduce_outputs
        self.iter_inputs = iter_inputs
        self.check_full = check_full
        self.budget = Budget(max_checks, max_time)
        self.save_best = save_best
        self.external = external
        self.saved_data: set[Path] = set()  # data files save_best wrote (the command removes those the final -o lacks)
        near = work_near(self.session)
        self.files = CandidateFiles(self.model, self.base_dir, near, self.warn) if near is not None and onnx_external.has_external(self.model) else None

    def _against(
        self, reference_model: str | Path | onnx.ModelProto, inputs: Sequence[Mapping[str, np.ndarray]] | None, input_shapes: Any
    ) -> tuple[Reference, Reference, set[str]]:
        """``--reference-model``: run it on the same inputs; every tensor of the model that has a counterpart
        there (same name, through Casts) is fed the reference's value from now on, and candidates' outputs are
        expected to equal the reference's. So each candidate is judged against the same subgraph of the
        reference fed the same inputs: only a candidate holding a node that introduces the error fails."""
        if self.reference is None:
            raise ParityError("--reference-model: the model under test could not be run with onnxruntime to find its tensors' types")
        if inputs is None:
            inputs = self.reference.feeds([n for n in self.index.graph_inputs])
        ref_dir = data_dir_of(reference_model)
        ref = prepare(load_model(reference_model), input_shapes, copy=isinstance(reference_model, onnx.ModelProto))
        ref_inputs = {i.name for i in ref.graph.input} - {w.name for w in ref.graph.initializer}
        missing = sorted(ref_inputs - set(self.index.graph_inputs))
        if missing:
            raise UsageError(f"--reference-model {reference_model}: its input(s) {', '.join(missing[:3])} are not inputs of the model under test")
        golden = run_reference(ref, [{k: v for k, v in feed.items() if k in ref_inputs} for feed in inputs], ref_dir)
        feeding, expected = against_reference(self.reference, self.model, golden)
        if not any(expected.has(o) for o in self.index.outputs):
            raise UsageError(f"--reference-model {reference_model}: none of the model's outputs ({', '.join(self.index.outputs[:3])}) is in the reference model")
        return feeding, expected, unfeedable(feeding, self.reference)

    def close(self) -> None:
        """Remove the candidates' work folder (idempotent)."""
        if self.files is not None:
            self.files.close()

    def __enter__(self) -> Reducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _feedable(self, subset: frozenset[int]) -> frozenset[int]:
        """``subset`` plus the producers of its cut tensors whose reference value this model's dtype cannot hold
        (an fp32 value past fp16's range): fed as inf, a candidate would fail for an error made upstream."""
        index, grown = self.index, set(subset)
        todo = list(subset)
        while todo:
            i = todo.pop()
            for t in index.reads[i]:
                p = index.producer.get(t)
                if p is not None and p not in grown and t in self.unfeedable:
                    grown.add(p)
                    todo.append(p)
        return frozenset(grown)

    def build(self, subset: frozenset[int]) -> onnx.ModelProto:
        return self.index.build(subset, self.reference, self.cut)

    def _saver(self) -> Callable[[frozenset[int]], None]:
        """Writes improvements to ``save_best`` atomically, after the same validation as the final save.

        Every improvement with up to :data:`SAVE_AT_ONCE` bytes of weights is written as it is found. A larger
        one (an LLM's first improvements are most of it: GiBs to write and validate, each) is written only when
        it is not the whole model and has at most half the weights of the last one written, so those writes
        add up to at most twice the first; the final save writes the result in any case."""

        written: list[int] = []  # weight bytes of the last model written

        def save(subset: frozenset[int]) -> None:
            assert self.save_best is not None
            model = self.build(subset)
            size = onnx_external.weight_bytes(model)
            if size > SAVE_AT_ONCE and (len(subset) == len(self.index) or (written and size > written[0] // 2)):
                return
            what = f"the failing model of {len(subset)} nodes"
            saved = save_model(model, self.save_best, base_dir=self.base_dir, external=self.external, what=what, missing_kernels_ok=True)
            self.saved_data.update(saved.data_files)
            written[:] = [size]

        return save

    def strategy(self) -> Any:
        options = {"graph": self.index, "no_reduce_inputs": not self.reduce_inputs, "no_reduce_outputs": not self.reduce_outputs}
        return get_registry().strategy(self.mode).factory(options)  # this plugin's modes are registered like any other

    def run(self) -> ReduceResult:
        strategy = self.strategy()  # unknown --mode fails before any check
        search = Search(
            self.session,
            self.build,
            iter_inputs=self.iter_inputs,
            inputs_for=model_inputs_of(self.reference),
            files=self.files,
            iter_expected=self.iter_expected,
            expected_for=model_outputs_of(self.expected),
        )
        index = self.index

        def closure(s: frozenset[int]) -> frozenset[int]:
            if not s:
                return s
            s = index.closure(s, up=not self.reduce_inputs, down=not self.reduce_outputs)
            return self._feedable(s) if self.unfeedable else s

        oracle = search.oracle(True, closure)
        stopped = None
        self.budget.attach(oracle, self.session, self._saver() if self.save_best else None)
        full = list(range(len(index)))
        if self.check_full:
            search.original(closure(frozenset(full)), "the original model")
            oracle(full)  # cached: records the full model as bad
        try:
            oracle.expect(None)  # until the strategy says how many checks it needs
            found = closure(frozenset(strategy.minimize(full, oracle)))
            if not found:
                found = frozenset(full)
            if self.check_full and oracle.verdict(found) != "bad":  # only a checked, bad subset is a result
                oracle(found)
        except BudgetSpent as spent:  # keep the smallest failing model checked so far
            stopped = str(spent)
            self.warn(f"{spent}; keeping the smallest failing model found so far")
            found = oracle.best or frozenset(full)
        verified = oracle.verdict(found) == "bad" or not self.check_full
        best = oracle.best if oracle.best is not None and (len(oracle.best) < len(found) or not verified) else found
        model = self.build(best)
        summary = self.session.finish()
        good = _min_good(search.history, best, search.outcomes)
        min_good = self.build(good) if good else None
        return ReduceResult(model, sorted(best), index.names(best), summary, index, self.reference, min_good, search.history, stopped, self.base_dir, self.expected)


class BudgetSpent(Exception):
    """``--max-checks`` / ``--max-time`` ran out; the search stops before the next check."""


class Budget:
    """Stops a search before a check that ``max_checks`` (checks the search uses, the original's and resumed ones
    included; checks run ahead with ``--jobs`` count only once used) or ``max_time`` (seconds since the search started; a running check is never cut) does not
    allow, and calls ``on_improve(subset)`` whenever a failing subset smaller than every earlier one is seen
    (the reducer writes it to ``-o`` at once, so stopping at any moment leaves the best model so far)."""

    def __init__(self, max_checks: int | None = None, max_time: float | None = None) -> None:
        if max_checks is not None and max_checks < 1:
            raise UsageError(f"--max-checks: expected at least 1, got {max_checks}")
        if max_time is not None and max_time <= 0:
            raise UsageError(f"--max-time: expected a positive number of seconds, got {max_time}")
        self.max_checks = max_checks
        self.max_time = max_time

    def attach(self, oracle: Oracle, session: DebugSession, on_improve: Callable[[frozenset[int]], None] | None = None) -> None:
        started = time.perf_counter()
        many, noted = oracle.many, oracle.on_result
        best: list[int] = []  # size of the last improvement reported

        def budgeted_many(subsets: Sequence[Any]) -> list[bool]:
            # Counted over the checks the search uses (a verdict already used costs nothing; one run ahead with
            # --jobs costs what the serial search would have paid), so --max-checks stops where it does serially.
            keys = {subset_key(p) for p in (oracle._prepare(s) for s in subsets) if p or oracle.empty is None}
            new = sum(1 for k in keys if not session.used(k))
            if new and self.max_checks is not None and session.consumed_count + new > self.max_checks:
                raise BudgetSpent(f"--max-checks {self.max_checks} reached")
            if new and self.max_time is not None and time.perf_counter() - started > self.max_time:
                raise BudgetSpent(f"--max-time {self.max_time:g}s reached")
            return many(subsets)

        def ahead(wanted: int) -> int:  # no check run ahead that the budget could never use
            if self.max_time is not None and time.perf_counter() - started > self.max_time:
                return 0
            return wanted if self.max_checks is None else max(0, min(wanted, self.max_checks - session.consumed_count))

        def on_result(subset: frozenset[int], hit: bool) -> None:
            if noted:
                noted(subset, hit)
            if hit and on_improve and subset and (not best or len(subset) < best[0]):
                best[:] = [len(subset)]
                on_improve(subset)

        oracle.many = budgeted_many  # type: ignore[method-assign]
        oracle.ahead = ahead  # type: ignore[method-assign]
        oracle.on_result = on_result


def _min_good(history: list[tuple[frozenset[int], bool]], bad: frozenset[int], outcomes: Mapping[frozenset[int], str] | None = None) -> frozenset[int] | None:
    """Polygraphy's --min-good: the largest passing candidate inside the result, else the closest one.
    Only candidates whose check passed count (an unresolved one is not passing)."""
    goods = [s for s, hit in history if not hit and s and (outcomes is None or outcomes.get(s) == "good")]
    inside = [s for s in goods if s < bad]
    if inside:
        return max(inside, key=len)
    return min(goods, key=lambda s: len(s ^ bad)) if goods else None


def prove_bundle(directory: str | Path, session: DebugSession) -> tuple[bool, str]:
    """Run the repro bundle's ``check.sh`` once, from a copy of the bundle in a temporary directory (so it
    must stand alone, and the bundle itself is left as written), and compare what it does with the original
    failure's signature. Returns (reproduces, why not). A bundle is announced only when it reproduces the
    same failure: the original's exit code (and ``--fail-regex`` match), not a crash or a missing file."""
    check = session.check
    if not isinstance(check, CommandCheck):
        return False, "no --check command to run it with"
    if not (Path(directory) / "check.sh").is_file():
        return False, f"{Path(directory) / 'check.sh'} is missing"
    elsewhere = tempfile.mkdtemp(prefix="parity_repro_proof_")
    try:
        copy = Path(elsewhere) / Path(directory).resolve().name
        shutil.copytree(directory, copy, symlinks=True, copy_function=_clone_or_copy)
        script = str(copy / "check.sh")
        proof = CommandCheck(["sh", script], check.verdict, check.timeout, hide_fail_output=True, in_process=False, reference=session.reference, cwd=elsewhere)
        outcome = proof(Iteration(0, "repro", script, script))
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    if outcome.bad:
        return True, ""
    return False, outcome.note or "its check passed"


def _clone_or_copy(src: str, dst: str) -> str:
    """A bundle's large files (weights it holds as a reflink clone) are cloned into the proof's copy, not copied
    (a hard link would do, but onnx refuses a data file with two links)."""
    if os.path.getsize(src) > 64 << 20 and clone_file(Path(src), Path(dst)):
        shutil.copystat(src, dst)
        return dst
    return shutil.copy2(src, dst)
