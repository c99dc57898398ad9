"""What other plugins use of parity-reports: their commands write the same HTML report and Model Explorer node
data (``debug localize``, ``debug reduce``, ``debug precision``). Declare ``parity-reports`` as a dependency to
import it.

Names resolve lazily, as :mod:`parity.api`'s do: a command's ``--help`` imports this module for
:func:`report_file_options` and never loads numpy or onnx.

* :func:`report_file_options`: ``--save-report-html PATH`` and (unless ``model_explorer=None``)
  ``--save-model-explorer PATH.json``, whose help names what the nodes carry.
* :func:`write_html_report` (path, data): renders the report's data (documented in
  :mod:`parity_reports.html_report`) into one self-contained page, written atomically; :func:`tensor_detail`,
  :func:`layerwise_section` and :func:`layerwise_panels` build its parts.
* :func:`adapter_node_ids`, :func:`error_node_data`, :func:`fp32_node_data`, :func:`write_node_data`: Model
  Explorer's node data (:mod:`parity_reports.model_explorer`).
"""

from __future__ import annotations

from parity.api import lazy_attributes

_EXPORTS: dict[str, str] = {
    "report_file_options": "parity_reports.options",
    "write_html_report": "parity_reports.html_report",
    "tensor_detail": "parity_reports.html_report",
    "layerwise_section": "parity_reports.html_report",
    "layerwise_panels": "parity_reports.html_report",
    "adapter_node_ids": "parity_reports.model_explorer",
    "error_node_data": "parity_reports.model_explorer",
    "fp32_node_data": "parity_reports.model_explorer",
    "write_node_data": "parity_reports.model_explorer",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_attributes(__name__, _EXPORTS, " (parity_reports.api.__all__ lists the names)", keep=True)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
