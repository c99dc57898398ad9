"""``parity run`` as a function: run runners, stream results to files, compare, report.

One iteration is in memory at a time: inputs and outputs are written to their files as they come and
compared immediately, so a run over many iterations or with huge outputs has bounded memory.

Two levels: :func:`run` takes built runners, a data loader and compare functions; :func:`run_comparison`
takes a typed :class:`RunRequest` (the model, the backends in order with their typed settings, the core's
options as fields, each plugin's options in its own group) and does everything ``parity run`` does, showing
progress through a :class:`parity.reporting.RunReporter`. The CLI (:mod:`parity.cli.run`) is the only code that
turns click parameters into a request; the Python API builds one by hand::

    from parity import RunRequest, run_comparison

    outcome = run_comparison(RunRequest("model.onnx", [("onnxrt", {}), ("onnxrt", {"graph_optimization_level": "disable"})], iterations=2))
    assert outcome.passed

Messages name an option as the request's ``flags`` spell it (the CLI: as on the command line); this module
never builds a flag from a parameter name.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parity.backend.base import BaseRunner
from parity.compare.comparator import Comparator, CompareFunc, compare_iteration, resolve_compare_funcs, runner_labels
from parity.compare.dataset import finish, refuse_unaveraged
from parity.compare.names import OutputNames
from parity.compare.result import AccuracyResult, IterationComparison, PairComparison
from parity.compare.simple import STATISTICS, statistics_level
from parity.errors import ExitCode, UsageError
from parity.from_options import (
    check_loading_flags,
    check_requirements,
    detect_model_kind,
    external_data,
    loading_flags_given,
    make_compare_funcs,
    make_data_loader,
    make_runners,
    mark_params,
    option_flag,
    outputs_by_type,
    outputs_were_marked,
    refuse_overwrite_inputs,
    stage_loaded_onnx,
    type_outputs,
)
from parity.plugins import call_hook, get_registry
from parity.registry import RunnerRequest
from parity.reporting import FinishedRun, RunReporter, RunWatcher, run_reporter, write_report
from parity.results.files import check_output_path, load_results, open_writer
from parity.results.model import IterationResult, RunResults
from parity.util.fs import atomic_write, check_model_path, refuse_overwrite
from parity.util.record import DICT, LIST, Record, fill
from parity.util.text import unique_labels

if TYPE_CHECKING:  # pragma: no cover
    from parity.compare.divergence import DivergenceReport
    from parity.compare.marking import MarkingEffect
    from parity.compare.nonfinite import NonFiniteReport
    from parity.registry import Registry


class ValidationIssue(Record):
    """NaN and Inf counts of one output (``--validate``)."""

    runner: str
    iteration: int
    output: str
    nan: int
    inf: int

    def __init__(self, runner: str, iteration: int, output: str, nan: int, inf: int) -> None:
        fill(self, locals())


class RunSummary(Record):
    """What :func:`run` did: the comparisons, iterations run, runtimes per runner, validation issues, and
    where marking outputs changed a runner's real outputs (``marking``)."""

    accuracy: AccuracyResult
    iterations: int
    runtimes: dict[str, list[float]]
    validation: list[ValidationIssue]
    validated: bool
    seconds: float
    marking: list[MarkingEffect]  # where marking outputs changed a runner's real outputs (compare/marking.py)

    def __init__(
        self,
        accuracy: AccuracyResult,
        iterations: int = 0,
        runtimes: dict[str, list[float]] = DICT,
        validation: list[ValidationIssue] = LIST,
        validated: bool = False,
        seconds: float = 0.0,
        marking: list[MarkingEffect] = LIST,
    ) -> None:
        fill(self, locals())

    @property
    def passed(self) -> bool:
        return bool(self.accuracy) and not self.validation


def validate(result: IterationResult, runner: str, index: int) -> list[ValidationIssue]:
    """NaN/Inf check (``--validate``), chunked so big outputs are not copied."""
    from parity.compare.stats import summarize

    issues = []
    for name, array in result.items():
        arr = np.asarray(array)
        if not np.issubdtype(arr.dtype, np.floating):
            continue
        with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf in a chunk's sum: counted, not warned about
            s = summarize(arr.reshape(-1), percentiles=False)
        if s.nan or s.inf:
            issues.append(ValidationIssue(runner, index, name, s.nan, s.inf))
    return issues


class _Streamer:
    """Writes inputs/outputs iteration by iteration; files appear atomically at the end."""

    def __init__(self, path: str | Path | None, kind: str) -> None:
        self.kind = kind
        self._ctx = atomic_write(path) if path else None
        self._writer = open_writer(self._ctx.__enter__(), path, kind) if self._ctx and path else None

    def add_inputs(self, feed: Mapping[str, np.ndarray]) -> None:
        if self._writer:
            self._writer.add_inputs(feed)

    def add_outputs(self, runner: str, result: IterationResult) -> None:
        if self._writer:
            self._writer.add_outputs(runner, result)

    def finish(self, ok: bool) -> None:
        if not self._writer or not self._ctx:
            return
        try:
            if ok:
                self._writer.finish()
        except BaseException as exc:  # e.g. disk full while closing: the temporary goes, the error stays
            self._writer.discard()
            self._ctx.__exit__(type(exc), exc, exc.__traceback__)
            raise
        if ok:
            self._ctx.__exit__(None, None, None)
        else:
            self._writer.discard()
            self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)


def run(
    runners: Sequence[BaseRunner],
    data_loader: Iterable[Mapping[str, np.ndarray]] | None = None,
    golden: RunResults | None = None,
    compare_func: CompareFunc | Sequence[CompareFunc] | str | None = None,
    save_inputs: str | Path | None = None,
    save_outputs: str | Path | None = None,
    do_validate: bool = False,
    fail_fast: bool = False,
    on_iteration: Callable[[int, list[PairComparison]], None] | None = None,
    on_progress: Callable[[str, int, int | None, str], None] | None = None,
    on_nonfinite: Callable[[str, int, Mapping[str, np.ndarray], IterationResult, list[ValidationIssue]], None] | None = None,
    check_average: bool = False,
    on_compared: Callable[[int, PairComparison, IterationResult, IterationResult], None] | None = None,
    unmarked: Mapping[int, tuple[BaseRunner, str]] | None = None,
    save_input_blob: str | Path | None = None,
) -> RunSummary:
    """Run ``runners`` on the data, compare each with the next, then the last with each golden run. Runners
    run one after the other, each released before the next loads (:meth:`Comparator.stream`).

    ``check_average`` (``--check-average``): each output's metric averaged over the iterations decides, not each
    iteration (:mod:`parity.compare.dataset`); either way each pair gets its data-set metrics when the run is
    over. ``on_compared(index, pair, actual, reference)`` after each iteration of each pair, while both sides'
    outputs are in memory (plugins' run watchers: heatmaps, the HTML report's samples); ``pair.iterations[-1]`` is that iteration's
    comparison.

    ``on_progress(task, done, total, status)`` says how far the run is: task ``"iterations"`` (total: the data
    loader's length, None when it has none; status: the step now running) and, for an iteration with many
    outputs (layerwise), task ``"outputs"`` (outputs compared).

    ``unmarked``: ``{position in runners: (the same runner built without marked outputs, what marked it)}``
    (``"--onnx-outputs mark all"``). Each twin runs after the runners, on the same inputs, one runner loaded at a time as
    the others (memory does not double: the cost is one more session and inference per marked runner); its
    outputs are neither compared, saved nor timed, only held against the marked runner's real outputs:
    where they differ beyond the tolerance, ``summary.marking`` says so (:mod:`parity.compare.marking`).

    ``save_input_blob``: a folder where each iteration's inputs are written as raw bytes, Polygraphy's layout
    (:class:`parity.run_modes.InputBlobWriter`)."""
    refuse_overwrite(None, save_inputs=save_inputs, save_outputs=save_outputs)  # one file cannot hold both
    funcs = resolve_compare_funcs(compare_func)
    if check_average:
        refuse_unaveraged(funcs, fail_fast)
    golden = golden or RunResults()
    live = runner_labels(runners)
    # a golden run named like a live runner gets a distinct label: the two sides never carry the same one
    golden_labels = unique_labels(golden.runners(), taken=live)
    pairs = [(live[i], live[i + 1]) for i in range(len(live) - 1)]
    if live:
        pairs += [(live[-1], g) for g in golden_labels]
    aggregation = "average" if check_average else "per_iteration"
    summary = RunSummary(AccuracyResult(PairComparison(a, b, aggregation=aggregation) for a, b in pairs), validated=do_validate)
    twins, marking = _twins(runners, live, unmarked)
    check = None
    if twins:
        from parity.compare.marking import MarkingCheck  # only with marked outputs: a plain run does not import it

        check = MarkingCheck(funcs, {live[i]: twin.name for i, (twin, _) in twins}, marking, pairs)
    started = time.perf_counter()
    inputs_out = outputs_out = None
    iterations: Any = None  # closed in any case: the stream unfreezes the heap it froze (parity.util.memory)
    ok = False
    try:
        # inside the try: if the second file cannot be opened, the first one's temporary is removed
        inputs_out = _Streamer(save_inputs, "inputs")
        outputs_out = _Streamer(save_outputs, "outputs")
        blobs = None
        if save_input_blob is not None and runners:
            from parity.run_modes import InputBlobWriter  # only with --save-input-blob

            blobs = InputBlobWriter(save_input_blob)
        if not runners:
            summary.accuracy = Comparator.compare_accuracy(golden, funcs, fail_fast=fail_fast, check_average=check_average, on_compared=on_compared)
            summary.iterations = max((len(i) for _, i in golden), default=0)
            ok = True
            return summary
        total = _length(data_loader)
        progress = on_progress or (lambda task, done, total, status: None)

        def compared(done: int, outputs: int) -> None:
            if outputs >= _MANY_OUTPUTS:
                progress("outputs", done, outputs, "")

        # twins first: while the marked runners run, a twin's outputs (the model's own, few) wait, not every
        # tensor of a marked run while a twin holds the whole model (1.3x its weights for an LLM-like decoder,
        # bench/big_models.py); the cost: a tensor name the model lacks stops the run after its twin ran
        iterations = Comparator.stream([t for _, (t, _) in twins] + list(runners), data_loader, lambda i, what: progress("iterations", i, total, what))
        for index, feed, results in iterations:
            progress("iterations", index, total, "comparing")
            plain = {t.name: results.pop(t.name) for _, (t, _) in twins}
            inputs_out.add_inputs(feed)
            if blobs is not None:
                blobs.add(feed)
            for name, res in results.items():
                outputs_out.add_outputs(name, res)
                summary.runtimes.setdefault(name, []).append(res.runtime or 0.0)
                if do_validate:
                    issues = validate(res, name, index)
                    summary.validation += issues
                    if issues and on_nonfinite:
                        on_nonfinite(name, index, feed, res, issues)
            everything = dict(results)
            for glabel, (gname, giters) in zip(golden_labels, golden):
                if index >= len(giters) and len(giters) != 1:
                    raise UsageError(f"golden run '{gname}' has {len(giters)} iteration(s); this run has more (use --iterations {len(giters)})")
                everything[glabel] = giters[min(index, len(giters) - 1)]
            if check is not None:
                check.on_iteration(index, {**everything, **plain})
            del plain
            done: list[PairComparison] = []
            for pair in summary.accuracy:
                it: IterationComparison = compare_iteration(everything[pair.actual], everything[pair.reference], funcs, index, (pair.actual, pair.reference), compared)
                pair.iterations.append(it)
                done.append(pair)
                if on_compared:
                    on_compared(index, pair, everything[pair.actual], everything[pair.reference])
            summary.iterations = index + 1
            progress("iterations", index + 1, total, "")
            if on_iteration:
                on_iteration(index, done)
            if fail_fast and not all(p.passed for p in summary.accuracy):
                break
        finish(summary.accuracy, funcs, check_average)
        summary.marking = check.effects if check is not None else []
        ok = True
        return summary
    finally:
        if iterations is not None:
            iterations.close()
        try:
            if inputs_out:
                inputs_out.finish(ok)
        finally:
            if outputs_out:
                outputs_out.finish(ok)
        summary.seconds = time.perf_counter() - started


Twin = tuple[BaseRunner, str]  # a runner built without marked outputs, and what marked the original


def _twins(runners: Sequence[BaseRunner], labels: Sequence[str], unmarked: Mapping[int, Twin] | None) -> tuple[list[tuple[int, Twin]], dict[str, str]]:
    """The unmarked twins in runner order, each named apart from every live label (``onnxrt-0 unmarked``), and
    what marked each live runner."""
    twins = sorted((unmarked or {}).items())
    taken = set(labels)
    for position, (twin, _) in twins:
        if not 0 <= position < len(runners):
            raise UsageError(f"run(unmarked=...): no runner at position {position}; there are {len(runners)}")
        twin.name = unique_labels([f"{labels[position]} unmarked"], taken=taken)[0]
        taken.add(twin.name)
    return twins, {labels[position]: how for position, (_, how) in twins}


_MANY_OUTPUTS = 20  # an iteration comparing this many outputs (a layerwise run) shows their count too


def _length(data_loader: Any) -> int | None:
    """How many iterations the data gives: 1 without a loader (one feed of generated data), else its len()."""
    if data_loader is None:
        return 1
    try:
        return len(data_loader)
    except TypeError:  # a generator from a --data-loader-script
        return None


def median_ms(values: Sequence[float]) -> float:
    """The median, in milliseconds, as ``statistics.median`` computes it. Neither that module (it imports
    random, fractions and decimal: ~3 ms of every run) nor ``np.median`` (it imports numpy.ma, ~10 ms)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    half = len(ordered) // 2
    middle = ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
    return middle * 1000.0


# --- the whole of ``parity run`` -------------------------------------------------------------------------


Runner = tuple[str, Mapping[str, Any]]  # (backend name, its per-runner settings as typed values)


@dataclass(frozen=True)
class RunRequest:
    """One ``parity run`` as typed values. The core's own options are fields; each plugin's options are grouped
    under the name it registered them with (``plugin_options={"simple": {"atol": ("y:1e-3", "1e-5")},
    "onnxrt": {"providers": ("cpu",)}, "reports": {"save_report_html": "r.html"}}``: a backend's runner gets
    its own group and no other backend's). ``runners`` are ``(backend name, settings)`` in order, the settings
    typed already (the CLI casts ``--onnxrt=opt=value`` text with the options' types before it builds the
    request). ``flags`` says how the caller spells each option in messages (the CLI: ``{"save_outputs":
    "--save-outputs", ...}``); an option it does not name is spelled as its field (``save_outputs``)."""

    model: str | None = None
    runners: Sequence[Runner] = ()
    _: KW_ONLY  # the options by name only: a caller's old positional option mapping fails loudly
    # the model
    model_type: str | None = None
    external_data_dir: str | None = None
    ignore_external_data: bool = False  # refused: a run needs the weights (the flag is Polygraphy's)
    # the ONNX model as Polygraphy's loader hands it to the runners: shapes inferred, float32 made float16
    shape_inference: bool = False
    no_onnxruntime_shape_inference: bool = False
    fp_to_fp16: bool = False
    # the inputs: generated (seed, ranges, shapes), a registered loader, a script, or saved files
    input_shapes: Sequence[str] = ()
    seed: int = 1
    val_range: Sequence[str] = ()
    iterations: int = 1
    data_loader: str = "random"
    data_loader_script: str | None = None
    load_inputs: Sequence[str] = ()
    save_inputs: str | None = None
    save_input_blob: str | None = None  # a folder: each input of each iteration as raw bytes (Polygraphy's layout)
    # how each runner runs: untimed inferences first, a process of its own (parity.run_modes)
    warm_up: int = 0
    use_subprocess: bool = False
    # marked outputs (layerwise) and the check that marking left the model's own outputs alone
    onnx_outputs: Sequence[str] = ()
    onnx_exclude_outputs: Sequence[str] = ()
    onnx_outputs_by_type: Sequence[str] = ()  # op types whose nodes' outputs are marked too (Polygraphy's spelling)
    marking_check: bool = True
    # the ONNX model as the runners load it (outputs marked), written like Polygraphy's --save-onnx
    save_onnx: str | None = None
    save_external_data: str | None = None
    external_data_size_threshold: str | int | None = None
    no_save_all_tensors_to_one_file: bool = False
    # the comparison
    compare_func: Sequence[str] = ()
    fail_fast: bool = False
    check_average: bool = False
    validate: bool = False
    load_outputs: Sequence[str] = ()
    save_outputs: str | None = None
    report: str | None = None
    plugin_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    flags: Mapping[str, str] = field(default_factory=dict)

    def flag(self, name: str, spec: Any = None) -> str:
        """How the caller spells option ``name`` (a field, or an option ``spec`` declared) in a message: as
        :attr:`flags` says, else the flag ``spec`` declared it with, else the name."""
        return option_flag(spec, name, self.flags) if spec is not None else self.flags.get(name, name)

    def options(self, leave_out: Collection[str] = ()) -> dict[str, Any]:
        """Every option value by name, as the plugins' contracts take them (a comparator's ``factory``,
        :class:`parity.registry.DataRequest`, the hook ``parity_watch_run``): the core's fields, then each
        plugin's group but those named in ``leave_out`` (a runner's: the other backends')."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_OPTIONS}
        for name, group in self.plugin_options.items():
            if name not in leave_out:
                values.update(group)
        return values


_NOT_OPTIONS = ("model", "runners", "plugin_options", "flags")
# the options the core owns: RunRequest's fields that are option values (the CLI puts each of these parameters
# in its field and every other one in its plugin's group)
CORE_OPTIONS = tuple(f.name for f in fields(RunRequest) if f.name not in _NOT_OPTIONS)


class RunOutcome(Record):
    """What :func:`run_comparison` did: the summary, the exit code it means, the layerwise reports, and (a
    layerwise run with ``--validate``) each runner's first NaN/Inf."""

    summary: RunSummary
    code: int
    layerwise: list[DivergenceReport] | None
    nonfinite: list[NonFiniteReport] | None

    def __init__(self, summary: RunSummary, code: int, layerwise: list[DivergenceReport] | None = None, nonfinite: list[NonFiniteReport] | None = None) -> None:
        fill(self, locals())

    @property
    def passed(self) -> bool:
        return self.summary.passed


def _watcher_statistics(watcher: RunWatcher, reporter: RunReporter) -> str:
    """What ``watcher`` says it reads (``RunWatcher.statistics``); a level Parity does not know gets everything
    (``"all"``), with a warning naming the watcher."""
    level = getattr(watcher, "statistics", "all")
    if level not in STATISTICS:
        reporter.warning(f"{type(watcher).__name__}.statistics: unknown level {level!r} (choose from {', '.join(STATISTICS)}): every statistic is computed")
        return "all"
    return level


def run_comparison(request: RunRequest, reporter: RunReporter | Any = None, registry: Registry | None = None) -> RunOutcome:
    """Everything ``parity run`` does, in its order: refuse bad paths, build the compare functions, golden runs,
    data and runners, run, report (``reporter``: a :class:`parity.reporting.RunReporter`, default
    :class:`parity.reporting.QuietReporter`; another object is completed once by
    :func:`parity.reporting.run_reporter`), and write the ``--report`` file; plugins' run watchers (hook
    ``parity_watch_run``) are told of each step and write their own reports. Errors are
    :class:`parity.errors.ParityError` subclasses carrying the exit code."""
    with contextlib.ExitStack() as stack:  # a staged model (--shape-inference, --fp-to-fp16): its folder goes at the end
        return _run_comparison(request, reporter, registry, stack)


def _run_comparison(request: RunRequest, reporter: RunReporter | Any, registry: Registry | None, stack: Any) -> RunOutcome:
    if registry is None:
        registry = get_registry()
    reporter = run_reporter(reporter)
    request = _check_run_modes(request)
    if request.onnx_outputs_by_type:
        request = _mark_by_type(request, registry, reporter.warning)
    model, chosen = request.model, list(request.runners)
    params = request.options()
    refuse_overwrite_inputs(model, params, registry, request.flags)
    for option in ("save_inputs", "save_outputs", "report"):  # a bad output path fails before any work
        if params.get(option):
            check_output_path(params[option], request.flag(option))
    # plugins' reports: each checks its own output paths here, as the core did its own just above
    watchers: list[RunWatcher] = call_hook("parity_watch_run", options=params, reporter=reporter)
    check_work(request, registry)
    if model:
        check_model_path(model)
    for watcher in watchers:
        watcher.check()  # before any work: a library, a folder, a display
    # compute what is shown: medians for --report's values, details for every output only if someone shows them,
    # percentiles only for those who read them (each watcher says what it reads: RunWatcher.statistics)
    needs = [_watcher_statistics(w, reporter) for w in watchers] + ["report"] * bool(params.get("report"))
    shown = statistics_level(needs + ["all"] * (getattr(reporter, "details", "all") == "all"))
    funcs = make_compare_funcs({"compare_statistics": shown, **params}, registry)
    if request.check_average:
        refuse_unaveraged(funcs, request.fail_fast)
    golden = RunResults()
    for path in request.load_outputs or ():
        golden.extend(load_results(path), prefix=f"{Path(path).name}:")
    kind = detect_model_kind(model, registry, request.model_type) if model else None
    if request.external_data_dir:  # before any work: a folder, for an ONNX model
        if kind != "onnx":
            raise UsageError(f"{request.flag('external_data_dir')}: {'give the ONNX model whose weights it holds' if not model else f'{model} is not an ONNX model'}")
        from parity.onnx_models import data_dir  # here: a plain run does not import it

        data_dir(model, request.external_data_dir)
    names = OutputNames.from_options(params, registry)  # --atol NAME:TOL names an output: checked before any runner is built
    marked = outputs_were_marked(params)
    names.check_model(model, kind, golden, marked, request.external_data_dir)
    if request.marking_check:
        _check_onnx_marks(request, model, kind)
    loaded = _loaded_model(request, kind, registry, stack)  # what the runners load: the model, or its staged copy
    if request.save_onnx:
        _save_onnx(loaded, loaded.model, kind)
    elif request.save_external_data is not None or request.external_data_size_threshold is not None or request.no_save_all_tensors_to_one_file:
        raise UsageError(f"{_given_external(request)} applies to the model {request.flag('save_onnx')} writes: add {request.flag('save_onnx')} PATH")
    for watcher in watchers:
        watcher.check_model(model, kind)
    runner_options = [_runner_options(loaded, name, settings, registry) for name, settings in chosen]
    runners = make_runners(loaded.model, kind, chosen, runner_options, registry)  # validates backend options: usage errors come first
    check_requirements([name for name, _ in chosen], registry)  # a missing library before the inputs are examined
    twins = _unmarked_twins(loaded, kind, runner_options, registry) if request.marking_check else {}
    if request.warm_up or request.use_subprocess:
        from parity.run_modes import wrap_runners  # only with --warm-up or --use-subprocess

        runners = wrap_runners(runners, request.warm_up, request.use_subprocess)
        # a twin is neither timed nor compared: no warm-up; its own process with the others'
        twins = {i: (wrap_runners([twin], 0, request.use_subprocess)[0], how) for i, (twin, how) in twins.items()}
    data = make_data_loader(params, model, kind, registry, reporter.warning) if model and chosen else None
    locator = None
    if request.validate and marked:
        from parity.compare.nonfinite import NonFiniteLocator  # only for layerwise validation: a plain run does not import it

        locator = NonFiniteLocator(loaded.model, loaded.external_data_dir)
    compared = [w.on_compared for w in watchers]
    if names:  # and against the first compared outputs (engines; tensors not marked)
        compared.append(names.on_compared)
    summary = run(
        runners,
        data,
        golden,
        funcs,
        save_inputs=request.save_inputs,
        save_outputs=request.save_outputs,
        do_validate=request.validate,
        fail_fast=request.fail_fast,
        on_iteration=reporter.iteration,
        on_progress=reporter.progress,
        on_nonfinite=locator,
        check_average=request.check_average,
        on_compared=_each(compared) if compared else None,
        unmarked=twins,
        save_input_blob=request.save_input_blob,
    )
    if not runners:
        for index in range(summary.iterations):
            reporter.iteration(index, [p for p in summary.accuracy if index < len(p.iterations)])
    code = ExitCode.PASSED if summary.passed else ExitCode.MISMATCH
    # layerwise runs: where the runners start to disagree (built once: shown and reported)
    layerwise = None
    if marked:
        from parity.compare.divergence import first_divergence  # only for layerwise runs: a plain run does not import it

        layerwise = first_divergence(summary, model)
    reporter.divergence(layerwise or [])
    for effect in summary.marking:  # once per runner, after the divergence report it puts in doubt
        reporter.warning(effect.message())
    nonfinite = locator.reports if locator is not None else None
    if nonfinite:
        reporter.nonfinite(nonfinite)
    finished = FinishedRun(summary, int(code), model, layerwise, nonfinite)
    for watcher in watchers:
        watcher.on_finished(finished)
    reporter.summary(summary)
    if request.report:
        write_report(request.report, summary, code, layerwise, nonfinite)
    for watcher in watchers:
        watcher.on_reported(finished)
    return RunOutcome(summary, int(code), layerwise, nonfinite)


def check_work(request: RunRequest, registry: Registry) -> None:
    """A request that names backends without a model, or neither a backend nor golden outputs, is refused: the CLI's
    MODEL is optional (``--load-outputs`` alone compares files), so say what is missing."""
    chosen = list(request.runners)
    if chosen and not request.model:
        flags = list(dict.fromkeys(registry.backend(name).cli_flag for name, _ in chosen))
        raise UsageError(f"missing MODEL: {' '.join(flags)} {'needs' if len(flags) == 1 else 'need'} a model to run; see 'parity run --help'")
    if not chosen and not request.load_outputs:
        flags = " ".join(b.cli_flag for b in registry.backends.values())
        raise UsageError(f"choose at least one backend ({flags or 'none installed: see parity plugins'}) or {request.flag('load_outputs')}")
    check_loading_flags(request.options(), "parity run")


def _loaded_model(request: RunRequest, kind: str | None, registry: Registry, stack: Any) -> RunRequest:
    """The request the runners get: with ``--shape-inference``/``--fp-to-fp16``, its model is the changed copy
    (:func:`parity.from_options.stage_loaded_onnx`) in a private folder ``stack`` removes; else ``request``."""
    params = request.options()
    if not loading_flags_given(params) or not request.model or not request.runners:
        return request
    if kind != "onnx":
        given = next(request.flag(n) for n in ("shape_inference", "fp_to_fp16") if params.get(n))
        raise UsageError(f"{given}: {request.model} is not an ONNX model; the flag changes an ONNX model as it is read")
    import tempfile  # 4.5 ms at start-up: only a changed model needs a folder

    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="parity-run-"))
    model, base = stage_loaded_onnx(request.model, params, folder, registry)
    return replace(request, model=model, external_data_dir=base)


def _check_run_modes(request: RunRequest) -> RunRequest:
    if request.warm_up < 0:
        raise UsageError(f"{request.flag('warm_up')}: {request.warm_up} is negative; give the number of untimed runs (0 or more)")
    if request.iterations < 0:
        raise UsageError(f"{request.flag('iterations')}: {request.iterations} is negative")
    return request


def _mark_by_type(request: RunRequest, registry: Registry, warn: Callable[[str], None]) -> RunRequest:
    """``--onnx-outputs-by-type OP ...``: the outputs of every node of those op types join ``--onnx-outputs``
    (:func:`parity.from_options.outputs_by_type`), so every backend that marks ONNX outputs marks them."""
    from parity import onnx_models  # here: only this option reads the graph so early

    flag = request.flag("onnx_outputs_by_type")
    model = request.model
    if not model:
        raise UsageError(f"{flag}: give the ONNX model whose nodes it marks")
    if detect_model_kind(model, registry, request.model_type) != "onnx":
        raise UsageError(f"{flag}: {model} is not an ONNX model")
    if onnx_models.wants_all(request.onnx_outputs):
        return replace(request, onnx_outputs_by_type=())  # every tensor is marked already
    proto = onnx_models.load(model, load_external_data=False, external_data_dir=request.external_data_dir, ignore_external_data=True)
    outputs = list(dict.fromkeys([*request.onnx_outputs, *outputs_by_type(proto, request.onnx_outputs_by_type, model, flag, warn)]))
    return replace(request, onnx_outputs=outputs, onnx_outputs_by_type=())


def _given_external(request: RunRequest) -> str:
    given = [("save_external_data", request.save_external_data is not None), ("external_data_size_threshold", request.external_data_size_threshold is not None)]
    given.append(("no_save_all_tensors_to_one_file", request.no_save_all_tensors_to_one_file))
    return next(request.flag(name) for name, on in given if on)


def _save_onnx(request: RunRequest, model: str | None, kind: str | None) -> None:
    """``--save-onnx PATH``: the ONNX model as the runners load it (outputs marked as ``--onnx-outputs`` says),
    written with its weights where ``--save-external-data`` says and checked (onnx.checker full, a load in
    onnxruntime) before it appears (:func:`parity.onnx_external.save_model`)."""
    flag = request.flag("save_onnx")
    if kind != "onnx" or not model:
        raise UsageError(f"{flag}: {'give the ONNX model to save' if not model else f'{model} is not an ONNX model'}")
    from parity import onnx_external, onnx_models  # here: only --save-onnx writes a model

    external = external_data(request.options(), request.flags)
    proto = onnx_models.load(model, load_external_data=False, external_data_dir=request.external_data_dir)
    if request.onnx_outputs:
        onnx_models.mark_outputs(proto, list(request.onnx_outputs), list(request.onnx_exclude_outputs))
        type_outputs(proto)
    onnx_external.save_model(proto, request.save_onnx, base_dir=onnx_models.data_dir(model, request.external_data_dir), external=external, what=f"the model for {flag}")


def _runner_options(request: RunRequest, backend: str, settings: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """What one runner of ``backend`` reads: the core's options, the groups of every plugin but the other
    backends, and its per-runner settings (``--onnxrt=opt=value``) over them."""
    others = [name for name in registry.backends if name != backend]
    return {**request.options(leave_out=others), **settings}


def _check_onnx_marks(request: RunRequest, model: str | None, kind: str | None) -> None:
    """``--onnx-outputs``/``--onnx-exclude-outputs`` names the ONNX model lacks, refused before any runner runs: the
    unmarked twins run first, so the marked runner's own refusal (the same message) would come after a whole run."""
    outputs, exclude = list(request.onnx_outputs), list(request.onnx_exclude_outputs)
    if kind != "onnx" or not model or not (outputs or exclude):
        return
    from parity import onnx_models  # here: a run that marks nothing does not import it (50 ms with onnx)

    if not exclude and onnx_models.wants_all(outputs):
        return
    proto = onnx_models.load(model, load_external_data=False, external_data_dir=request.external_data_dir, ignore_external_data=True)
    onnx_models.mark_outputs(proto, outputs, exclude)


def _unmarked_twins(request: RunRequest, kind: str | None, runner_options: Sequence[Mapping[str, Any]], registry: Registry) -> dict[int, Twin]:
    """For each runner whose outputs are marked (its backend's ``mark_options``), the same runner built
    without the marks, and what marked it: ``parity run`` checks that marking did not change the model's own
    outputs (:mod:`parity.compare.marking`). A twin saves nothing (the backend's ``writes`` options are
    dropped, a saved engine stays the marked run's), except a cache the backend also reads (``_READ_TOO``)."""
    twins: dict[int, Twin] = {}
    for index, ((name, _), options) in enumerate(zip(request.runners, runner_options)):
        backend = registry.backend(name)
        given = [p for p in backend.mark_options if options.get(p)]
        if not given:
            continue
        how = "; ".join(f"{request.flag(p, backend)} {_spelled(options[p])}".strip() for p in given)
        writes = [p for p in backend.writes if p not in _READ_TOO]
        plain = {**options, **{p: _empty(options[p]) for p in (*mark_params(), *backend.mark_options, *writes) if p in options}}
        twins[index] = (backend.make_runner(RunnerRequest(request.model, plain, index, kind)), how)
    return twins


# written files a twin keeps: a cache the backend reads as well as writes (TensorRT's int8 calibration cache),
# so the twin calibrates as the marked runner does instead of anew
_READ_TOO = ("calibration_cache",)


def _spelled(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return "" if value is True else str(value)


def _empty(value: Any) -> Any:
    """An option's "not given" of the value's kind: ``()`` for a repeatable one, else None."""
    return type(value)() if isinstance(value, (list, tuple)) else None


def _each(callbacks: Sequence[Callable[..., None]]) -> Callable[..., None]:
    """One ``on_compared`` calling each of ``callbacks`` in turn."""

    def call(*args: Any) -> None:
        for callback in callbacks:
            callback(*args)

    return call
