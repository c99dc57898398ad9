"""Registers the metrics and their threshold options. Imports click and the core only: numpy loads
when a metric is built (``factory``), i.e. when ``parity run`` compares outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from parity import hookimpl


def _threshold(options: Mapping[str, Any], key: str, option: str, default: float) -> Any:
    """``--cosine-min 0.999 probs:0.9999`` -> ``{"": 0.999, "probs": 0.9999}``; numbers pass through (Python API)."""
    from parity.api import parse_per_name  # here: discovery imports this module, `parity --help` never parses a threshold

    value = options.get(key)
    if value is None or value == ():
        return default
    if isinstance(value, (int, float, Mapping)):
        return value
    return {"": default, **parse_per_name([value] if isinstance(value, str) else value, float, option)}


def _cosine(options: Mapping[str, Any]):
    from parity_metrics.metrics import Cosine

    return Cosine(min=_threshold(options, "cosine_min", "--cosine-min", 0.999))


def _rel_l2(options: Mapping[str, Any]):
    from parity_metrics.metrics import RelativeL2

    return RelativeL2(max=_threshold(options, "rel_l2_max", "--rel-l2-max", 1e-3))


def _snr(options: Mapping[str, Any]):
    from parity_metrics.metrics import SNR

    return SNR(min_db=_threshold(options, "snr_min", "--snr-min", 40.0))


def _psnr(options: Mapping[str, Any]):
    from parity_metrics.metrics import PSNR

    return PSNR(min_db=_threshold(options, "psnr_min", "--psnr-min", 40.0), peak=options.get("psnr_peak"))


def _topk(options: Mapping[str, Any]):
    from parity_metrics.metrics import TopKAgreement

    k = options.get("topk_agree_k")
    return TopKAgreement(k=1 if k is None else k, min=_threshold(options, "topk_agree_min", "--topk-agree-min", 1.0))


def _threshold_option(flag: str, help: str) -> click.Option:
    # greedy and per-output like --atol: "--cosine-min 0.999 logits:0.9999"
    from parity.api import GreedyOption  # as above: only when the comparators register

    return GreedyOption([flag], metavar="[OUT:]VALUE", help=help)


@hookimpl
def parity_register_comparators(register):
    from parity.api import ComparatorSpec  # here, not at the top: `parity --help` imports this module and never needs the registry

    cosine_min = _threshold_option("--cosine-min", "cosine: lowest similarity that passes [0.999].")
    rel_l2_max = _threshold_option("--rel-l2-max", "rel-l2: highest relative L2 error that passes [1e-3].")
    register(ComparatorSpec("cosine", _cosine, "cosine similarity of each output with the reference", (cosine_min,)))
    register(ComparatorSpec("rel-l2", _rel_l2, "relative L2 error ||a-b||/||b||", (rel_l2_max,)))
    register(ComparatorSpec("snr-db", _snr, "signal-to-noise ratio in dB", (_threshold_option("--snr-min", "snr-db: lowest SNR in dB that passes [40]."),)))
    register(
        ComparatorSpec(
            "psnr-db",
            _psnr,
            "peak signal-to-noise ratio in dB",
            (
                _threshold_option("--psnr-min", "psnr-db: lowest PSNR in dB that passes [40]."),
                click.Option(["--psnr-peak"], type=float, default=None, help="psnr-db: peak value (data range), e.g. 1 or 255 [max |reference|]."),
            ),
        )
    )
    register(
        ComparatorSpec(
            "topk-agree",
            _topk,
            "share of rows whose top-k classes agree (classifier outputs)",
            (
                click.Option(["--topk-agree-k"], type=int, default=None, help="topk-agree: classes compared per row [1]."),
                _threshold_option("--topk-agree-min", "topk-agree: lowest share of agreeing rows that passes, 0..1 [1.0]."),
            ),
        )
    )
