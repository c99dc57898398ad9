"""Search strategies over index lists (nodes in topological order), selectable with ``--mode``.

All assume the full list is interesting and return an interesting subset; ``oracle(subset)`` checks one
subset (cached: a repeated subset costs nothing), ``oracle.many`` several independent ones (in
parallel with ``--jobs``). Indices are in topological order, so contiguous chunks are graph regions.

* ``staged``: a failing region first, in no more checks than ``bisect``
  (binary searches over nested suffixes, then prefixes), then ``dichotomic`` inside it, seeded with the
  region's ends; every smaller failing model is written at once, so ``--max-checks`` / ``--max-time`` or
  Ctrl-C leave the best model so far. Meant for checks that feed cut tensors known-good values (Polygraphy's
  layerwise recipe); with the faulty model's own values (``--iter-inputs``), every node downstream of a NaN
  fails alone, and the suffix search finds that symptom, where ``dichotomic`` finds the origin.
* ``dichotomic`` (``--mode auto``, the CLI's default, picks it when the check reads ``--iter-inputs``):
  insertion-based minimisation with a binary search for each necessary item
  (the dichotomic MUS search of Hemery, Lecoutre, Sais & Boussemart 2006). Each of the k culprits costs
  about log2(n) checks, then one check confirms the set: O(k log n). The result is 1-minimal when the
  failure is monotone (adding nodes never hides it).
* ``quickxplain``: QuickXplain (Junker 2004), divide and conquer, O(k log(n/k)) checks.
* ``ddmin``: delta debugging (Zeller & Hildebrandt 2002) over contiguous regions; 1-minimal even when
  the failure is not monotone, at more checks.
* ``bisect`` / ``linear``: Polygraphy-compatible: shrink to the ancestors of one node (outputs phase),
  then to the descendants of one node (inputs phase), by binary search or by trying every node.

Every strategy is a serial search: ``--jobs`` only checks ahead what it may ask next (the next levels of each
binary search, the next tests of ddmin's ``first``, every node in ``linear``), so the result and the checks
it uses are the same for any ``--jobs`` and ``--executor`` (parity.debug.strategy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from parity.api import Oracle


def speculation(lo: int, hi: int, ways: int) -> list[int]:
    """The midpoints a serial binary search over ``(lo, hi]`` (mid = (lo + hi) // 2) may test next, breadth
    first through its decision tree, at most ``ways`` of them: whichever way each verdict goes, the next
    midpoints are among them (all of the next d levels when ways >= 2**d - 1)."""
    out: list[int] = []
    queue = [(lo, hi)]
    while queue and len(out) < ways:
        a, b = queue.pop(0)
        if b - a <= 1:
            continue
        mid = (a + b) // 2
        out.append(mid)
        queue += [(a, mid), (mid, b)]
    return out


def bisect(oracle: Oracle, lo: int, hi: int, subset_at: Callable[[int], Sequence[int]], hit_lowers_hi: bool = True) -> tuple[int, int]:
    """A serial binary search over ``(lo, hi]``: test ``subset_at((lo + hi) // 2)``; an interesting verdict moves
    ``hi`` there (``hit_lowers_hi``) or ``lo``. With ``--jobs`` the next levels' midpoints are checked ahead
    (:func:`speculation`, :meth:`Oracle.prefetch`); the verdicts used, and so the answer, are the serial search's. Returns (lo, hi)."""
    oracle.expect_search(hi - lo)
    while hi - lo > 1:
        if oracle.jobs > 1:
            oracle.prefetch([subset_at(m) for m in speculation(lo, hi, oracle.jobs)])
        mid = (lo + hi) // 2
        if oracle(subset_at(mid)) == hit_lowers_hi:
            hi = mid
        else:
            lo = mid
    return lo, hi


@dataclass
class Dichotomic:
    name: str = "dichotomic"

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        # Invariant: found + rest is interesting; every item in found is necessary. When rest runs out
        # before found fails (not monotone), found + rest is returned.
        return _dichotomic([], list(items), oracle)


def _first_interesting_prefix(found: list[int], rest: list[int], oracle: Oracle) -> int:
    """Smallest m with found + rest[:m] interesting (m = len(rest) is assumed to be), by binary search (serial
    order; ``--jobs`` checks the next levels ahead, see :func:`bisect`)."""
    return bisect(oracle, 0, len(rest), lambda m: found + rest[:m])[1]


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
            oracle.expect(len(cands) - 1)
            best = current
            for cand, hit in zip(cands, oracle.many(cands[:-1])):  # all used, in this order: parallel with --jobs
                if hit and len(cand) < len(best):
                    best = cand
            return best
        # cands[hi] is assumed failing
        return cands[bisect(oracle, -1, len(cands) - 1, lambda m: cands[m])[1]]


def _polygraphy(linear: bool):
    def factory(options: Mapping[str, Any]) -> PolygraphyStyle:
        return PolygraphyStyle("linear" if linear else "bisect", linear, not options.get("no_reduce_outputs"), not options.get("no_reduce_inputs"), options.get("graph"))

    return factory


# name -> factory(options) -> strategy; options may hold the GraphIndex ("graph") and reduce flags. Registered
# (with their help) by parity_reduce.hooks: the commands look strategies up in the registry only.
STRATEGIES: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "dichotomic": lambda o: Dichotomic(),
    "quickxplain": lambda o: QuickXplain(),
    "ddmin": lambda o: DeltaDebugging(),
    "staged": lambda o: Staged(graph=o.get("graph"), reduce_inputs=not o.get("no_reduce_inputs"), reduce_outputs=not o.get("no_reduce_outputs")),
    "bisect": _polygraphy(False),
    "linear": _polygraphy(True),
}
DEFAULT_MODE = "dichotomic"  # debug precision (a list of nodes, no graph regions)
REDUCE_DEFAULT_MODE = "dichotomic"  # staged finds the symptom, not the origin, when cut tensors carry the faulty model's values


@dataclass
class Staged:
    """Coarse then fine, so a run stopped early (``--max-checks``, ``--max-time``, Ctrl-C) still has a small model.

    Phase 1 (about log2(n) + log2(m) checks, what Polygraphy's bisect spends) tests only *nested* candidate
    sets, so each binary search is over a chain of subsets, not over "ancestors/descendants of node k"
    (those sets are not nested across branches, which misleads a bisection: Polygraphy's inputs phase and
    Parity's ``bisect`` mode stop at a side branch). (a) A binary search over topological suffixes finds
    ``F``, the latest node from which the suffix still fails (its cut tensors fed reference values); one
    check of ``F`` alone settles single-node faults. (b) Among ``F``'s descendants in that suffix, a binary
    search over prefixes finds ``L``, the end of the shortest failing prefix; if ``F``'s descendants alone do
    not fail (faults on separate branches), it searches the whole suffix. The region ``F..L`` is the phase's
    result; every failing candidate smaller than the best so far is written at once by the reducer.

    Phase 2 refines the region toward 1-minimal with the dichotomic search, seeded with ``L`` and ``F``
    (each seed is checked for removal at the end, so the result stays 1-minimal for a monotone check).
    With a graph-less list (precision) it is plain dichotomic.
    """

    name: str = "staged"
    graph: Any = None
    reduce_inputs: bool = True
    reduce_outputs: bool = True

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        items = list(items)
        if self.graph is None or not (self.reduce_inputs and self.reduce_outputs) or not items:
            return Dichotomic().minimize(items, oracle)
        region, seeds = self.coarse(items, oracle)
        return self.refine(region, seeds, oracle)

    def coarse(self, items: list[int], oracle: Oracle) -> tuple[list[int], list[int]]:
        """Phase 1: (a failing region, its boundary nodes ``[F, L]`` that the refinement starts from)."""
        if oracle([]):
            return [], []
        start = _last_interesting_suffix(items, oracle, len(items))
        first, suffix = items[start], items[start:]
        if len(suffix) == 1 or oracle([first]):
            return [first], [first]
        desc = self.graph.descendants()[first]
        region = [i for i in suffix if desc >> i & 1]
        end = _first_interesting_prefix([], region, oracle)
        if end == len(region) and len(region) < len(suffix) and not oracle(region):
            # The failure needs more than F's descendants (e.g. faults on separate branches): the suffix.
            region = suffix
            end = _first_interesting_prefix([], region, oracle)
        region = region[:end]
        return region, [first] + ([region[-1]] if region[-1] != first else [])

    def refine(self, region: list[int], seeds: list[int], oracle: Oracle) -> list[int]:
        """Phase 2: the dichotomic search inside the region, starting from the seeds."""
        if len(region) <= 1:
            return region
        found = _dichotomic(list(seeds), [i for i in region if i not in seeds], oracle)
        for s in seeds:  # seeds were assumed necessary: drop any that is not (1-minimality)
            if s in found and len(found) > 1:
                rest = [i for i in found if i != s]
                if oracle(rest):
                    found = rest
        return sorted(found)


def _last_interesting_suffix(region: list[int], oracle: Oracle, hi: int) -> int:
    """Largest s with region[s:] interesting; region is assumed interesting and region[hi:] known not to be."""
    return bisect(oracle, 0, hi, lambda m: region[m:], hit_lowers_hi=False)[0]


def _dichotomic(found: list[int], rest: list[int], oracle: Oracle) -> list[int]:
    """The dichotomic loop: found + rest is interesting; returns found plus the items of rest it needs."""
    while not oracle(found):
        if not rest:
            return found + rest
        hi = _first_interesting_prefix(found, rest, oracle)
        found.append(rest[hi - 1])
        rest = rest[: hi - 1]
    return sorted(found)
