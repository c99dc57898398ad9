"""Plain-text tables for ``inspect tactics`` and ``inspect diff-tactics`` (stable, greppable, no colour)."""

from __future__ import annotations

from collections.abc import Sequence

from parity_tactics.diff import NO_RESULT, DiffResult
from parity_tactics.replay import TacticReplay, tactic_hex


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell; indices in ``right`` are right-aligned (numbers)."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def describe_replay(replay: TacticReplay) -> str:
    what = "Polygraphy tactic replay" if replay.origin == "polygraphy" else "parity tactic replay v1"
    facts = [f"source: {replay.source}"]
    if replay.tensorrt:
        facts.append(f"TensorRT {replay.tensorrt}")
    noun = "layer" if replay.source == "algorithm-selector" else "timing-cache key"
    facts.append(f"{len(replay)} {noun}{'' if len(replay) == 1 else 's'}")
    if replay.timing_cache is not None:
        facts.append(f"embedded timing cache: {len(replay.timing_cache)} bytes")
    head = f"{replay.path}: {what}" if replay.path else what
    return f"{head} ({', '.join(facts)})"


def render_replay(replay: TacticReplay) -> str:
    """The ``parity inspect tactics`` table."""
    rows: list[list[str]] = []
    if replay.source == "algorithm-selector":
        headers = ["#", "Layer", "Tactic", "Implementation", "Inputs -> Outputs", "Time (ms)"]
        for i, (key, t) in enumerate(replay.items(), start=1):
            io = f"{', '.join(map(str, t.inputs))} -> {', '.join(map(str, t.outputs))}" if t.inputs or t.outputs else ""
            impl = "" if t.implementation is None else str(t.implementation)
            rows.append([str(i), key, tactic_hex(t.tactic), impl, io, _ms(t.timing_ms)])
        right = (0, 3, 5)
    else:
        headers = ["#", "Timing-cache key", "Op", "Tactic hash", "Time (ms)"]
        for i, (key, t) in enumerate(replay.items(), start=1):
            rows.append([str(i), key, t.name or "", tactic_hex(t.tactic), _ms(t.timing_ms)])
        right = (0, 4)
    body = table(headers, rows, right) if rows else "(no tactics recorded)"
    return f"{describe_replay(replay)}\n{body}"


def render_diff(result: DiffResult, top: int | None = None) -> str:
    """The ``parity inspect diff-tactics`` report; the first lines match Polygraphy's wording."""
    lines = [f"Loaded {result.n_good} good tactic replays.", f"Loaded {result.n_bad} bad tactic replays."]
    if result.skipped:
        lines.append(f"Skipped {len(result.skipped)} JSON files that are not tactic replays (see --verbose).")
    if result.unexplained:
        lines.append(
            f"Note: {result.unexplained} of {result.n_bad} bad replays used exactly the tactics of a good build, "
            "so tactics alone do not explain those failures."
        )
    if not result.determined:
        lines.append(NO_RESULT)
        if result.reason:
            lines.append(f"Reason: {result.reason}.")
        return "\n".join(lines)
    shown = result.suspects if top is None else result.suspects[:top]
    lines.append(
        f"Found {len(result.suspects)} potentially bad tactics, most suspicious first "
        "(one-sided Fisher exact p-value; 'bad' and 'good' count the builds that used the tactic):"
    )
    rows = [
        [
            str(s.rank),
            s.key,
            s.tactic.label if result.key_kind == "layer" else tactic_hex(s.tactic.tactic),
            f"{s.bad}/{s.n_bad}",
            f"{s.good}/{s.n_good}",
            f"{s.p_value:.3g}",
            "yes" if s.bad_only else "",
        ]
        for s in shown
    ]
    key_header = "Layer" if result.key_kind == "layer" else "Timing-cache key"
    lines.append(table(["Rank", key_header, "Tactic", "Bad", "Good", "p", "Only in bad"], rows, right=(0, 3, 4, 5)))
    if len(shown) < len(result.suspects):
        lines.append(f"... {len(result.suspects) - len(shown)} more (use --top 0 to show all)")
    return "\n".join(lines)
