"""Find the tactics that separate bad builds from good ones.

Polygraphy reports the set difference "tactics seen in bad replays minus tactics seen in good replays", so a
single mislabelled or lucky good build that happens to contain the culprit hides it completely. Here every
(layer or key, tactic) pair seen in a bad replay is scored with a **one-sided Fisher exact test** on the 2x2
table

    ==========  =============  ================
                has the tactic  lacks the tactic
    bad builds        b             n_bad - b
    good builds       g             n_good - g
    ==========  =============  ================

i.e. the hypergeometric probability of seeing at least ``b`` of the ``b + g`` builds that contain the tactic
among the ``n_bad`` bad ones by chance. Lower p means the tactic tracks failure more tightly. Ties are broken
by the separation ``b/n_bad - g/n_good`` (Youden's J: recall on bad builds minus the rate on good builds).
Only tactics enriched in bad builds (J > 0) are reported; tactics equally tied get the same rank.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from parity.api import UsageError
from parity_tactics.replay import LoadedSet, Tactic, TacticReplay, load_replays, tactic_hex

NO_RESULT = "Could not determine potentially bad tactics. Try generating more tactic replay files?"
# ``inspect diff-tactics --json``: its schema is parity_tactics/schemas/diff-tactics.schema.json (docs/formats.md)
FORMAT = "parity-diff-tactics"
VERSION = 1


def fisher_one_sided(b: int, n_bad: int, g: int, n_good: int) -> float:
    """P(X >= b) for X ~ Hypergeometric(population n_bad + n_good, successes b + g, draws n_bad)."""
    total, hits = n_bad + n_good, b + g
    denominator = math.comb(total, n_bad)
    numerator = sum(
        math.comb(hits, k) * math.comb(total - hits, n_bad - k) for k in range(b, min(hits, n_bad) + 1)
    )
    return min(1.0, numerator / denominator)


@dataclass(frozen=True)
class Suspect:
    """A tactic for one layer/key, with how often it appears in bad and good builds."""

    key: str
    tactic: Tactic
    bad: int
    good: int
    n_bad: int
    n_good: int
    p_value: float
    rank: int = 0

    @property
    def separation(self) -> float:
        return self.bad / self.n_bad - self.good / self.n_good

    @property
    def bad_only(self) -> bool:
        return self.good == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "key": self.key,
            "tactic": self.tactic.to_json(),
            "bad": self.bad,
            "n_bad": self.n_bad,
            "good": self.good,
            "n_good": self.n_good,
            "p_value": self.p_value,
            "separation": round(self.separation, 6),
            "bad_only": self.bad_only,
        }


@dataclass
class DiffResult:
    n_good: int
    n_bad: int
    suspects: list[Suspect] = field(default_factory=list)
    reason: str | None = None  # why nothing could be determined
    skipped: list[tuple[str, str]] = field(default_factory=list)
    key_kind: str = "layer"
    unexplained: int = 0  # bad replays whose tactics equal a good replay's: tactics cannot explain them

    @property
    def determined(self) -> bool:
        return bool(self.suspects)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "good_replays": self.n_good,
            "bad_replays": self.n_bad,
            "determined": self.determined,
            "reason": self.reason,
            "method": "one-sided Fisher exact test per (key, tactic); ties by bad rate minus good rate",
            "unexplained_bad_replays": self.unexplained,
            "suspects": [s.to_json() for s in self.suspects],
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
        }


def _counts(replays: Sequence[TacticReplay]) -> dict[tuple[str, Tactic], int]:
    counts: dict[tuple[str, Tactic], int] = defaultdict(int)
    for replay in replays:
        for key, tactic in replay.items():
            counts[(key, tactic)] += 1
    return counts


def diff_replays(good: Sequence[TacticReplay], bad: Sequence[TacticReplay]) -> DiffResult:
    """Rank the tactics of ``bad`` replays by how well they separate bad builds from ``good`` ones."""
    sources = {r.source for r in [*good, *bad]}
    if len(sources) > 1:
        raise UsageError(
            "cannot compare algorithm-selector replays (TensorRT 10.x layers) with timing-cache replays "
            "(keys); record all builds the same way"
        )
    kind = next(iter(sources)) if sources else "algorithm-selector"
    result = DiffResult(len(good), len(bad), key_kind="layer" if kind == "algorithm-selector" else "timing-cache key")
    if not bad:
        result.reason = "no bad tactic replays"
        return result
    if not good:
        result.reason = "no good tactic replays to compare against"
        return result
    good_sets = {frozenset(r.items()) for r in good}
    result.unexplained = sum(frozenset(r.items()) in good_sets for r in bad)
    good_counts, bad_counts = _counts(good), _counts(bad)
    suspects = []
    for (key, tactic), b in bad_counts.items():
        g = good_counts.get((key, tactic), 0)
        if b / len(bad) <= g / len(good):
            continue
        suspects.append(Suspect(key, tactic, b, g, len(bad), len(good), fisher_one_sided(b, len(bad), g, len(good))))
    if not suspects:
        result.reason = "every tactic in the bad replays is at least as common in the good ones"
        return result
    suspects.sort(key=lambda s: (s.p_value, -s.separation, s.key, tactic_hex(s.tactic.tactic), s.tactic.label))
    ranked, previous, rank = [], None, 0
    for index, suspect in enumerate(suspects, start=1):
        score = (round(suspect.p_value, 12), round(suspect.separation, 12))
        if score != previous:
            rank, previous = index, score
        ranked.append(Suspect(**{**suspect.__dict__, "rank": rank}))
    result.suspects = ranked
    return result


def diff_tactics(dir: str | None = None, good: Sequence[str] = (), bad: Sequence[str] = ()) -> DiffResult:
    """The Python API of ``parity inspect diff-tactics``: ``--dir`` (with good/ and bad/) or ``--good``/``--bad``.

    ``good``/``bad`` entries may be files or directories and take precedence over ``dir/good``, ``dir/bad``.
    A missing ``good/`` or ``bad/`` under ``dir`` counts as empty (``debug build`` makes only what it needs).
    """
    good_set, bad_set = load_good_bad(dir, good, bad)
    result = diff_replays(good_set.replays, bad_set.replays)
    result.skipped = [*good_set.skipped, *bad_set.skipped]
    return result


def load_good_bad(dir: str | None = None, good: Sequence[str] = (), bad: Sequence[str] = ()) -> tuple[LoadedSet, LoadedSet]:
    """The good and bad replays :func:`diff_tactics` compares (same arguments)."""
    if dir is None and (not good or not bad):
        raise UsageError("give --dir (holding good/ and bad/), or both --good and --bad")
    if dir is not None and not Path(dir).is_dir() and not (good and bad):
        raise UsageError(f"no such directory: {dir}")

    def pick(explicit: Sequence[str], sub: str) -> list[str]:
        if explicit:
            return list(explicit)
        folder = Path(dir or ".") / sub
        return [str(folder)] if folder.is_dir() else []

    return load_replays(pick(good, "good")), load_replays(pick(bad, "bad"))
