"""The ``--torch`` runner's options, parsed without importing torch: ``parity run --help`` and a usage error must
not pay for PyTorch (about 1.5 s), and the registry builds these for every ``parity run``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import click

from parity.api import UsageError

DTYPES = ("fp32", "fp16", "bf16")
MARK_ALL = "mark all"
_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


def runner_options() -> tuple[click.Option, ...]:
    from parity.api import GreedyOption  # here: discovery imports hooks, which calls this only when the registry is built

    return (
        click.Option(
            ["--torch-model"],
            metavar="PATH",
            default=None,
            help="torch: the PyTorch program to run, a .pt2 (torch.export.save) or a TorchScript file; MODEL stays what the other runners run [MODEL].",
        ),
        click.Option(["--torch-device"], metavar="DEVICE", default=None, help="torch: cpu, cuda or cuda:N [cpu]."),
        click.Option(
            ["--torch-dtype"],
            type=click.Choice(DTYPES),
            default=None,
            help="torch: fp32, or fp16/bf16 autocast on the device (torch.autocast; fp16 outputs stay fp16, bf16 ones come back as fp32) [fp32].",
        ),
        GreedyOption(
            ["--torch-outputs"],
            metavar="NAME",
            help="torch: return these intermediate tensors too: names, or 'mark all' for every tensor (layerwise; against an ONNX MODEL: those it has too).",
        ),
    )


def parse_device(text: str | None) -> str:
    """``cpu`` (default), ``cuda`` or ``cuda:N``; anything else is refused in one line. Whether the device exists is
    checked when the runner loads (that needs torch)."""
    device = (text or "cpu").strip().lower()
    if not _DEVICE.fullmatch(device):
        raise UsageError(f"--torch-device: '{text}' is not a device this runner takes; give cpu, cuda or cuda:N")
    return device


def parse_dtype(text: str | None) -> str:
    dtype = (text or "fp32").strip().lower()
    if dtype not in DTYPES:
        raise UsageError(f"--torch-dtype: '{text}' is not one of {', '.join(DTYPES)}")
    return dtype


def parse_outputs(values: Iterable[str] | str | None) -> list[str] | str | None:
    """``--torch-outputs`` -> tensor names, :data:`MARK_ALL` (``mark all``, ``all`` or ``*``) for every tensor, or
    ``None`` (the program's own outputs only). ``mark all`` does not mix with names."""
    items = [v for value in ([values] if isinstance(values, str) else values or ()) for v in str(value).split()]
    if not items:
        return None
    lowered = [v.lower() for v in items]
    if lowered in (["mark", "all"], ["*"], ["all"]):
        return MARK_ALL
    if "*" in lowered or ("mark" in lowered and "all" in lowered):
        raise UsageError("--torch-outputs: 'mark all' (or '*') marks every tensor and cannot be combined with names")
    return list(dict.fromkeys(items))


def settings(request: Any) -> dict[str, Any]:
    """The runner's parsed settings from a :class:`parity.api.RunnerRequest` (each refused in one line when bad)."""
    return {
        "device": parse_device(request.get("torch_device")),
        "dtype": parse_dtype(request.get("torch_dtype")),
        "outputs": parse_outputs(request.get("torch_outputs")),
    }
