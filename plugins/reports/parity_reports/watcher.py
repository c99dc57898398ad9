"""``parity run``'s reports, as a run watcher (hook ``parity_watch_run``): the pictures of the errors
(:mod:`parity_reports.plots`), the HTML report (:mod:`parity_reports.html_report`) and Model Explorer's node
data (:mod:`parity_reports.model_explorer`), each imported only when its option is given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parity.api import FinishedRun, RunReporter, RunWatcher, UsageError, check_output_path, command_line, statistics_level
from parity_reports.hooks import PICTURES, REPORT_FLAGS, REPORTS


class ReportWatcher(RunWatcher):
    """What the run's options ask for. Made before any work, once the core has checked its own output paths:
    the report files' paths are checked here, in the order the options are listed."""

    def __init__(self, options: Mapping[str, Any], reporter: RunReporter) -> None:
        """``reporter``: the run's (a complete ``parity.RunReporter``: the engine completes one that lacks
        ``note`` or ``progress`` before it calls the hook)."""
        for option in REPORTS:  # a bad output path fails before any work
            if options.get(option):
                check_output_path(options[option], REPORT_FLAGS[option])
        self.reporter = reporter
        self.html = options.get("save_report_html")
        self.explorer = options.get("save_model_explorer")
        self.pictures = None
        if any(options.get(name) for name in PICTURES):
            from parity_reports.plots import ErrorPictures  # only with a picture flag: matplotlib is imported when it draws

            self.pictures = ErrorPictures.from_options(options, reporter.warning, reporter.progress)
        self.collector = None
        if self.html or self.explorer:
            from parity_reports.html_report import ReportCollector

            self.collector = ReportCollector(samples=bool(self.html))
        # what the comparisons must compute: the pictures plot the error medians, the HTML report and Model
        # Explorer read each output's histogram (details), none of them a percentile
        self.statistics = statistics_level(["report"] * bool(self.pictures) + ["histogram"] * bool(self.collector))

    def check(self) -> None:
        if self.pictures is not None:
            self.pictures.check()  # matplotlib installed, folders, a display: before any work

    def check_model(self, model: str | None, kind: str | None) -> None:
        if self.explorer and kind != "onnx":
            what = f"{model} is not an ONNX model" if model else "give the ONNX model that was run"
            raise UsageError(f"--save-model-explorer: {what} (Model Explorer's node data is keyed by ONNX node names)")

    def on_compared(self, index: int, pair: Any, actual: Mapping[str, Any], reference: Mapping[str, Any]) -> None:
        if self.pictures is not None and self.pictures.heatmaps:
            self.pictures.on_compared(index, pair, actual, reference)
        if self.collector is not None:
            self.collector.on_compared(index, pair, actual, reference)

    def on_finished(self, run: FinishedRun) -> None:
        if self.pictures is None:
            return
        self.pictures.finish(run.summary.accuracy)
        written = self.pictures.written
        for folder in dict.fromkeys(p.parent for p in written):
            self.reporter.note(f"wrote {sum(p.parent == folder for p in written)} PNG file(s) to {folder}")

    def on_reported(self, run: FinishedRun) -> None:
        if self.html:
            from parity_reports.html_report import run_report_data, write_html_report

            write_html_report(self.html, run_report_data(run.summary, run.code, run.layerwise, self.collector, run.model, command_line()))
        if self.explorer:
            self._write_model_explorer(self.explorer, run)

    def _write_model_explorer(self, path: str, run: FinishedRun) -> None:
        """``--save-model-explorer``: the first compared pair's errors per node (:mod:`parity_reports.model_explorer`)."""
        # here: only --save-model-explorer needs them (the first-divergence report, ONNX node ids)
        from parity.api import first_divergence
        from parity_reports.model_explorer import error_node_data, write_node_data

        reports = run.layerwise if run.layerwise is not None else first_divergence(run.summary, run.model)
        if not reports:
            raise UsageError("--save-model-explorer: nothing was compared")
        if len(reports) > 1:
            self.reporter.warning(f"--save-model-explorer: {len(reports)} pairs were compared; {path} holds the first ({reports[0].actual} vs {reports[0].reference})")
        report = reports[0]
        details = self.collector.details(report.actual, report.reference, report.iteration) if self.collector else {}
        rows = [{"name": t.name, "passed": t.passed, "max_abs": t.max_abs, **_counts(details.get(t.name, {}))} for t in report.tensors]
        data = error_node_data(run.model, rows, report.first.name if report.first else None, f"parity: max abs error, {report.actual} vs {report.reference}")
        write_node_data(path, data)


def _counts(detail: Mapping[str, Any]) -> dict[str, Any]:
    return {k: detail.get(k) for k in ("atol", "nan", "inf")}
