"""``parity debug precision`` for strongly typed engines (TensorRT 11 has no per-layer precision flags).

The precision of each node is written into the ONNX model itself: a node "in fp16" reads fp16 copies of
its float inputs (Cast) and its outputs are cast back to fp32 where an fp32 node or a graph output reads
them. Chained fp16 nodes pass fp16 tensors directly (fp16 -> fp32 -> fp16 is exact, so this is only
fewer casts, not different numbers). The search finds a small set of nodes that must stay fp32 for the
check to pass, with the same strategies as ``reduce`` (interesting = passes), so it can return any set
of nodes, not only a prefix or suffix as Polygraphy's did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from parity.api import DebugSession, ExitCode, OriginalNotFailing, ParityError, PredicateCheck, Summary, UsageError, get_registry, onnx_models, write_bytes_atomic
from parity_reduce.reducer import Search, load_model
from parity_reduce.strategies import DEFAULT_MODE

LOW = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}


class AlwaysFails(ParityError):
    exit_code = ExitCode.MISMATCH


class NotFailing(ParityError):
    """The check of the model in low precision is unresolved: there is no failure to search."""

    exit_code = ExitCode.USAGE


@dataclass
class PrecisionResult:
    model: onnx.ModelProto
    fp32_nodes: list[str]
    candidates: list[str]
    summary: Summary
    history: list = field(default_factory=list)

    @property
    def checks(self) -> int:
        return self.summary.total

    def save(self, path: str | Path) -> None:
        """Write the model if it passes ``parity.onnx_models.validate`` (checker full check, onnxruntime load)."""
        data = self.model.SerializeToString()
        onnx_models.validate(data, f"the mixed-precision model (not written to {path})", missing_kernels_ok=True)
        write_bytes_atomic(path, data)


class MixedPrecision:
    """Builds the model with a chosen set of nodes kept in fp32 and the other candidates in ``low``, with the
    converter of ``parity convert --fp-to-fp16`` (``parity_surgeon.fp16.Fp16Converter``, same defaults:
    fp32 graph inputs and outputs, out-of-range weights and their readers kept fp32, op types onnxruntime
    cannot run in fp16 kept fp32). So a search result with no node kept fp32 is exactly convert's model."""

    def __init__(self, model: onnx.ModelProto, low: str = "float16", keep_out_of_range: bool = True) -> None:
        try:
            from parity_surgeon.fp16 import Fp16Converter
        except ImportError:
            raise ParityError("debug precision converts with parity-surgeon's fp16 converter: pip install -e plugins/surgeon") from None
        self.model = model
        self.converter = Fp16Converter(model, keep_io_types=True, keep_out_of_range=keep_out_of_range, low=low)
        self.converter.probe_onnxruntime()
        self.names = self.converter.candidates()
        self.candidates = list(range(len(self.names)))

    def name(self, i: int) -> str:
        return self.names[i]

    def build(self, keep_fp32: frozenset[int] | set[int]) -> onnx.ModelProto:
        return self.converter.build({self.names[i] for i in keep_fp32})[0]


class PrecisionSearch:
    """Find a small set of nodes that must stay fp32 (Python API of ``parity debug precision``).

    :param predicate: ``f(candidate_model) -> bool``, True when the candidate *passes*; or pass ``session``
        (its check's verdict good means passing).
    """

    def __init__(
        self,
        model: str | Path | onnx.ModelProto,
        predicate: Callable[[onnx.ModelProto], bool] | None = None,
        *,
        session: DebugSession | None = None,
        mode: str = DEFAULT_MODE,
        low: str = "float16",
        keep_out_of_range: bool = True,
        check_original: bool = True,
    ) -> None:
        if (predicate is None) == (session is None):
            raise UsageError("give PrecisionSearch either a predicate or a DebugSession")
        if low not in LOW:
            raise UsageError(f"--precision: expected one of {', '.join(LOW)}, got '{low}'")
        self.mixed = MixedPrecision(load_model(model), low, keep_out_of_range)
        # A Python predicate says "passes"; the session's verdict is "bad", so invert it there.
        self.session = session or DebugSession(PredicateCheck(lambda it: not predicate(it.payload)))  # type: ignore[misc]
        self.mode = mode
        self.low = low
        self.check_original = check_original

    def _last_note(self) -> str:
        last = self.session.last_outcome
        return last.note if last is not None and last.note else "unresolved"

    def strategy(self) -> Any:
        return get_registry().strategy(self.mode).factory({})  # this plugin's modes are registered like any other

    def run(self) -> PrecisionResult:
        strategy = self.strategy()
        cands = self.mixed.candidates
        # Items are positions in the candidate list; the subset is the set kept in fp32.
        search = Search(self.session, lambda s: self.mixed.build({cands[k] for k in s}), describe=lambda s: f"{len(s)} node(s) in fp32")
        oracle = search.oracle(False, empty=None)
        full = list(range(len(cands)))
        passes_low = False
        if self.check_original:  # the model fully in low precision: its failure signature defines bad
            try:
                passes_low = self.session.original(search.candidate(frozenset()), f"the {self.low} model (no node kept fp32)", passing_ok=True) == "good"
            except OriginalNotFailing as exc:
                raise NotFailing(str(exc)) from None
            oracle([])
        if passes_low:  # observed: nothing needs fp32 (convert's model passes)
            summary = self.session.finish()
            return PrecisionResult(self.mixed.build(set()), [], [self.mixed.name(i) for i in cands], summary, search.history)
        if not oracle(full):
            if oracle.verdict(full) == "unresolved":
                raise ParityError(f"the check of the model with every node in fp32 is unresolved ({self._last_note()}): precision cannot be searched")
            raise AlwaysFails("the check fails even with every node in fp32: precision is not the cause")
        oracle.expect(None)  # until the strategy says how many checks it needs
        keep = frozenset(strategy.minimize(full, oracle))
        if oracle.verdict(keep) is None:
            oracle(keep)
        verified = oracle.verdict(keep) == "good"  # only a checked, passing set is a result
        best = oracle.best if oracle.best is not None and (len(oracle.best) < len(keep) or not verified) else keep
        summary = self.session.finish()
        nodes = sorted(cands[k] for k in best)
        return PrecisionResult(self.mixed.build(set(nodes)), [self.mixed.name(i) for i in nodes], [self.mixed.name(i) for i in cands], summary, search.history)
