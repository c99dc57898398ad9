"""Parity's reports: ``parity run``'s HTML report (``--save-report-html``), Model Explorer's node data
(``--save-model-explorer``) and pictures of the errors (``--save-heatmaps``, ``--save-error-metrics-plot``,
``--show-*``), added to runs through the hook ``parity_watch_run``; :mod:`parity_reports.api` for the plugins
whose commands write these reports too (``debug localize``, ``debug reduce``, ``debug precision``)."""

__version__ = "0.1.0"
