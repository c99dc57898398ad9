"""The contract between debug commands and search strategies (registered by plugins).

A strategy minimises a list of items (graph nodes, layers: plain ints here) with respect to an
:class:`Oracle` that answers "is this subset still interesting?" (``reduce``: the model built from the
subset still fails; ``precision``: the model with these nodes in fp32 passes). Strategies only see
index subsets; the command decides what a subset means.

Checks have three verdicts: good, bad and unresolved (crashed, timed out, could not find its input, failed
differently from the original). As in Zeller's ddmin, an unresolved subset is neither: it is never
interesting (no reduction step is taken on it) and never counted as passing (``oracle.verdict(subset)``
tells the three apart, and ``oracle.best`` only ever holds an interesting subset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from parity.debug.check import BAD, GOOD
from parity.debug.session import Candidate, DebugSession


class Strategy(Protocol):
    name: str

    def minimize(self, items: Sequence[int], oracle: Oracle) -> list[int]:
        """A small interesting subset of ``items`` (``items`` itself is assumed interesting)."""


def subset_key(items: Iterable[int]) -> str:
    """Stable cache/state key of a subset (order does not matter)."""
    ids = sorted(set(items))
    text = ",".join(map(str, ids))
    return f"{len(ids)}:" + (text if len(text) <= 48 else hashlib.sha1(text.encode()).hexdigest()[:20])


class Oracle:
    """Answers subset queries through a :class:`DebugSession` (cached, resumable, maybe parallel).

    ``candidate(subset)`` builds the session candidate for a subset (its artifact writer and info);
    ``interesting_if_bad``: reduce keeps failing subsets, precision keeps passing ones.
    ``closure`` maps a subset to the subset actually checked (e.g. keep inputs fixed); ``empty`` is the
    verdict for the empty subset without a check (reduce: an empty model is not interesting), or ``None``
    when the empty subset is a real candidate to check (precision: every node in fp16).
    """

    def __init__(
        self,
        session: DebugSession,
        candidate: Callable[[frozenset[int]], Candidate],
        *,
        interesting_if_bad: bool = True,
        closure: Callable[[frozenset[int]], frozenset[int]] | None = None,
        empty: bool = False,
    ) -> None:
        self.session = session
        self.candidate = candidate
        self.interesting_if_bad = interesting_if_bad
        self.closure = closure or (lambda s: s)
        self.empty = empty
        self.best: frozenset[int] | None = None  # the smallest interesting subset seen
        self.on_result: Callable[[frozenset[int], bool], Any] | None = None
        self.verdicts: dict[frozenset[int], str] = {}  # prepared subset -> good / bad / unresolved

    @property
    def jobs(self) -> int:
        return self.session.executor.jobs

    def _prepare(self, subset: Iterable[int]) -> frozenset[int]:
        return self.closure(frozenset(subset))

    def verdict(self, subset: Iterable[int]) -> str | None:
        """good / bad / unresolved for a subset already checked, else None."""
        return self.verdicts.get(self._prepare(subset))

    def _note(self, subset: frozenset[int], interesting: bool) -> None:
        if interesting and (self.best is None or len(subset) < len(self.best)):
            self.best = subset
        if self.on_result:
            self.on_result(subset, interesting)

    def expect(self, remaining: int | None) -> None:
        """Strategies say how many more checks they expect (None: cannot tell), shown as the time left."""
        self.session.expect(remaining)

    def expect_search(self, span: int, ways: int = 1) -> None:
        """A (ways+1)-ary search over ``span`` candidates is next: it takes ceil(log_{ways+1} span) rounds of
        ``ways`` checks."""
        rounds = 0
        while span > 1:
            span = -(-span // (ways + 1))
            rounds += 1
        self.expect(rounds * ways)

    def __call__(self, subset: Iterable[int]) -> bool:
        return self.many([subset])[0]

    def many(self, subsets: Sequence[Iterable[int]]) -> list[bool]:
        """Verdicts for independent subsets (checked in parallel with ``--jobs``)."""
        prepared = [self._prepare(s) for s in subsets]
        real = [p for p in prepared if p or self.empty is None]
        verdicts = dict(zip(real, self.session.judge_many([self.candidate(p) for p in real]))) if real else {}
        self.verdicts.update(verdicts)
        wanted = BAD if self.interesting_if_bad else GOOD
        out = []
        for p in prepared:
            interesting = (verdicts[p] == wanted) if p in verdicts else bool(self.empty)  # unresolved: never
            self._note(p, interesting)
            out.append(interesting)
        return out

    def first(self, subsets: Sequence[Iterable[int]]) -> int | None:
        """Index of the first interesting subset, checking lazily (``jobs`` at a time)."""
        step = max(1, self.jobs)
        for start in range(0, len(subsets), step):
            for offset, hit in enumerate(self.many(subsets[start : start + step])):
                if hit:
                    return start + offset
        return None
