"""``parity plugin autotune``: which of the plugin replacements ``plugin match`` finds make the TensorRT engine
faster. Each candidate model (the original with some instances replaced, as ``plugin replace`` does) is built with
TensorRT (through ``parity_trt.api``) and timed; ``greedy`` adds one instance at a time and keeps it when the
latency improves by more than ``--threshold`` (a fraction of the best so far), ``exhaustive`` times every subset
(at most ``--max-combinations``). The fastest model is written, and ``--report`` says what was tried.
A candidate TensorRT cannot build (its plugin is not registered, say) is skipped, with its reason in the report."""

from __future__ import annotations

import ctypes
import itertools
import os
import runpy
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from parity.api import (
    ConvertRequest,
    ParityError,
    RunnerRequest,
    UsageError,
    echo,
    first_line,
    get_registry,
    missing_dependency,
    names_preview,
    write_text_atomic,
)

TIMED_RUNS = 5


@dataclass
class Trial:
    chosen: tuple[int, ...]  # indices into the candidate list
    latency_ms: float | None
    error: str = ""


@dataclass
class Outcome:
    candidates: list[dict[str, Any]]
    baseline_ms: float
    trials: list[Trial] = field(default_factory=list)
    best: Trial | None = None

    def report(self, mode: str, threshold: float) -> str:
        lines = [f"plugin autotune ({mode}, threshold {threshold:g})", f"baseline: {self.baseline_ms:.4f} ms (no replacement)"]
        for trial in self.trials:
            names = ", ".join(_label(self.candidates[i]) for i in trial.chosen) or "none"
            lines.append(f"  [{names}]: " + (f"{trial.latency_ms:.4f} ms" if trial.latency_ms is not None else f"not built: {trial.error}"))
        best = self.best
        if best is None or not best.chosen:
            lines.append("best: the original model (no replacement was faster)")
        else:
            lines.append(f"best: {best.latency_ms:.4f} ms with {len(best.chosen)} replacement(s):")
            for i in best.chosen:
                c = self.candidates[i]
                lines.append(f"  {_label(c)}: inputs {', '.join(c['inputs'])}; outputs {', '.join(c['outputs'])}; attributes {c.get('attributes') or {}}")
        return "\n".join(lines) + "\n"


def _label(candidate: Mapping[str, Any]) -> str:
    return f"{candidate['name']}#{candidate['index']} ({candidate['op']})"


def candidates_of(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One candidate per instance of the plugin config documents."""
    return [{**instance, "name": doc["name"], "op": doc["op"], "index": i} for doc in documents for i, instance in enumerate(doc["instances"] or [])]


def load_extras(python_plugins: Sequence[str], libraries: Sequence[str]) -> None:
    """Run the Python files that register TensorRT plugins and load the plugin libraries, each failure one line."""
    for path in python_plugins:
        if not os.path.isfile(path):
            raise UsageError(f"--python-plugins: no such file: {path}")
        try:
            runpy.run_path(path)
        except Exception as exc:  # noqa: BLE001 - the user's code: one line naming it
            raise UsageError(f"--python-plugins: {path}: {type(exc).__name__}: {exc}") from None
    for path in libraries:
        if not os.path.isfile(path):
            raise UsageError(f"--plugin-libraries: no such file: {path}")
        try:
            ctypes.CDLL(os.path.abspath(path))
        except OSError as exc:
            raise UsageError(f"--plugin-libraries: cannot load {path}: {exc}") from None


class Timer:
    """Builds an ONNX model with TensorRT and times it (median of a few runs on generated inputs)."""

    def __init__(self, workdir: str, timing_cache: str | None) -> None:
        self.workdir, self.timing_cache, self.builds = workdir, timing_cache, 0

    def __call__(self, model_path: str) -> float:
        from parity.api import DataLoader  # here: it loads numpy, which the commands' --help never needs

        # TensorRT through the registry (the TensorRT plugin's converter and backend), not through its modules
        registry = get_registry()
        if "trt" not in registry.converters or "trt" not in registry.backends:
            raise missing_dependency("parity-trt", "pip install parity-trt")
        engine = os.path.join(self.workdir, f"candidate_{self.builds}.engine")
        self.builds += 1
        options = {"load_timing_cache": self.timing_cache, "save_timing_cache": self.timing_cache} if self.timing_cache else {}
        registry.converters["trt"].convert(ConvertRequest(model_path, engine, {**options, "trt_progress": False}))
        runner = registry.backends["trt"].make_runner(RunnerRequest(engine, {}, model_kind="engine"))
        runner.activate()
        try:
            (feed,) = list(DataLoader(runner.get_input_metadata(), iterations=1))
            runner.infer(feed)  # the first run allocates
            times = []
            for _ in range(TIMED_RUNS):
                start = time.perf_counter()
                runner.infer(feed)
                times.append((time.perf_counter() - start) * 1000)
        finally:
            runner.deactivate()
            os.remove(engine)
        return statistics.median(times)


def tune(candidates: list[dict[str, Any]], baseline_ms: float, measure: Callable[[tuple[int, ...]], float], mode: str,
         max_combinations: int, threshold: float) -> Outcome:  # fmt: skip
    """The search; ``measure(chosen)`` times the model with those candidates replaced (raises ParityError if it
    cannot be built)."""
    outcome = Outcome(candidates, baseline_ms)
    best = Trial((), baseline_ms)

    def trial(chosen: tuple[int, ...]) -> Trial:
        try:
            result = Trial(chosen, measure(chosen))
        except ParityError as exc:
            result = Trial(chosen, None, first_line(exc, 200))
        outcome.trials.append(result)
        return result

    if mode == "greedy":
        for index in range(len(candidates)):
            if len(outcome.trials) >= max_combinations:
                break
            result = trial((*best.chosen, index))
            if result.latency_ms is not None and (best.latency_ms - result.latency_ms) > threshold * best.latency_ms:
                best = result
    else:
        subsets = itertools.chain.from_iterable(itertools.combinations(range(len(candidates)), r) for r in range(1, len(candidates) + 1))
        for chosen in itertools.islice(subsets, max_combinations):
            result = trial(chosen)
            if result.latency_ms is not None and (best.latency_ms - result.latency_ms) > threshold * best.latency_ms:
                best = result
    outcome.best = best
    return outcome


def run(model: str, params: Mapping[str, Any]) -> tuple[Any, Any, Outcome | None, list[dict]]:
    """The command's work; returns ``(best model proto, base_dir, outcome or None when skipped, config documents)``."""
    import onnx  # here: the commands' --help never needs these

    from parity_surgeon import plugin_tools

    include, exclude = list(params.get("include") or ()), list(params.get("exclude") or ())
    if params.get("load_config_yaml"):
        documents = plugin_tools.load_config(params["load_config_yaml"])
        if include or exclude:
            documents = [d for d in documents if (not include or d["name"] in include) and d["name"] not in exclude]
    else:
        documents, _counts = plugin_tools.find_matches(model, {}, params["plugin_dir"], include, exclude)
    if params.get("save_config_yaml") is not None:
        path = params["save_config_yaml"] or "config.yaml"
        write_text_atomic(path, plugin_tools.dump_config(documents))
        echo(f"wrote {path}")
    candidates = candidates_of(documents)
    echo(f"{len(candidates)} candidate replacement(s)")
    if params.get("skip_autotuning"):
        return None, None, None, documents
    _refuse_dynamic_inputs(model)
    load_extras(params.get("python_plugins") or (), params.get("plugin_libraries") or ())
    with tempfile.TemporaryDirectory(prefix="parity-autotune-") as workdir:
        cache = None if params.get("no_timing_cache") else (params.get("timing_cache") or os.path.join(workdir, "timing.cache"))
        timer = Timer(workdir, cache)
        baseline = timer(model)

        def measure(chosen: tuple[int, ...]) -> float:
            candidate = os.path.join(workdir, "candidate.onnx")
            replaced, _base, _lines = plugin_tools.replace_documents(model, params, params["plugin_dir"], _documents_for(documents, candidates, chosen))
            onnx.save(replaced, candidate)
            return timer(candidate)

        outcome = tune(candidates, baseline, measure, params["autotune_mode"], params["max_combinations"], params["threshold"])
    best_docs = _documents_for(documents, candidates, outcome.best.chosen if outcome.best else ())
    proto, base, _lines = plugin_tools.replace_documents(model, params, params["plugin_dir"], best_docs)
    return proto, base, outcome, documents


def _refuse_dynamic_inputs(model: str) -> None:
    """Timing needs one shape per input, and this command takes none (as Polygraphy's): a dynamic input is refused
    before any build, with the command that makes it static."""
    import onnx  # here: the commands' --help never needs it

    graph = onnx.load(model, load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    dynamic = [i.name for i in graph.input if i.name not in weights and any(not d.HasField("dim_value") for d in i.type.tensor_type.shape.dim)]
    if dynamic:
        raise UsageError(
            f"{model}: plugin autotune times fixed shapes, and input(s) {names_preview(dynamic)} are dynamic; fix them first: "
            f"parity surgeon sanitize {model} --override-input-shapes {dynamic[0]}:[...] -o static.onnx"
        )


def _documents_for(documents: Sequence[Mapping[str, Any]], candidates: Sequence[Mapping[str, Any]], chosen: Sequence[int]) -> list[dict]:
    keep = {(candidates[i]["name"], candidates[i]["index"]) for i in chosen}
    out = []
    for doc in documents:
        instances = [inst for i, inst in enumerate(doc["instances"] or []) if (doc["name"], i) in keep]
        if instances:
            out.append({**doc, "instances": instances})
    return out
