"""Statistics over large tensors with bounded memory.

Scalar statistics are accumulated chunk by chunk (``CHUNK`` elements at a time, float64 accumulators), so
comparing two 64Mi-element outputs needs one float32 scratch buffer rather than several full-size
temporaries. Exact percentiles come from an in-place ``np.partition`` (introselect, O(n)) of that
scratch buffer, which is why percentiles are taken last.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from parity.util.record import DICT, Record, fill

CHUNK = 1 << 18  # 1 MiB of float32: a chunk and its float64 temporaries stay in cache
PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def dot(x: np.ndarray, y: np.ndarray) -> float:
    """Dot product of two 1-D chunks. einsum, not np.dot: OpenBLAS threads its ddot, which on a busy 2-core
    machine measured 30x slower (1.1 s vs 0.13 s over 64Mi float64)."""
    return float(np.einsum("i,i->", x, y))


DOT_BLOCK = 8192  # OpenBLAS's ddot runs on one thread up to 10000 elements: the same bits whatever its settings


def block_dot(x: np.ndarray, y: np.ndarray) -> float:
    """Dot product of two 1-D float64 chunks: BLAS dot products of ``DOT_BLOCK``-element blocks (2x einsum's
    speed), summed in order. Each block stays under OpenBLAS's threading threshold, so the value never depends
    on its thread count, and comparisons run their own threads over chunks."""
    n = x.size
    whole = n - n % DOT_BLOCK
    total = 0.0
    if whole:
        blocks = np.matmul(x[:whole].reshape(-1, 1, DOT_BLOCK), y[:whole].reshape(-1, DOT_BLOCK, 1)).reshape(-1)
        for v in blocks.tolist():
            total += v
    if whole < n:
        total += float(np.dot(x[whole:], y[whole:]))
    return total


def chunks(n: int, size: int = CHUNK):
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def as_float(array: np.ndarray) -> np.ndarray:
    """A flat float view for statistics: float16/ints are upcast chunk-wise by callers via ``np.asarray``."""
    flat = np.asarray(array).reshape(-1)
    if flat.dtype == np.bool_:
        return flat.view(np.uint8)
    return flat


def sqnr_db(signal_sq: float, noise_sq: float) -> float | None:
    """Signal to quantization noise ratio in dB from the sums of squares of the reference and of the error,
    as onnxruntime's ``qdq_loss_debug`` computes it (norms clamped below at float64's epsilon, so identical
    tensors give a large finite value); None when either sum is not finite (NaN/Inf)."""
    if not (math.isfinite(signal_sq) and math.isfinite(noise_sq)):
        return None
    eps = float(np.finfo(np.float64).eps)
    return 20.0 * math.log10(max(math.sqrt(signal_sq), eps) / max(math.sqrt(noise_sq), eps))


class Summary(Record):
    """Statistics of one tensor's finite values (:func:`summarize`); ``percentiles`` keyed ``"50"``, ``"99"``..."""

    count: int
    finite: int
    nan: int
    inf: int
    mean: float
    std: float
    min: float
    max: float
    argmin: int
    argmax: int
    percentiles: dict[str, float]

    def __init__(
        self,
        count: int = 0,
        finite: int = 0,
        nan: int = 0,
        inf: int = 0,
        mean: float = math.nan,
        std: float = math.nan,
        min: float = math.nan,
        max: float = math.nan,
        argmin: int = -1,
        argmax: int = -1,
        percentiles: dict[str, float] = DICT,
    ) -> None:
        fill(self, locals())

    def to_dict(self) -> dict[str, float]:
        out = {k: v for k, v in self.__dict__.items() if k != "percentiles"}
        out.update({f"p{k}": v for k, v in self.percentiles.items()})
        return out

    @property
    def median(self) -> float:
        return self.percentiles.get("50", math.nan)


def summarize(flat: np.ndarray, scratch: np.ndarray | None = None, percentiles: bool = True) -> Summary:
    """Statistics of the finite values of ``flat`` (1-D). ``scratch`` (float32/64, same size) is clobbered."""
    acc = Accumulator(flat.size)
    for sl in chunks(flat.size):
        acc.add(flat[sl], sl.start)
    s = acc.finish()
    if s.finite and percentiles:
        s.percentiles = percentiles_of(flat, scratch, s)
    return s


class Accumulator:
    """Running count/NaN/Inf/sum/sum of squares/min/max of chunks of one flat array, in float64.

    A chunk whose float64 sum is finite holds no NaN or Inf (float32 or smaller values cannot overflow a
    float64 sum), so the common all-finite chunk needs no masks: sum, one cast, one dot and argmin/argmax.
    """

    def __init__(self, count: int) -> None:
        self.s = Summary(count=int(count))
        self.total = 0.0
        self.total_sq = 0.0
        self.lo, self.hi = math.inf, -math.inf

    def add(self, part: np.ndarray, start: int, part64: np.ndarray | None = None) -> bool:
        """Add one chunk (``part64``: the same values as float64, if the caller has them). Returns whether it was all finite."""
        if part.size == 0:
            return True
        if part.dtype.kind not in "fiub":
            part = np.asarray(part, dtype=np.float64)
        total = float(np.add.reduce(part64 if part64 is not None else part, dtype=np.float64))
        s = self.s
        if math.isfinite(total):
            p64 = part64 if part64 is not None else np.asarray(part, dtype=np.float64)
            s.finite += part.size
            self.total += total
            self.total_sq += dot(p64, p64)
            imin, imax = int(np.argmin(part)), int(np.argmax(part))
            cmin, cmax = float(part[imin]), float(part[imax])
            if cmin < self.lo:
                self.lo, s.argmin = cmin, imin + start
            if cmax > self.hi:
                self.hi, s.argmax = cmax, imax + start
            return True
        p = np.asarray(part, dtype=np.float64)
        finite = np.isfinite(p)
        nfinite = int(np.count_nonzero(finite))
        nan = int(np.count_nonzero(np.isnan(p)))
        s.nan += nan
        s.inf += p.size - nfinite - nan
        p = p[finite]
        if p.size == 0:
            return False
        s.finite += nfinite
        self.total += float(p.sum())
        self.total_sq += dot(p, p)
        cmin, cmax = float(p.min()), float(p.max())
        if cmin < self.lo:
            self.lo, s.argmin = cmin, _index_of(part, cmin) + start
        if cmax > self.hi:
            self.hi, s.argmax = cmax, _index_of(part, cmax) + start
        return False

    def merge(self, later: Accumulator) -> None:
        """Fold in the accumulator of the chunks that follow this one's: merging chunk accumulators in chunk order
        gives the same sums (bit for bit) and the same first argmin/argmax as one accumulator fed every chunk."""
        s, t = self.s, later.s
        s.finite += t.finite
        s.nan += t.nan
        s.inf += t.inf
        self.total += later.total
        self.total_sq += later.total_sq
        if later.lo < self.lo:
            self.lo, s.argmin = later.lo, t.argmin
        if later.hi > self.hi:
            self.hi, s.argmax = later.hi, t.argmax

    def finish(self) -> Summary:
        s = self.s
        if s.finite:
            s.mean = self.total / s.finite
            s.std = math.sqrt(max(self.total_sq / s.finite - s.mean * s.mean, 0.0))
            s.min, s.max = self.lo, self.hi
        return s


def _index_of(part: np.ndarray, value: float) -> int:
    hits = np.flatnonzero(np.asarray(part, dtype=np.float64) == value)
    return int(hits[0]) if hits.size else 0


def percentiles_of(flat: np.ndarray, scratch: np.ndarray | None, s: Summary) -> dict[str, float]:
    """``PERCENTILES`` of the finite values of ``flat`` (``s`` is its summary), using ``scratch`` (clobbered;
    it may already hold the values)."""
    if scratch is None or scratch.size < flat.size:
        scratch = np.empty(flat.size, dtype=np.float64 if flat.dtype == np.float64 else np.float32)
    work = scratch[: flat.size]
    if not np.shares_memory(work, flat):  # callers may have filled the scratch with the values already
        for sl in chunks(flat.size):
            work[sl] = flat[sl]
    if s.finite != flat.size:  # drop NaN/Inf so they do not shift the order statistics
        work = work[np.isfinite(work)]
    return percentiles_inplace(work)


def percentiles_inplace(work: np.ndarray) -> dict[str, float]:
    """Exact (linearly interpolated, like ``np.percentile``) ``PERCENTILES`` of ``work``, which is reordered."""
    n = work.size
    values = order_statistics(work, {p: (n - 1) * p / 100.0 for p in PERCENTILES})
    return {f"{p:g}": v for p, v in values.items()}


def order_statistics(work: np.ndarray, ranks: Mapping[Any, float]) -> dict[Any, float]:
    """The values at fractional ``ranks`` (0 .. n-1) of sorted ``work``, linearly interpolated between
    neighbours; ``work`` is reordered in place (selection, not a sort)."""
    n = work.size
    _select(work, {int(math.floor(r)) for r in ranks.values()} | {min(int(math.ceil(r)), n - 1) for r in ranks.values()})
    out = {}
    for key, r in ranks.items():
        lo_i, hi_i = int(math.floor(r)), min(int(math.ceil(r)), n - 1)
        frac = r - lo_i
        out[key] = float(work[lo_i]) * (1 - frac) + float(work[hi_i]) * frac
    return out


def _select(work: np.ndarray, ranks: set[int]) -> None:
    """Put the ``ranks``-th smallest values in place. One kth per ``partition`` call, each on the tail left by
    the previous one: numpy's SIMD quickselect handles a single kth, a list of kth falls back to a much
    slower path (measured 0.2 s vs 1.4 s for 64Mi float32)."""
    start = 0
    for r in sorted(ranks):
        tail = work[start:]
        if r == start:  # the smallest of the tail: argmin and a swap
            i = int(np.argmin(tail))
            tail[0], tail[i] = tail[i], tail[0]
        else:
            tail.partition(r - start)
        start = r + 1


DECADES = tuple(10.0**e for e in range(-8, 4))


def decade_histogram(flat: np.ndarray) -> list[tuple[str, int]]:
    """Counts of |values| per power of ten ("0", "<1e-8", "[1e-8,1e-7)", ..., "NaN/Inf"): error magnitudes
    span decades, so linear bins would put almost everything in the first one."""
    counts = np.zeros(len(DECADES) + 3, dtype=np.int64)
    for sl in chunks(flat.size):
        decade_counts(flat[sl], counts)
    return decade_labels(counts)


def _edges(dtype: np.dtype) -> np.ndarray:
    """The decade edges in ``dtype``, rounded up where needed so comparisons split exactly like float64 ones."""
    exact = np.array(DECADES)
    if dtype == np.float64:
        return exact
    edges = exact.astype(np.float32)
    low = edges.astype(np.float64) < exact
    edges[low] = np.nextafter(edges[low], np.float32(np.inf))
    return edges


_EDGES = {np.dtype(np.float32): _edges(np.dtype(np.float32)), np.dtype(np.float64): _edges(np.dtype(np.float64))}


def decade_counts(part: np.ndarray, counts: np.ndarray) -> None:
    """Add one chunk to ``counts`` (zero, (0, first), decades..., >= last, non-finite). One comparison per
    edge is ~10x faster than ``searchsorted`` here."""
    if part.dtype not in _EDGES:
        part = np.asarray(part, dtype=np.float64)
    part = np.abs(part)
    if part.size == 0:
        return
    top = part.max()
    if not np.isfinite(top):
        finite = np.isfinite(part)
        counts[-1] += part.size - int(np.count_nonzero(finite))
        part = part[finite]
        if part.size == 0:
            return
        top = part.max()
    nonzero = part.size - int(np.count_nonzero(part == 0))
    counts[0] += part.size - nonzero
    ge = [int(np.count_nonzero(part >= e)) if e <= top else 0 for e in _EDGES[part.dtype]]
    counts[1] += nonzero - ge[0]
    for i in range(1, len(ge)):
        counts[1 + i] += ge[i - 1] - ge[i]
    counts[len(ge) + 1] += ge[-1]


def decade_labels(counts: np.ndarray) -> list[tuple[str, int]]:
    edges = DECADES
    labels = ["0", f"(0,{edges[0]:.0e})"]
    labels += [f"[{a:.0e},{b:.0e})" for a, b in zip(edges, edges[1:])]
    labels += [f">={edges[-1]:.0e}", "NaN/Inf"]
    return [(label, int(c)) for label, c in zip(labels, counts) if c]


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two flat arrays in float64, chunked; 1.0 if both are all zero, NaN on NaN."""
    xy = na = nb = 0.0
    for sl in chunks(a.size):
        x = np.asarray(a[sl], dtype=np.float64)
        y = np.asarray(b[sl], dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            xy += dot(x, y)
            na += dot(x, x)
            nb += dot(y, y)
    return cosine_from_dots(xy, na, nb)


def cosine_undefined(xx: float, yy: float, size: int, atol: float = 0.0) -> str | None:
    """Why the cosine similarity of an actual tensor (``xx`` = x.x) with a reference (``yy`` = y.y, ``size``
    elements) means nothing, or ``None`` when it is meaningful.

    A cosine measures whether two tensors point the same way, so it needs a reference with a direction above
    the comparison's own resolution: it is undefined for an empty tensor, with NaN/Inf, for an all-zero
    reference, and for a reference whose root mean square is at most ``atol``. The last is the principled
    "~0": the absolute tolerance is the size of error the check declares irrelevant, so a reference whose
    typical element is within ``atol`` of zero cannot be told from zero by this comparison, and its direction
    is rounding noise (PP-OCR det's probability map is ~1e-8 on random inputs, where two onnxruntime
    configurations have cosine 0.73 and pass).
    """
    if size == 0:
        return "empty tensor"
    if not (math.isfinite(xx) and math.isfinite(yy)):
        return "NaN or Inf in the tensors"
    if yy == 0:
        return "reference is all zero"
    rms = math.sqrt(yy / size)
    if rms <= atol:
        return f"reference ~0: rms {rms:.3g} <= atol {atol:g}"
    return None


def cosine_from_dots(xy: float, xx: float, yy: float) -> float:
    """x.y / (|x| |y|) from the three dot products; 1.0 if both are all zero, 0.0 if one is (whether that
    number means anything: :func:`cosine_undefined`)."""
    if xx == 0 and yy == 0:
        return 1.0
    if xx == 0 or yy == 0:
        return 0.0
    return xy / math.sqrt(xx * yy)
