"""Search strategies over index lists (nodes in topological order), selectable with ``--mode``.

All assume the full list is interesting and return an interesting subset; ``oracle(subset)`` checks one
subset (cached: a repeated subset costs nothing), ``oracle.many`` several independent ones (in
parallel with ``--jobs``). Indices are in topological order, so contiguous chunks are graph regions.

* ``dichotomic`` (default): insertion-based minimisation with a binary search for each necessary item
  (the dichotomic MUS search of Hemery, Lecoutre, Sais & Boussemart 2006). Each of the k culprits costs
  about log2(n) checks, then one check confirms the set: O(k log n). The result is 1-minimal when the
  failure is monotone (adding nodes never hides it).
* ``quickxplain``: QuickXplain (Junker 2004), divide and conquer, O(k log(n/k)) checks.
* ``ddmin``: delta debugging (Zeller & Hildebrandt 2002) over contiguous regions; 1-minimal even when
  the failure is not monotone, at more checks; its subset/complement tests run in parallel with ``--jobs``.
* ``staged``: a failing region first, in about as many checks as ``bisect`` (prefix search for the last
  needed node, then its ancestors cut from the start), then ``dichotomic`` inside it; meant for a
  ``--max-checks`` / ``--max-time`` budget, where the best model so far is what the user keeps.
* ``bisect`` / ``linear``: Polygraphy-compatible: shrink to the ancestors of one node (outputs phase),
  then to the descendants of one node (inputs phase), by binary search or by trying every node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parity.debug.strategy import Oracle


@dataclass
class Dichotomic:
    name: str = "dichotomic"

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        found: list[int] = []
        rest = list(items)
        # Invariant: found + rest is interesting; every item in found is necessary.
        while not oracle(found):
            if not rest:  # not monotone: the full list's failure is not reproduced by found
                return found + rest
            hi = _first_interesting_prefix(found, rest, oracle)
            found.append(rest[hi - 1])
            rest = rest[: hi - 1]
        return sorted(found)


def _first_interesting_prefix(found: list[int], rest: list[int], oracle: Oracle) -> int:
    """Smallest m with found + rest[:m] interesting (m = len(rest) is assumed to be), by (k-ary) search."""
    lo, hi = 0, len(rest)  # found + rest[:lo] is not interesting, found + rest[:hi] is
    while hi - lo > 1:
        ways = min(max(1, oracle.jobs), hi - lo - 1)
        mids = sorted({lo + (hi - lo) * (k + 1) // (ways + 1) for k in range(ways)} - {lo, hi})
        verdicts = oracle.many([found + rest[:m] for m in mids])
        new_lo, new_hi = lo, hi
        for m, hit in zip(mids, verdicts):
            if hit:
                new_hi = m
                break
            new_lo = m
        lo, hi = new_lo, new_hi
    return hi


@dataclass
class QuickXplain:
    name: str = "quickxplain"

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        if oracle([]):
            return []

        def qx(background: list[int], changed: bool, candidates: list[int]) -> list[int]:
            if changed and oracle(background):
                return []
            if len(candidates) == 1:
                return candidates
            half = len(candidates) // 2
            first, second = candidates[:half], candidates[half:]
            d2 = qx(background + first, bool(first), second)
            d1 = qx(background + d2, bool(d2), first)
            return d1 + d2

        return sorted(qx([], False, list(items)))


@dataclass
class DeltaDebugging:
    name: str = "ddmin"
    complement_first: bool = True

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        if oracle([]):
            return []
        current = list(items)
        n = 2
        while len(current) >= 2:
            chunks = _split(current, n)
            complements = [[x for j, c in enumerate(chunks) if j != i for x in c] for i in range(len(chunks))]
            order = [("complement", complements), ("subset", chunks)] if self.complement_first else [("subset", chunks), ("complement", complements)]
            reduced = False
            for kind, tests in order:
                if kind == "complement" and n == 2:
                    continue  # with two chunks, complements are the subsets
                hit = oracle.first(tests)
                if hit is not None:
                    current = tests[hit]
                    n = 2 if kind == "subset" else max(n - 1, 2)
                    reduced = True
                    break
            if reduced:
                continue
            if n >= len(current):
                break
            n = min(2 * n, len(current))
        return sorted(current)


def _split(items: list[int], n: int) -> list[list[int]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


@dataclass
class PolygraphyStyle:
    """Outputs phase then inputs phase, each over 'ancestors of node k' / 'descendants of node k'.

    ``ancestors``/``descendants`` come from the graph (set by the reducer); for plain lists (precision),
    they default to prefixes and suffixes.
    """

    name: str = "bisect"
    linear: bool = False
    reduce_outputs: bool = True
    reduce_inputs: bool = True
    graph: Any = None

    def _up(self, k: int, current: list[int]) -> list[int]:
        if self.graph is None:
            return current[: current.index(k) + 1]
        mask = self.graph.ancestors()[k]
        return [i for i in current if mask >> i & 1]

    def _down(self, k: int, current: list[int]) -> list[int]:
        if self.graph is None:
            return current[current.index(k) :]
        mask = self.graph.descendants()[k]
        return [i for i in current if mask >> i & 1]

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        current = list(items)
        if self.reduce_outputs:
            current = self._phase(current, oracle, self._up, reverse=True)
        if self.reduce_inputs:
            current = self._phase(current, oracle, self._down, reverse=False)
        return sorted(current)

    def _phase(self, current: list[int], oracle: Oracle, candidate, reverse: bool) -> list[int]:
        # Candidates ordered from the smallest model to the full one: outputs phase marks node k's outputs
        # (k walking up), inputs phase marks node k's inputs (k walking down).
        cands = [candidate(k, current) for k in (current if reverse else reversed(current))]
        cands.append(current)
        if self.linear:  # try every node; keep the smallest failing model
            best = current
            for cand, hit in zip(cands, [oracle(c) for c in cands[:-1]]):
                if hit and len(cand) < len(best):
                    best = cand
            return best
        lo, hi = -1, len(cands) - 1  # cands[hi] is assumed failing
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if oracle(cands[mid]):
                hi = mid
            else:
                lo = mid
        return cands[hi]


def _polygraphy(linear: bool):
    def factory(options: Mapping[str, Any]) -> PolygraphyStyle:
        return PolygraphyStyle("linear" if linear else "bisect", linear, not options.get("no_reduce_outputs"), not options.get("no_reduce_inputs"), options.get("graph"))

    return factory


# name -> (factory(options) -> strategy, help); options may hold the GraphIndex ("graph") and reduce flags.
STRATEGIES: dict[str, tuple[Callable[[Mapping[str, Any]], Any], str]] = {
    "dichotomic": (lambda o: Dichotomic(), "binary search for each culprit node, O(k log n) checks (default)"),
    "quickxplain": (lambda o: QuickXplain(), "QuickXplain divide and conquer (Junker 2004), O(k log(n/k)) checks"),
    "ddmin": (lambda o: DeltaDebugging(), "delta debugging over graph regions (Zeller & Hildebrandt 2002); parallel with --jobs"),
    "staged": (
        lambda o: Staged(graph=o.get("graph"), reduce_inputs=not o.get("no_reduce_inputs"), reduce_outputs=not o.get("no_reduce_outputs")),
        "a region in about as many checks as bisect, then dichotomic inside it (for --max-checks/--max-time)",
    ),
    "bisect": (_polygraphy(False), "Polygraphy's bisect: ancestors then descendants of one node, binary search"),
    "linear": (_polygraphy(True), "Polygraphy's linear: try every node as the new output, then input"),
}
DEFAULT_MODE = "dichotomic"


@dataclass
class Staged:
    """Coarse then fine, so a run stopped early (``--max-checks``, ``--max-time``, Ctrl-C) still has a small model.

    Phase 1, bounded like Polygraphy's bisect (about log2(n) + log2(m) checks): a binary search over
    topological prefixes finds the last node the failure needs, ``L`` (the smallest failing prefix ends
    with it; for a numeric fault, the first tensor past the tolerance). The nodes it needs are among its
    ancestors ``A``, and ``A`` fails without a check (``L``'s outputs are the prefix's failing ones). One
    check of ``L`` alone catches single-node faults; otherwise a binary search over "descendants of node
    j within ``A``" (Polygraphy's inputs phase) cuts the region's start. Phase 2 shrinks that region
    toward 1-minimal with the dichotomic search, ``L`` already known necessary; every smaller failing
    model it meets is the new best (the reducer writes it at once), so stopping at any check keeps the
    best so far. With a graph-less list (precision) it is plain dichotomic.
    """

    name: str = "staged"
    graph: Any = None
    reduce_inputs: bool = True
    reduce_outputs: bool = True

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        items = list(items)
        if self.graph is None or not (self.reduce_inputs and self.reduce_outputs) or not items:
            return Dichotomic().minimize(items, oracle)
        region, last = self.coarse(items, oracle)
        return self.refine(region, last, oracle)

    def coarse(self, items: list[int], oracle: Oracle) -> tuple[list[int], int | None]:
        """Phase 1: (a failing region, the node it needs last, or None when no prefix narrowed it)."""
        if oracle([]):
            return [], None
        hi = _first_interesting_prefix([], items, oracle)
        last = items[hi - 1]
        anc = self.graph.ancestors()[last]
        region = [i for i in items[:hi] if anc >> i & 1]
        if len(region) == 1 or oracle([last]):
            return [last], last
        desc = self.graph.descendants()
        # Candidates from the smallest (node `last` alone: known to pass) to the whole region (fails).
        cands = [[i for i in region if desc[j] >> i & 1] for j in reversed(region)]
        lo, hi = 0, len(cands) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if oracle(cands[mid]):
                hi = mid
            else:
                lo = mid
        return cands[hi], last

    def refine(self, region: list[int], last: int | None, oracle: Oracle) -> list[int]:
        """Phase 2: the dichotomic search inside the region (cuts inside it change what its nodes see, so
        ``last`` is not assumed necessary again)."""
        if last is None or len(region) <= 1:
            return region
        return Dichotomic().minimize(region, oracle)
