"""Per-output option names must name something: ``--atol lgits:1e-3`` (the output is ``logits``) is an exit 2
with a did-you-mean, not a tolerance that silently applies to nothing.

The per-output options are every registered metric's options that say so (``option.per_output``, or a metavar
starting ``[OUT:]``): the simple metric's ``--atol``, ``--rtol`` and ``--check-error-stat``, parity-metrics'
``--cosine-min``. Their names are checked at the first point the outputs are known: for an
ONNX model before any runner is built (its graph outputs; every tensor when outputs are marked; the
``--load-outputs`` names), and again against the first compared pair (:meth:`OutputNames.on_compared`), which
covers engines and tensors that were not marked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from parity.errors import UsageError
from parity.util.text import did_you_mean, names_preview

if TYPE_CHECKING:  # pragma: no cover
    from parity.registry import Registry


def per_output_params(registry: Registry) -> dict[str, str]:
    """``{parameter name: flag}`` of every metric option whose values are ``[OUT:]VALUE``."""
    found: dict[str, str] = {}
    for spec in registry.comparators.values():
        for option in spec.options:
            if option.name and (getattr(option, "per_output", False) or str(getattr(option, "metavar", "") or "").startswith("[OUT:]")):
                found[option.name] = max(option.opts, key=lambda o: o.startswith("--"))
    return found


def named(value: Any) -> list[str]:
    """The output names in an option's value: ``("y:1e-3", "1e-5")`` -> ``["y"]``; a mapping's non-empty keys."""
    if value is None or isinstance(value, (int, float, bool)):
        return []
    if isinstance(value, Mapping):
        return [str(k) for k in value if k]
    values = [value] if isinstance(value, str) else list(value)
    names = []
    for text in values:
        if isinstance(text, str):
            name, sep, _ = text.rpartition(":")
            if sep and name:
                names.append(name)
    return names


class OutputNames:
    """The per-output names a run's options give, checked against the outputs once they are known."""

    def __init__(self, given: Mapping[str, list[str]]) -> None:
        self.given = {flag: names for flag, names in given.items() if names}  # {"--atol": ["lgits"]}
        self.checked = False

    @classmethod
    def from_options(cls, params: Mapping[str, Any], registry: Registry) -> OutputNames:
        return cls({flag: named(params.get(name)) for name, flag in per_output_params(registry).items()})

    def __bool__(self) -> bool:
        return bool(self.given)

    def check(self, known: Iterable[str], what: str = "the outputs") -> None:
        known = list(dict.fromkeys(known))
        for flag, names in self.given.items():
            for name in names:
                if name not in known:
                    raise UsageError(f"{flag}: no output '{name}'{did_you_mean(name, known)}; {what}: {names_preview(known) or 'none'}")

    def check_model(self, model: str | None, kind: str | None, golden: Any, marked: bool, external_data_dir: str | None = None) -> None:
        """Before any runner is built: an ONNX model's outputs (every tensor when ``marked``) and the golden ones."""
        if not self.given or not model or kind != "onnx":
            return
        from parity import onnx_models  # here: only a run with per-output names reads the graph this way

        proto = onnx_models.load(model, load_external_data=False, external_data_dir=external_data_dir, ignore_external_data=True)
        graph = proto.graph
        known = [o.name for o in graph.output]
        if marked:
            known += [out for node in graph.node for out in node.output if out] + [i.name for i in graph.input]
        for _, iterations in golden or ():
            for result in iterations[:1]:
                known += list(result.keys())
        self.check(known, "the model's outputs" if not marked else "the model's tensors")

    def on_compared(self, index: int, pair: Any, actual: Mapping[str, Any], reference: Mapping[str, Any]) -> None:
        """The first compared pair: its outputs are what the names must match."""
        if self.checked:
            return
        self.checked = True
        self.check([*actual.keys(), *reference.keys()], "the compared outputs")
