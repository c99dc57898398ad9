"""What ``parity run`` prints: the CLI's :class:`parity.reporting.RunReporter`. The ``--report`` JSON file is
written by the engine (:func:`parity.reporting.write_report`, re-exported here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from parity.cli.common import echo, warn
from parity.cli.progress import LiveProgress
from parity.reporting import RunReporter, write_report
from parity.util.text import names_preview

__all__ = ["ReportPrinter", "format_check", "format_details", "write_report"]


class ReportPrinter(RunReporter):
    """Human-readable output: one line per output and verdict, details for failures (or with -v); on a
    terminal, a live bar with the iterations done and the time left (:mod:`parity.cli.progress`)."""

    def __init__(self) -> None:
        self._bar = LiveProgress()

    @property
    def details(self) -> str:  # type: ignore[override]
        from parity.cli.common import SETTINGS

        return "all" if SETTINGS["verbose"] else "failures"  # see iteration()

    def progress(self, task: str, done: int, total: int | None, status: str) -> None:
        self._bar.update(task, done, total, status=status)

    def close(self) -> None:
        self._bar.close()

    def warning(self, message: str) -> None:
        self._bar.flush()  # the lines before it first
        warn(message)

    def note(self, message: str) -> None:
        self._bar.flush()
        echo(message)

    def divergence(self, reports: Sequence[Any]) -> None:
        for report in reports:
            if len(report.tensors) < 2:
                continue  # one output: the run's own lines already say everything
            for line in report.lines():
                echo(line)

    def nonfinite(self, reports: Sequence[Any]) -> None:
        for report in reports:
            for line in report.lines():
                echo(line)

    def iteration(self, index: int, pairs: Sequence[Any]) -> None:
        from parity.cli.common import SETTINGS

        for pair in pairs:
            it = pair.iterations[index]
            verdict = "PASSED" if it.passed else "FAILED"
            if getattr(pair, "aggregation", "") == "average":
                verdict += " (per iteration; --check-average judges the average)"
            echo(f"[{pair.actual} vs {pair.reference}] iteration {index}: {verdict}")
            detailed = False
            for check in it.checks:
                echo("  " + format_check(check))
                # details for the first failure only (layerwise runs fail many tensors at once), all with -v
                if check.details and (SETTINGS["verbose"] or (not check.passed and not detailed)):
                    detailed = detailed or not check.passed
                    for line in format_details(check):
                        echo("      " + line)

    def summary(self, summary: Any) -> None:
        from parity.run_engine import median_ms

        self.close()  # the bar goes before the summary lines
        for pair in summary.accuracy:
            for line in dataset_lines(pair, summary.iterations):
                echo(line)
        for name, times in summary.runtimes.items():
            echo(f"{name}: {len(times)} iteration(s), median inference {median_ms(times):.3f} ms")
        for issue in summary.validation[:_VALIDATION_LINES]:
            echo(f"VALIDATION FAILED | {issue.runner} iteration {issue.iteration} output '{issue.output}': {issue.nan} NaN, {issue.inf} Inf")
        if len(summary.validation) > _VALIDATION_LINES:  # a layerwise run: NaN spreads to most tensors after the first
            echo(f"VALIDATION FAILED | ... and {len(summary.validation) - _VALIDATION_LINES} more output(s) with NaN or Inf (all of them in --report)")
        if summary.validated and not summary.validation:
            echo("validation passed: no NaN or Inf in any output")
        failed = [
            f"{c.name} ({p.actual} vs {p.reference})"
            for p in summary.accuracy
            for c in (p.average if p.average is not None else [c for it in p.iterations for c in it.checks])
            if not c.passed
        ]
        failed = list(dict.fromkeys(failed))
        averaged = any(p.average is not None for p in summary.accuracy)
        iterations = f"{summary.iterations} iteration(s)" + (", judged on their average (--check-average)" if averaged else "")
        if summary.passed:
            click.echo(f"PASSED | {iterations} | {summary.seconds:.2f}s")
        else:
            shown = names_preview(failed)
            what = f"mismatched outputs: {shown}" if failed else "validation failed"
            click.echo(f"FAILED | {what}{' (averaged over the iterations)' if averaged and failed else ''} | {summary.seconds:.2f}s")


_DATASET_LINES = 10  # outputs listed per pair (a layerwise run compares hundreds): --report has them all
_SIMPLE_KEYS = (("max_abs", "max abs"), ("max_rel", "max rel"), ("cosine", "cosine"))


def dataset_lines(pair: Any, iterations: int) -> list[str]:
    """The data-set view of a pair (runs of more than one iteration, or judged on the average): per output, each
    metric's mean and worst over the iterations; then the averaged verdicts (``--check-average``)."""
    lines: list[str] = []
    dataset = getattr(pair, "dataset", None) or []
    if dataset and (iterations > 1 or pair.average is not None):
        passed = sum(it.passed for it in pair.iterations)
        lines.append(f"[{pair.actual} vs {pair.reference}] data set, {len(pair.iterations)} iteration(s): {passed} passed every check")
        for entry in dataset[:_DATASET_LINES]:
            lines.append("  " + format_dataset(entry))
        if len(dataset) > _DATASET_LINES:
            lines.append(f"  ... and {len(dataset) - _DATASET_LINES} more (--report FILE lists every output)")
    if pair.average is not None:
        verdict = "PASSED" if pair.passed else "FAILED"
        lines.append(f"[{pair.actual} vs {pair.reference}] average of {len(pair.iterations)} iteration(s) (--check-average): {verdict}")
        shown = [c for c in pair.average if not c.passed][:_DATASET_LINES] or pair.average[:_DATASET_LINES]
        for check in shown:
            lines.append("  " + format_average(check))
        if len(pair.average) > len(shown):
            lines.append(f"  ... and {len(pair.average) - len(shown)} more (--report FILE lists every output)")
    return lines


def _mean_worst(entry: Any, key: str, label: str) -> str:
    worst = entry.worst[key]
    show = (lambda v: f"{v:.6f}") if key == "cosine" else _g  # cosines differ in the 5th decimal
    return f"{label} mean {show(entry.mean[key])} worst {show(worst['value'])} (iteration {worst['iteration']})"


def format_dataset(entry: Any) -> str:
    head = f"{entry.output}: {entry.metric} | {entry.passed_iterations} of {entry.iterations} iterations passed"
    if entry.metric == "simple":
        parts = [_mean_worst(entry, key, label) for key, label in _SIMPLE_KEYS if key in entry.mean]
    elif entry.metric == "indices" and entry.values:
        v = entry.values
        parts = [f"top-{int(v.get('top_k', 1))} agreement {_g(v['agreement'])} over {int(v['rows'])} rows ({int(v['agreeing_rows'])} agree)"]
    else:
        parts = [_mean_worst(entry, key, key) for key in list(entry.mean)[:3]]
    return " | ".join([head, *parts])


def format_average(check: Any) -> str:
    verdict = "PASSED" if check.passed else "FAILED"
    v, t = check.values, check.thresholds
    stat = t.get("check_error_stat")
    if check.metric == "simple" and f"{stat}_abs" in v:
        text = f"{check.name}: {verdict} | average {stat} error abs {_g(v[f'{stat}_abs'])} (atol {_g(t['atol'])}) | rel {_g(v[f'{stat}_rel'])} (rtol {_g(t['rtol'])})"
    else:
        shown = " ".join(f"{k}={_g(val)}" for k, val in v.items())
        text = f"{check.name}: {verdict} | {check.metric} average {shown}".rstrip()
    if check.message and not check.passed:
        text += f" | {check.message}"
    return text


_VALIDATION_LINES = 20


def _g(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _cosine(values: Any) -> str:
    cosine = values.get("cosine")
    if cosine is None or cosine != cosine:  # undefined (None) or NaN from a metric that predates the rule
        return f"cosine n/a ({values.get('cosine_undefined') or 'undefined'})"
    return f"cosine {cosine:.6f}"


def format_check(check: Any) -> str:
    verdict = "PASSED" if check.passed else "FAILED"
    v, t = check.values, check.thresholds
    if check.metric == "simple" and v:
        text = (
            f"{check.name}: {verdict} | max abs {_g(v['max_abs'])} (atol {_g(t['atol'])}) | max rel {_g(v['max_rel'])} (rtol {_g(t['rtol'])})"
            f" | {_cosine(v)} | passes with atol>={_g(v['min_atol'])} or rtol>={_g(v['min_rtol'])}"
        )
        if t.get("check_error_stat", "elemwise") != "elemwise":
            text += f" | checked: {t['check_error_stat']} error"
    else:
        shown = " ".join(f"{k}={_g(val)}" for k, val in v.items())
        text = f"{check.name}: {verdict} | {check.metric} {shown}".rstrip()
    if check.message and not check.passed:
        text += f" | {check.message}"
    elif check.message:
        text += f" ({check.message})"
    return text


def format_details(check: Any) -> list[str]:
    d = check.details
    if not all(key in d for key in ("shape", "dtypes", "actual", "reference", "abs", "rel")):
        # another metric's details (indices: rows, agreeing rows): its values on one line
        return [" ".join(f"{k} {_g(v)}" for k, v in d.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool))]
    lines = [f"shape {d['shape']} dtypes {d['dtypes'][0]} vs {d['dtypes'][1]}, {int(check.values.get('mismatches', 0))} mismatching elements"]
    for label in ("actual", "reference", "abs", "rel"):
        s = d[label]
        title = {"abs": "abs error", "rel": "rel error"}.get(label, label)
        lines.append(
            f"{title:>9}: mean {_g(s['mean'])} std {_g(s['std'])} min {_g(s['min'])} max {_g(s['max'])} "
            f"median {_g(s.get('p50', float('nan')))} p99 {_g(s.get('p99', float('nan')))}"
            + (f" | NaN {s['nan']} Inf {s['inf']}" if s["nan"] or s["inf"] else "")
        )
    hist = d.get("abs_histogram") or []
    if hist:
        total = sum(c for _, c in hist) or 1
        lines.append("abs error histogram:")
        for label, count in hist:
            bar = "#" * max(1, round(30 * count / total)) if count else ""
            lines.append(f"  {label:>16} {count:>10} {bar}")
    return lines
