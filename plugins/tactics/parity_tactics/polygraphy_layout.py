"""Polygraphy 0.53.6's text of ``inspect tactics`` and ``inspect diff-tactics`` (``--format polygraphy``), for
scripts that parse it. Parity's tables stay the default.

``inspect tactics``: ``Layer: NAME`` and ``Algorithm: (Implementation: I, Tactic: T) | Inputs: (...) | Outputs:
(...)`` per layer. ``inspect diff-tactics``: Polygraphy's set difference (per layer, the algorithms of bad replays
that no good replay used), not Parity's ranking, listed as ``Layer: NAME`` / ``Algorithms: [...]``. Only
algorithm-selector replays (the only kind Polygraphy records) have this layout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from parity.api import UsageError
from parity_tactics.replay import Tactic, TacticReplay, TensorFormat

TAB = "    "  # Polygraphy's indent unit
FORMAT_ENV = "PARITY_INSPECT_FORMAT"  # the same variable as the core's `inspect model --format`
NO_RESULT = "Could not determine potentially bad tactics. Try providing more tactic replay files if possible."


def format_option() -> click.Option:
    return click.Option(
        ["--format", "layout"], type=click.Choice(["parity", "polygraphy"]), default=None, envvar=FORMAT_ENV, show_envvar=True,
        help="Text layout: Parity's table (default) or Polygraphy 0.53.6's exact text, for scripts that parse it "
        "(the default when run under the name 'polygraphy').",
    )


def resolve_layout(layout: str | None) -> tuple[str, bool]:
    """The layout and whether it was asked for: the option (or its environment variable), else Polygraphy's under
    the name ``polygraphy`` (not asked for: a replay without Polygraphy's layout then prints Parity's), else Parity's."""
    if layout:
        return layout, True
    return ("polygraphy" if os.path.basename(sys.argv[0] if sys.argv else "") == "polygraphy" else "parity"), False


def has_layout(replays: Sequence[TacticReplay]) -> bool:
    """Polygraphy records algorithm-selector replays only: a timing-cache replay has no Polygraphy layout."""
    return all(r.source == "algorithm-selector" for r in replays)


def message(severity: str, text: str) -> str:
    """``text`` as Polygraphy's logger prints it: ``[I] `` before the first line, four spaces before the others."""
    return f"[{severity}] " + "\n    ".join(str(text).splitlines() or [""])


def _tensor_info(info: TensorFormat) -> str:
    return f"TensorInfo(DataType.{info.dtype}, {tuple(info.strides)}, {info.vectorized_dim}, {info.components_per_element})"


def _infos(infos: Sequence[TensorFormat]) -> str:
    """A tuple's repr: ``(a,)`` for one item."""
    texts = [_tensor_info(i) for i in infos]
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"


def algorithm(tactic: Tactic) -> str:
    """Polygraphy's ``str(Algorithm)``; the tactic id signed, as TensorRT and Polygraphy keep it."""
    signed = tactic.tactic - (1 << 64) if tactic.tactic >= 1 << 63 else tactic.tactic
    return f"(Implementation: {tactic.implementation}, Tactic: {signed}) | Inputs: {_infos(tactic.inputs)} | Outputs: {_infos(tactic.outputs)}"


def _selector_only(replays: Sequence[TacticReplay]) -> None:
    for replay in replays:
        if replay.source != "algorithm-selector":
            raise UsageError(f"--format polygraphy: {replay.path or 'the replay'} is a timing-cache replay; Polygraphy's layout "
                             "shows algorithm-selector replays (per layer) only: give --format parity")


def _loading(replay: TacticReplay) -> str:
    return message("I", f"Loading tactic replay file from {replay.path}")


def replay_text(replay: TacticReplay) -> str:
    """``inspect tactics`` in Polygraphy's layout."""
    _selector_only([replay])
    body = "\n".join(f"Layer: {name}\n{TAB}Algorithm: {algorithm(t)}" for name, t in replay.items())
    return "\n".join([_loading(replay), message("I", body)])


def diff_text(good: Sequence[TacticReplay], bad: Sequence[TacticReplay], skipped: Sequence[tuple[str, str]], verbose: bool) -> str:
    """``inspect diff-tactics`` in Polygraphy's layout: per layer (in the bad replays' order), the algorithms of bad
    replays that no good replay used for that layer."""
    _selector_only([*good, *bad])
    lines = [_loading(r) for r in good] + [message("I", f"Loaded {len(good)} good tactic replays.")]
    if verbose:
        lines.append(message("V", f"Good tactic replays: {[r.path for r in good]}"))
    lines += [_loading(r) for r in bad] + [message("I", f"Loaded {len(bad)} bad tactic replays.")]
    if verbose:
        lines.append(message("V", f"Bad tactic replays: {[r.path for r in bad]}"))
        lines += [message("V", f"{path} does not look like a tactic replay file, skipping.") for path, _ in skipped]
    seen_good: dict[str, set[str]] = {}
    for replay in good:
        for name, tactic in replay.items():
            seen_good.setdefault(name, set()).add(algorithm(tactic))
    suspects: dict[str, dict[str, None]] = {}
    for replay in bad:
        for name, tactic in replay.items():
            text = algorithm(tactic)
            if text not in seen_good.get(name, set()):
                suspects.setdefault(name, {})[text] = None
    if not suspects:
        return "\n".join([*lines, message("I", NO_RESULT)])
    lines.append(message("I", "Found potentially bad tactics:"))
    lines += [message("I", f"Layer: {name}\n{TAB}Algorithms: {list(algos)}") for name, algos in suspects.items()]
    return "\n".join(lines)
