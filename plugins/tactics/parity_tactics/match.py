"""Replay decisions as plain data: which of TensorRT's candidate tactics match a recorded one.

Kept apart from the TensorRT adapters so the rules are testable without TensorRT.
"""

from __future__ import annotations

from collections.abc import Sequence

from parity_tactics.replay import Tactic


def matching_choices(recorded: Tactic, candidates: Sequence[Tactic]) -> tuple[list[int], str]:
    """Indices of ``candidates`` to allow for a layer whose recorded tactic is ``recorded``.

    Exact identity first (tactic, implementation and I/O formats, as TensorRT's algorithm selector sees it);
    if none is identical, the same tactic and implementation with other I/O formats (formats can shift when
    a neighbouring layer changes). Returns the indices and how they matched: ``exact``, ``tactic`` or ``none``.
    """
    exact = [i for i, c in enumerate(candidates) if c == recorded]
    if exact:
        return exact, "exact"
    loose = [
        i
        for i, c in enumerate(candidates)
        if c.tactic == recorded.tactic and c.implementation == recorded.implementation
    ]
    if loose:
        return loose, "tactic"
    return [], "none"


def compare_choices(wanted: dict[str, Tactic], chosen: dict[str, Tactic]) -> list[str]:
    """Readable lines for every key whose chosen tactic differs from the replay (after a replayed build)."""
    problems = []
    for key, tactic in wanted.items():
        got = chosen.get(key)
        if got is None:
            continue  # TensorRT did not time this layer/key in this build (e.g. fused away)
        if got.tactic != tactic.tactic or got.implementation != tactic.implementation:
            problems.append(f"{key}: wanted {tactic.label}, TensorRT used {got.label}")
    return problems
