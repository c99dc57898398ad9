"""Polygraphy's accuracy results file: ``parity run --save-accuracy-results FILE`` writes it, ``parity check
accuracy FILE`` re-checks it against other thresholds without running anything.

The file is Polygraphy 0.53's JSON (``polygraphy run --save-accuracy-results`` writes the same; each reads the
other's): ``AccuracyResults``, one ``AccuracyResult`` per comparison function (an alias such as
``distance_metrics`` is two: ``l2`` and ``cosine_similarity``), each mapping a runner pair to one
``{output: result}`` per iteration. A result holds the measured metric(s) and the threshold it was checked
against (``L2Result``, ``OutputCompareResult`` for ``simple``...); a function without re-checkable metrics
(``indices``) saves a bare verdict, as Polygraphy does.

Parity's ``simple`` metric divides the relative error by ``|reference|`` with zeros replaced by float32's smallest
normal (Polygraphy: float64's epsilon): a saved ``max_reldiff`` differs from Polygraphy's only where the reference
holds zeros.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import click

from parity.api import GreedyOption, RunWatcher, UsageError, check_output_path, echo, parse_per_name, write_text_atomic
from parity.commands import ParityCommand, verbosity_options
from parity_polygraphy.hooks import threshold_option

# Polygraphy's single-metric result classes: {--compare name: (result class, threshold class, field)}
SINGLE = {
    "l2": ("L2Result", "L2Threshold", "l2_norm"),
    "cosine_similarity": ("CosineSimilarityResult", "CosineSimilarityThreshold", "cosine_similarity"),
    "psnr": ("PsnrResult", "PsnrThreshold", "psnr"),
    "snr": ("SnrResult", "SnrThreshold", "snr"),
    "perceptual_metrics": ("PerceptualMetricsResult", "LpipsThreshold", "lpips"),
}
HIGHER_IS_BETTER = {"cosine_similarity", "psnr", "snr"}
SIMPLE_FIELDS = ("max_absdiff", "max_reldiff", "mean_absdiff", "mean_reldiff", "median_absdiff", "median_reldiff", "quantile_absdiff", "quantile_reldiff")
# Parity's simple metric's value names for Polygraphy's fields
_SIMPLE_VALUES = {f: f.replace("diff", "") for f in SIMPLE_FIELDS}
ALIASES = {"distance_metrics": ("l2", "cosine_similarity"), "quality_metrics": ("psnr", "snr")}
STATS = ("max", "mean", "median", "quantile")
CHOICES = "simple, l2, cosine_similarity, distance_metrics, psnr, snr, quality_metrics, perceptual_metrics"


# --- writing ------------------------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def encode_check(check: Any, part: str) -> Any:
    """One output's result of one comparison function, as Polygraphy encodes it."""
    if part in SINGLE and SINGLE[part][2] in check.values:
        result, threshold, field = SINGLE[part]
        bound = ("min_" if field in HIGHER_IS_BETTER else "max_") + field
        return {field: _number(check.values[field]), "thresholds": {"threshold": check.thresholds.get(bound), "polygraphy_class": threshold}, "polygraphy_class": result}
    if part == "simple" and "max_abs" in check.values:
        stat = check.thresholds.get("check_error_stat", "elemwise")
        encoded: dict[str, Any] = {f: _number(check.values.get(_SIMPLE_VALUES[f])) for f in SIMPLE_FIELDS}
        tolerances = {"atol": check.thresholds.get("atol"), "rtol": check.thresholds.get("rtol")}
        encoded["thresholds"] = {"check_error_stat": stat, **tolerances, "polygraphy_class": "SimpleThreshold"}
        encoded["passed"] = bool(check.passed) if stat == "elemwise" else None  # elemwise: a verdict no statistic gives back
        encoded["polygraphy_class"] = "OutputCompareResult"
        return encoded
    return bool(check.passed)  # indices, a shape mismatch, another plugin's metric: a verdict, nothing to re-check


def encode_run(pairs: Sequence[Any]) -> dict[str, Any]:
    """``AccuracyResults`` of a run's pairs (:class:`parity.api.FinishedRun`'s ``summary.accuracy``)."""
    metrics: list[str] = []
    for pair in pairs:
        for it in pair.iterations:
            metrics += [c.metric for c in it.checks if c.metric != "missing" and c.metric not in metrics]
    results = []
    for metric in metrics:
        for part in ALIASES.get(metric, (metric,)):
            lst = []
            aggregation = "per_sample"
            for pair in pairs:
                aggregation = "average" if getattr(pair, "aggregation", "") == "average" else aggregation
                iterations = [{c.name: encode_check(c, part) for c in it.checks if c.metric == metric} for it in pair.iterations]
                lst.append([[pair.actual, pair.reference], iterations])
            results.append({"lst": lst, "aggregation": aggregation, "polygraphy_class": "AccuracyResult"})
    return {"lst": results, "polygraphy_class": "AccuracyResults"}


def save(path: str, results: Mapping[str, Any]) -> None:
    write_text_atomic(path, json.dumps(results, indent=4) + "\n")


class AccuracyResultsWatcher(RunWatcher):
    """``parity run --save-accuracy-results FILE``: the file is written once the run is reported, pass or fail."""

    statistics = "report"  # Polygraphy's fields: max, mean and median errors (the values), no details

    def __init__(self, path: str, options: Mapping[str, Any]) -> None:
        self.path = path
        check_output_path(path, "--save-accuracy-results")

    def on_reported(self, run: Any) -> None:
        save(self.path, encode_run(run.summary.accuracy))


# --- reading and re-checking --------------------------------------------------------------------------------


class Saved:
    """One saved comparison function's results: ``fields`` names what it measured (``[]``: bare verdicts)."""

    def __init__(self, fields: list[str], aggregation: str, pairs: list[tuple[tuple[str, str], list[dict[str, Any]]]]) -> None:
        self.fields, self.aggregation, self.pairs = fields, aggregation, pairs


def _fields(record: Any) -> list[str]:
    if not isinstance(record, Mapping):
        return []
    if record.get("polygraphy_class") == "OutputCompareResult":
        return list(SIMPLE_FIELDS)
    return [field for _, _, field in SINGLE.values() if field in record][:1]


def load(path: str) -> list[Saved]:
    """The file's comparisons, or a one-line usage error naming the file and what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not an accuracy results file (cannot read it as JSON: {exc})") from None
    try:
        if data.get("polygraphy_class") != "AccuracyResults":
            raise ValueError("it holds no AccuracyResults (write one with parity run --save-accuracy-results)")
        saved = []
        for result in data["lst"]:
            pairs = [((str(pair[0]), str(pair[1])), [dict(it) for it in iterations]) for pair, iterations in result["lst"]]
            records = [r for _, its in pairs for it in its for r in it.values()]
            fields = next((_fields(r) for r in records if not isinstance(r, bool)), [])
            saved.append(Saved(fields, str(result.get("aggregation", "per_sample")), pairs))
        return saved
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise UsageError(f"{path}: not an accuracy results file ({exc})") from None


class Threshold:
    """What a re-check applies to one output: Polygraphy's ``SimpleThreshold`` or a single-metric threshold."""

    def __init__(self, part: str, limit: float | None = None, stat: str = "", atol: float = 1e-5, rtol: float = 1e-5) -> None:
        self.part, self.limit, self.stat, self.atol, self.rtol = part, limit, stat, atol, rtol

    @property
    def fields(self) -> list[str]:
        return list(SIMPLE_FIELDS) if self.part == "simple" else [SINGLE[self.part][2]]

    def encoded(self) -> dict[str, Any]:
        if self.part == "simple":
            return {"check_error_stat": self.stat, "atol": self.atol, "rtol": self.rtol, "polygraphy_class": "SimpleThreshold"}
        return {"threshold": self.limit, "polygraphy_class": SINGLE[self.part][1]}

    def passed(self, values: Mapping[str, Any]) -> bool:
        if self.part == "simple":
            absdiff, reldiff = values.get(f"{self.stat}_absdiff"), values.get(f"{self.stat}_reldiff")
            if absdiff is None or reldiff is None:
                raise UsageError(
                    f"the saved results hold no '{self.stat}' statistic (quantile is saved only by runs with --check-error-stat quantile): choose max, mean or median"
                )
            return not (_exceeds(absdiff, self.atol) and _exceeds(reldiff, self.rtol))
        field = SINGLE[self.part][2]
        value = values.get(field)
        if value is None or math.isnan(value):
            return False
        return value >= self.limit if field in HIGHER_IS_BETTER else value <= self.limit  # type: ignore[operator]

    def describe(self, values: Mapping[str, Any]) -> str:
        if self.part == "simple":
            absdiff, reldiff = values.get(f"{self.stat}_absdiff"), values.get(f"{self.stat}_reldiff")
            return f"{self.stat} error: abs {absdiff:.5g} (atol {self.atol:g}) | rel {reldiff:.5g} (rtol {self.rtol:g})"
        field = SINGLE[self.part][2]
        what = "min required" if field in HIGHER_IS_BETTER else "tolerance"
        return f"{field}: {values.get(field):.5g} ({what}: {self.limit:g})"


def _exceeds(value: float | None, tol: float) -> bool:
    return value is None or math.isnan(value) or value > tol


def _table(values: Any, cast: Any, flag: str, default: Any) -> dict[str, Any]:
    return {"": default, **parse_per_name(list(values or ()), cast, flag)}


def thresholds_from(params: Mapping[str, Any]) -> list[tuple[str, dict[str, Threshold]]]:
    """``[(part, {output or "": Threshold})]`` for each comparison ``--compare`` names (aliases expanded, each
    once), read from the threshold flags; ``indices`` has no saved metric to re-check: refused."""
    from parity_polygraphy.cli_metrics import FIELDS, PARAMS  # the run's defaults and flags: one table

    names = list(params.get("compare_func") or ()) or ["simple"]
    parts = list(dict.fromkeys(p for n in names for p in ALIASES.get(n, (n,))))
    out = []
    for part in parts:
        if part == "indices":
            raise UsageError("check accuracy: indices saves a verdict, not a metric, so it cannot be re-checked: re-run it (parity run --load-outputs)")
        if part == "simple":
            stats = _table(params.get("check_error_stat"), str, "--check-error-stat", "elemwise")
            bad = sorted({s for s in stats.values() if s not in STATS})
            if bad:
                why = "an elemwise check has no statistic to re-check" if bad == ["elemwise"] else f"unknown statistic {', '.join(bad)}"
                raise UsageError(f"check accuracy --compare simple: {why}; choose --check-error-stat max, mean, median or quantile")
            atols = _table(params.get("atol"), float, "--atol", 1e-5)
            rtols = _table(params.get("rtol"), float, "--rtol", 1e-5)
            keys = set(stats) | set(atols) | set(rtols)
            table = {k: Threshold("simple", stat=stats.get(k, stats[""]), atol=atols.get(k, atols[""]), rtol=rtols.get(k, rtols[""])) for k in keys}
        elif part == "perceptual_metrics":
            limits = _table(params.get("lpips_threshold"), float, "--lpips-threshold", 0.1)
            table = {k: Threshold(part, v) for k, v in limits.items()}
        elif part in FIELDS:
            field = FIELDS[part]
            limits = _table(params.get(PARAMS[part]), float, field.flag, field.default)
            table = {k: Threshold(part, v) for k, v in limits.items()}
        else:
            raise UsageError(f"check accuracy: unknown comparison '{part}'; choose from {CHOICES}")
        out.append((part, table))
    return out


def recheck(path: str, saved: list[Saved], requested: list[tuple[str, dict[str, Threshold]]], average: bool) -> tuple[bool, list[str], list[Saved]]:
    """Each requested comparison matched to the saved one measuring the same fields (the others are left out, as
    Polygraphy does), its records given the new thresholds; ``(passed, summary lines, the re-checked results)``."""
    remaining, checked, lines, passed = list(saved), [], [], True
    for part, table in requested:
        fields = next(iter(table.values())).fields
        match = next((s for s in remaining if s.fields == fields), None)
        if match is None:
            held = ", ".join(str(s.fields[0] if len(s.fields) == 1 else ("simple" if s.fields else "verdicts only")) for s in saved) or "nothing"
            raise UsageError(f"{path}: holds no {part} results to re-check (it holds: {held})")
        remaining.remove(match)
        checked.append(match)
        match.aggregation = "average" if average else "per_sample"
        for (a, b), iterations in match.pairs:
            for it in iterations:
                for output, record in it.items():
                    if isinstance(record, bool):
                        raise UsageError(f"{path}: output '{output}' was saved without metrics (a shape mismatch?): it cannot be re-checked; re-run it")
                    record["thresholds"] = table.get(output, table[""]).encoded()
                    if "passed" in record:
                        record["passed"] = None  # the verdict comes from the statistic now
            ok, pair_lines = _judge_pair(part, table, iterations, average, f"Accuracy Summary | {a} vs. {b} | ")
            passed = passed and ok
            lines += pair_lines
    return passed, lines, checked


def _judge_pair(part: str, table: Mapping[str, Threshold], iterations: list[dict[str, Any]], average: bool, prefix: str) -> tuple[bool, list[str]]:
    if not average:
        verdicts = [all(table.get(o, table[""]).passed(r) for o, r in it.items()) for it in iterations]
        matched, total = sum(verdicts), len(verdicts)
        rate = 100.0 * matched / total if total else 100.0
        return matched == total, [f"{prefix}Passed: {matched}/{total} iterations | Pass Rate: {rate:.2f}% ({part})"]
    outputs = list(dict.fromkeys(o for it in iterations for o in it))
    lines, ok = [], 0
    for output in outputs:
        records = [it[output] for it in iterations if output in it]
        threshold = table.get(output, table[""])
        averaged: dict[str, Any] = {}
        for field in threshold.fields:
            got = [r[field] for r in records if r.get(field) is not None]
            averaged[field] = sum(got) / len(got) if got else None
        verdict = threshold.passed(averaged)
        ok += verdict
        lines.append(f"    {output} | average {threshold.describe(averaged)} | {'PASSED' if verdict else 'FAILED'}")
    return ok == len(outputs), [f"{prefix}Passed: {ok}/{len(outputs)} outputs ({part}, averaged over {len(iterations)} iterations)", *lines]


# --- the command --------------------------------------------------------------------------------------------


# Polygraphy's comparison flags that cannot act on saved metrics (no tensors are read): each refused in one line
_CANNOT = {
    "no_shape_check": ("--no-shape-check", "shapes were checked when the results were saved"),
    "fail_fast": ("--fail-fast", "every saved iteration is re-checked at once"),
    "infinities_compare_equal": ("--infinities-compare-equal", "the saved statistics were computed already"),
    "error_quantile": ("--error-quantile", "the saved quantile was computed already"),
    "index_tolerance": ("--index-tolerance", "indices results hold no metric to re-check"),
    "save_heatmaps": ("--save-heatmaps", "no output tensors are saved in the file"),
    "show_heatmaps": ("--show-heatmaps", "no output tensors are saved in the file"),
    "save_error_metrics_plot": ("--save-error-metrics-plot", "no output tensors are saved in the file"),
    "show_error_metrics_plot": ("--show-error-metrics-plot", "no output tensors are saved in the file"),
    "compare_func_script": ("--compare-func-script", "a custom function's saved results are re-checked with the thresholds of the metric it saved"),
}


def make_command() -> click.Command:
    params: list[click.Parameter] = [
        click.Argument(["path"], type=click.Path(dir_okay=False)),
        GreedyOption(["--compare", "--compare-func", "compare_func"], metavar="NAME", help=f"Comparisons to re-check: {CHOICES} [simple]."),
        click.Option(["--check-average"], is_flag=True, help="Judge each output's metric averaged over the iterations."),
        click.Option(["--save-accuracy-results"], type=click.Path(dir_okay=False), help="Write the re-checked results (with the new thresholds) to PATH."),
        GreedyOption(["--atol", "--abs-tol"], metavar="[OUT:]TOL", help="simple: absolute tolerance [1e-5]."),
        GreedyOption(["--rtol", "--rel-tol"], metavar="[OUT:]TOL", help="simple: relative tolerance [1e-5]."),
        GreedyOption(["--check-error-stat"], metavar="[OUT:]STAT", help="simple: the statistic re-checked: max, mean, median, quantile (elemwise cannot be)."),
        *(threshold_option(part) for part in ("l2", "cosine_similarity", "psnr", "snr", "perceptual_metrics")),
    ]
    for name, (flag, _) in _CANNOT.items():
        is_flag = name in ("no_shape_check", "fail_fast", "infinities_compare_equal", "show_heatmaps", "show_error_metrics_plot")
        many = name in ("error_quantile", "index_tolerance")
        params.append(click.Option([flag, name], is_flag=is_flag, default=None, multiple=many, help="Refused here: saved results hold no tensors."))
    command = ParityCommand(
        "accuracy",
        params=params,
        callback=accuracy_command,
        help=ACCURACY_HELP,
        short_help="Re-check saved accuracy results (--save-accuracy-results) against other thresholds.",
    )
    return verbosity_options(command)


ACCURACY_HELP = """Re-check the metrics PATH holds (parity run --save-accuracy-results, or Polygraphy's) against
other thresholds, without running anything. Exit 0: every re-checked comparison passes; 1: one fails.

\b
  parity run model.onnx --onnxrt --onnxrt=graph-optimization-level=disable --compare l2 --save-accuracy-results acc.json
  parity check accuracy acc.json --compare l2 --l2-threshold 1e-3
  parity check accuracy acc.json --compare simple --check-error-stat max --atol 1e-4 --check-average
Only the comparisons --compare names are re-checked; simple needs a statistic (--check-error-stat max, mean,
median or quantile): an elemwise verdict cannot be rebuilt from saved statistics."""


def accuracy_command(path: str, **params: Any) -> int:
    for name, (flag, why) in _CANNOT.items():
        if params.get(name) not in (None, False, ()):
            raise UsageError(f"check accuracy {flag}: cannot apply to saved results: {why}")
    out = params.get("save_accuracy_results")
    if out:
        check_output_path(out, "--save-accuracy-results")
    saved = load(path)  # the file first: a wrong path is the first thing to say
    requested = thresholds_from(params)
    passed, lines, checked = recheck(path, saved, requested, bool(params.get("check_average")))
    for line in lines:
        echo(line)
    if out:
        lst = [{"lst": [[list(p), its] for p, its in s.pairs], "aggregation": s.aggregation, "polygraphy_class": "AccuracyResult"} for s in checked]
        save(out, {"lst": lst, "polygraphy_class": "AccuracyResults"})
    echo("PASSED | Accuracy results passed the requested thresholds." if passed else "FAILED | Accuracy results did not pass the requested thresholds.")
    return 0 if passed else 1
