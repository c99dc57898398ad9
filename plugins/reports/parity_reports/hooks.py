"""Adds the report options to ``parity run`` and watches the runs that ask for a report. Imports only click and
parity: numpy, matplotlib and onnx are imported when a report is asked for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from parity import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from parity.api import RunReporter

# parameter names: the run watcher is made only when one of them is given
REPORTS = ("save_report_html", "save_model_explorer")
REPORT_FLAGS = {"save_report_html": "--save-report-html", "save_model_explorer": "--save-model-explorer"}  # as options.py declares them
PICTURES = ("save_heatmaps", "show_heatmaps", "save_error_metrics_plot", "show_error_metrics_plot")


@hookimpl
def parity_register_options(register):
    # here, not at the top: every command imports this module while discovering plugins
    from parity.api import OptionSpec
    from parity_reports.options import picture_options, report_file_options

    # no owner: a report takes effect whenever the run runs (docs/cli.md, "Every option takes effect")
    options = [*picture_options(), *report_file_options()]
    # writes: run refuses, before any work, a report file that is the model, a file read or another output
    register(OptionSpec("reports", ("run",), options, help="the HTML report, Model Explorer's node data, pictures of the errors", writes=REPORTS))


@hookimpl
def parity_watch_run(options: Mapping[str, Any], reporter: RunReporter) -> Any:
    if not any(options.get(name) for name in (*REPORTS, *PICTURES)):
        return None  # a plain run imports nothing more of this plugin
    from parity_reports.watcher import ReportWatcher

    return ReportWatcher(options, reporter)
