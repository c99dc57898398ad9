"""Tolerances: per-output values and precision presets.

The presets are starting points sized to each format's unit roundoff (fp16: 2^-11, bf16: 2^-8) times the
error growth of a typical network, so that healthy reduced-precision runs pass while real bugs (errors of
order 1) still fail. Explicit ``--atol/--rtol`` values override a preset.
"""

from __future__ import annotations

from collections.abc import Mapping

from parity.util.record import Record, fill

PRESETS: dict[str, tuple[float, float]] = {
    "fp32": (1e-5, 1e-5),
    "tf32": (1e-3, 1e-3),
    "fp16": (1e-2, 1e-2),
    "bf16": (5e-2, 5e-2),
    "fp8": (1e-1, 1e-1),
    "int8": (1e-1, 1e-1),
}
ERROR_STATS = ("elemwise", "max", "mean", "median", "quantile")


class PerOutput(Record, frozen=True):
    """A value per output name, with ``""`` as the default for the rest."""

    values: Mapping[str, object]

    def __init__(self, values: Mapping[str, object]) -> None:
        fill(self, locals())

    def for_output(self, name: str) -> object:
        return self.values.get(name, self.values.get(""))


def tolerances(atol: Mapping[str, float] | float | None, rtol: Mapping[str, float] | float | None, preset: str | None) -> tuple[PerOutput, PerOutput]:
    base_atol, base_rtol = PRESETS[preset or "fp32"]

    def build(given, base):
        if given is None:
            given = {}
        if not isinstance(given, Mapping):
            given = {"": float(given)}
        return PerOutput({"": base, **given})

    return build(atol, base_atol), build(rtol, base_rtol)
