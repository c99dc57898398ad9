"""Comparison metrics for Parity, registered through ``parity_register_comparators``.

From the CLI: ``parity run m.onnx --onnxrt --onnx-ref --compare-func cosine snr-db --cosine-min 0.9999``.
From Python, by name (default thresholds) or as objects (your thresholds)::

    from parity import Comparator
    from parity_metrics import Cosine, SNR
    Comparator.compare_accuracy(results, compare_func="cosine")
    Comparator.compare_accuracy(results, compare_func=[Cosine(min=0.9999), SNR(min_db={"logits": 30, "": 50})])

Names resolve on first use: plugin discovery imports only ``parity_metrics.hooks``, never numpy.
"""

from __future__ import annotations

from parity.api import lazy_attributes

_NAMES = ("Cosine", "RelativeL2", "SNR", "PSNR", "TopKAgreement", "Metric")
__all__ = sorted(_NAMES)

__getattr__ = lazy_attributes(__name__, dict.fromkeys(_NAMES, "parity_metrics.metrics"))
