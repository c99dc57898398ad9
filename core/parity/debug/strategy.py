"""The contract between debug commands and search strategies (registered by plugins).

A strategy minimises a list of items (graph nodes, layers: plain ints here) with respect to an
:class:`Oracle` that answers "is this subset still interesting?" (``reduce``: the model built from the
subset still fails; ``precision``: the model with these nodes in fp32 passes). Strategies only see
index subsets; the command decides what a subset means.

Checks have three verdicts: good, bad and unresolved (crashed, timed out, could not find its input, failed
differently from the original). As in Zeller's ddmin, an unresolved subset is neither: it is never
interesting (no reduction step is taken on it) and never counted as passing (``oracle.verdict(subset)``
tells the three apart, and ``oracle.best`` only ever holds an interesting subset).

One answer whatever the parallelism: a strategy is written as a serial search, and its result and the checks it
uses depend on the verdicts only, never on ``--jobs``, ``--executor`` or which check ends first. ``--jobs`` speeds
it up by speculation: :meth:`Oracle.prefetch` checks subsets the search *may* ask for next (the next levels of a
binary search, the next tests of ``first``) in parallel; their verdicts are cached in the session and count (in
the report, ``oracle.best``, the budget) only when the serial search asks for them. (parity_reduce's strategies
share a speculative binary search built on it.)
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

    def prefetch(self, subsets: Sequence[Iterable[int]]) -> None:
        """Check subsets the serial search may ask for next, ``jobs`` at once, without using their verdicts: they
        are cached, and count only when the search asks for them (through ``__call__``, ``many`` or ``first``).
        Nothing runs with one job (or when fewer than two are unknown)."""
        if self.jobs <= 1:
            return
        seen: set[frozenset[int]] = set()
        todo = []
        for s in subsets:
            p = self._prepare(s)
            if (p or self.empty is None) and p not in seen:
                seen.add(p)
                cand = self.candidate(p)
                if self.session.known(cand.key) is None:
                    todo.append(cand)
        todo = todo[: self.ahead(len(todo))]
        if len(todo) > 1:
            self.session.judge_many(todo, consume=False)

    def ahead(self, wanted: int) -> int:
        """How many of ``wanted`` speculative checks may run (a budget may cap it; see parity_reduce's Budget)."""
        return wanted

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
        """Index of the first interesting subset, asking in order and stopping at it, as a serial loop does;
        with ``jobs`` > 1 the next ``jobs`` subsets are checked at once ahead of it (verdicts after the first
        interesting one go unused)."""
        step = max(1, self.jobs)
        for i, subset in enumerate(subsets):
            if i % step == 0:
                self.prefetch(subsets[i : i + step])
            if self(subset):
                return i
        return None
