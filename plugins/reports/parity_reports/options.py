"""The report options, as click options (cheap: imported while plugins are discovered and ``--help`` is built)."""

from __future__ import annotations

import click


def report_file_options(model_explorer: str | None = "per-node errors") -> list[click.Parameter]:
    """``--save-report-html PATH`` and, unless ``model_explorer`` is None, ``--save-model-explorer PATH.json``
    (its help says what the nodes carry). Commands write them with :mod:`parity_reports.html_report` and
    :mod:`parity_reports.model_explorer`, imported only when the option is given."""
    params: list[click.Parameter] = [
        click.Option(["--save-report-html"], type=click.Path(), metavar="PATH", help="Write a self-contained HTML report (charts, tables; no network) to PATH."),
    ]
    if model_explorer is not None:
        what = f"Write Model Explorer node data ({model_explorer}) to PATH.json."
        params.append(click.Option(["--save-model-explorer"], type=click.Path(), metavar="PATH.json", help=what))
    return params


def picture_options() -> list[click.Parameter]:
    """Polygraphy's picture flags (:mod:`parity_reports.plots`)."""
    return [
        click.Option(["--save-heatmaps"], type=click.Path(), metavar="DIR", help="PNG heatmaps of the abs/rel error of 2-D and NCHW outputs (matplotlib)."),
        click.Option(["--show-heatmaps"], is_flag=True, help="Show those heatmaps in windows (needs a display)."),
        click.Option(["--save-error-metrics-plot"], type=click.Path(), metavar="DIR", help="PNG plots of each output's error metrics over the iterations."),
        click.Option(["--show-error-metrics-plot"], is_flag=True, help="Show those plots in windows (needs a display)."),
    ]
