"""``parity debug precision`` for strongly typed engines (TensorRT 11 has no per-layer precision flags).

The precision of each node is written into the ONNX model itself: a node "in fp16" reads fp16 copies of
its float inputs (Cast) and its outputs are cast back to fp32 where an fp32 node or a graph output reads
them. Chained fp16 nodes pass fp16 tensors directly (fp16 -> fp32 -> fp16 is exact, so this is only
fewer casts, not different numbers). The search finds a small set of nodes that must stay fp32 for the
check to pass, with the same strategies as ``reduce`` (interesting = passes), so it can return any set
of nodes, not only a prefix or suffix as Polygraphy's did.

A model with external data (past 2 GiB included) is loaded lazily and its float32 weights are never held
in memory: the converter reads them through memory maps (only to find values beyond the fp16 range), a
weight a candidate lowers is converted once into the run's work folder (:mod:`parity_reduce.external`,
at most half the float32 bytes in all, written the first time a candidate needs it), and every candidate
refers to the run's one shared copy of the original data file (a reflink clone where the filesystem has
them) and to those lowered weights: no check copies weights.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from parity.api import (
    Candidate,
    CommandCheck,
    ConvertRequest,
    DebugSession,
    ExitCode,
    ExternalData,
    OriginalNotFailing,
    ParityError,
    PredicateCheck,
    SavedModel,
    Summary,
    UsageError,
    WeightReader,
    get_registry,
    onnx_external,
    save_model,
)
from parity.api import warn as print_warning
from parity_reduce.external import CandidateFiles
from parity_reduce.reducer import Search, data_dir_of, load_model, work_near
from parity_reduce.strategies import DEFAULT_MODE

LOW = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
DIRECTIONS = ("forward", "reverse")  # Polygraphy's --direction: fp32 spans from the inputs, or from the outputs
ENGINE_CONVERTER = "trt"  # the TensorRT plugin's converter (parity_register_converters): never imported here
ENGINE_TOKENS = ("polygraphy_debug.engine", "parity_debug.engine")  # a check naming one of these reads an engine
ONNX_TOKENS = ("polygraphy_debug.onnx", "parity_debug.onnx")
# --fp16 alone is debug precision's -p float16 (no engine); the builder reads it too when engines are built.
# --int8 and --tf32, debug precision's own options, are TensorRT builder flags: they ask for engines.
OWN_BUILDER_FLAGS = ("fp16",)


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
    data_dir: Path | None = None  # where the external tensors of ``model`` resolve
    files: CandidateFiles | None = None  # keeps the lowered weights until the result is saved

    @property
    def checks(self) -> int:
        return self.summary.total

    def save(self, path: str | Path, external: ExternalData | None = None) -> SavedModel:
        """Write the model with ``save_model`` (model and data together, validated on the path by the checker's
        full check and an onnxruntime load, then renamed into place). ``external``: the --save-external-data
        flags; without them weights go inside unless that would pass 2 GiB."""
        return save_model(self.model, path, base_dir=self.data_dir, external=external, what="the mixed-precision model", missing_kernels_ok=True)


class MixedPrecision:
    """Builds the model with a chosen set of nodes kept in fp32 and the other candidates in ``low``, with the
    converter of ``parity convert --fp-to-fp16`` (``parity_surgeon.api.Fp16Converter``, same defaults:
    fp32 graph inputs and outputs, out-of-range weights and their readers kept fp32, op types onnxruntime
    cannot run in fp16 kept fp32). So a search result with no node kept fp32 is exactly convert's model.

    A model with external data (loaded lazily) needs ``data_dir`` (its data folder) and ``files`` (the work
    folder): a build leaves the weights it lowers in their files (``Fp16Converter.stream_build``), and each is
    then pointed at its lowered copy in ``files``, converted the first time a build needs it (the converter's
    own conversion, its ``transform``). No build reads or holds a weight otherwise."""

    def __init__(
        self,
        model: onnx.ModelProto,
        low: str = "float16",
        keep_out_of_range: bool = True,
        *,
        data_dir: str | Path | None = None,
        files: CandidateFiles | None = None,
    ) -> None:
        try:
            from parity_surgeon.api import Fp16Converter
        except ImportError:
            raise ParityError("debug precision converts with parity-surgeon's fp16 converter: pip install -e plugins/surgeon") from None
        self.model = model
        self.files = files
        if files is None and onnx_external.has_external(model):
            raise UsageError("MixedPrecision: a model with external data needs a CandidateFiles work folder")
        self.converter = Fp16Converter(model, keep_io_types=True, keep_out_of_range=keep_out_of_range, low=low, base_dir=data_dir)
        self.reader = WeightReader(data_dir) if files is not None else None
        self.converter.probe_onnxruntime()
        self.names = self.converter.candidates()
        self.candidates = list(range(len(self.names)))

    def name(self, i: int) -> str:
        return self.names[i]

    def build(self, keep_fp32: frozenset[int] | set[int]) -> onnx.ModelProto:
        return self.build_named({self.names[i] for i in keep_fp32})

    def build_named(self, keep_fp32: set[str]) -> onnx.ModelProto:
        if self.files is None:
            return self.converter.build(keep_fp32)[0]
        model, _, transform = self.converter.stream_build(keep_fp32)
        self._point_lowered(model, transform)
        return model

    def _point_lowered(self, model: onnx.ModelProto, transform: Callable[[Any, Any], Any]) -> None:
        """Point each external weight the build lowers (``transform`` converts it; its file still holds
        float32) at its lowered copy in the work folder, written once per weight for the whole search."""
        import numpy as np

        assert self.files is not None and self.reader is not None
        reader = self.reader
        for tensor in onnx_external.tensors(model):
            if not onnx_external.is_external(tensor) or tensor.data_type != TensorProto.FLOAT:
                continue
            probe = transform(tensor, np.empty((0,), np.float32))  # None: stays float32 (save_model's protocol)
            if probe is None:
                continue
            low_type = LOW["bfloat16" if probe.dtype.name == "bfloat16" else "float16"]
            location, offset, _ = onnx_external.external_info(tensor)

            def lowered(t: Any = tensor) -> Any:
                values = transform(t, reader.array(t))
                reader.release(t)
                return np.ascontiguousarray(values).view(np.uint16)  # the stored bytes (bfloat16 as its bits)

            place = self.files.add_data((tensor.name, location, offset, low_type), lowered)
            onnx_external.set_external(tensor, *place)
            tensor.data_type = low_type


def _given(value: Any, default: Any) -> bool:
    return value not in (None, False, (), [], "") and value != default


def engine_options_for(params: Mapping[str, Any], check_argv: list[str] | tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The options each candidate's engine is built with, or None when debug precision builds no engine.

    Engines are built, as by Polygraphy's debug precision, when a TensorRT builder option is given (those the TensorRT
    plugin's converter declares, and --int8/--tf32; not --fp16 alone, which is -p float16, and applies then too), when
    --iter-artifact is an ``.engine`` or when the check names ``polygraphy_debug.engine``/``parity_debug.engine``.
    The TensorRT plugin is reached through the registry, never imported."""
    registry = get_registry()
    converter = registry.converters.get(ENGINE_CONVERTER)
    names = {o.name: o.default for o in converter.options} if converter is not None else {}
    for spec in registry.command_options.values():  # what plugins add to debug precision is for its engines (tactics...)
        if "debug precision" in spec.commands:
            names.update({o.name: o.default for o in spec.options})
    flags = [n for n, default in names.items() if n not in OWN_BUILDER_FLAGS and _given(params.get(n), default)]
    artifact = str(params.get("iter_artifact") or "")
    wanted = flags or artifact.endswith(".engine") or any(tok in ENGINE_TOKENS for tok in check_argv)
    if not wanted:
        return None
    if converter is None:
        what = ", ".join(f"--{n.replace('_', '-')}" for n in flags) or "an engine for the check"
        raise UsageError(f"{what}: debug precision builds TensorRT engines with the TensorRT plugin: pip install parity-trt")
    # tf32: debug precision's flag is on/off; the builder's default (None) is TensorRT's own
    # external_data_dir: a candidate's weights are beside it (the work folder), not in the input's data folder
    return {**params, "tf32": True if params.get("tf32") else None, "save_engine": None, "external_data_dir": None,
            "trt_progress": bool(params.get("trt_progress"))}  # a progress bar per candidate only when asked


def loading_flags(params: Mapping[str, Any]) -> bool:
    """Polygraphy's ONNX loading flags on debug precision: whether to infer shapes (--shape-inference, with ONNX's
    shape inference, which --no-onnxruntime-shape-inference asks for); the others are refused in one line."""
    if params.get("fp_to_fp16"):
        raise UsageError("--fp-to-fp16: debug precision converts to fp16 itself (each candidate is the model in -p's precision "
                         "with the searched nodes kept fp32); give it the float32 model")
    if params.get("ignore_external_data"):
        raise UsageError("--ignore-external-data: debug precision runs and writes candidates with their weights, so it reads them")
    if params.get("model_type") not in (None, "onnx"):
        raise UsageError(f"--model-type {params['model_type']}: debug precision searches an ONNX model (onnx)")
    if params.get("no_onnxruntime_shape_inference") and not params.get("shape_inference"):
        raise UsageError("--no-onnxruntime-shape-inference applies with --shape-inference (debug precision infers shapes only then)")
    return bool(params.get("shape_inference"))


class EngineBuilds:
    """Each candidate also built into an engine (the TensorRT plugin's converter, ``options`` as for
    ``parity convert``): the check reads the engine (``{artifact}``, ``polygraphy_debug.engine``, ``parity_debug.engine``,
    ``$PARITY_DEBUG_ARTIFACT``), the candidate ONNX stays beside it (``polygraphy_debug.onnx``, ``parity_debug.onnx``)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        converter = get_registry().converters.get(ENGINE_CONVERTER)
        if converter is None:
            raise UsageError("building engines for debug precision needs the TensorRT plugin: pip install parity-trt")
        self.converter = converter
        self.options = dict(options)
        self.built: list[str] = []  # each engine built, in order (for the Python API and tests)

    def wrap(self, candidate: Candidate) -> Candidate:
        inner = candidate.make_artifact

        def make_artifact(it: Any) -> str:
            if it.artifact.endswith(".engine"):  # --iter-artifact names the engine: the ONNX goes beside it
                it.artifact = str(Path(it.artifact).with_suffix(".onnx"))
            written = inner(it)
            onnx_path = str(written) if written is not None else it.artifact
            engine = it.slot_path(str(Path(it.default_artifact).with_suffix(".engine")))
            self.converter.convert(ConvertRequest(onnx_path, engine, self.options))
            self.built.append(engine)
            for token in (*ONNX_TOKENS, it.default_artifact):
                if token.endswith(".onnx"):
                    it.substitutions[token] = onnx_path
            for token in ENGINE_TOKENS:
                it.substitutions[token] = engine
            return engine

        return Candidate(candidate.key, make_artifact, candidate.info, candidate.payload)


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
        external_data_dir: str | Path | None = None,
        work_dir: str | Path | None = None,
        direction: str | None = None,
        engine_options: Mapping[str, Any] | None = None,
        shape_inference: bool = False,
    ) -> None:
        if (predicate is None) == (session is None):
            raise UsageError("give PrecisionSearch either a predicate or a DebugSession")
        if direction is not None and (direction not in DIRECTIONS or mode not in ("bisect", "linear")):
            raise UsageError(f"--direction {direction}: expected forward or reverse, with --mode bisect or linear (got --mode {mode})")
        if low not in LOW:
            raise UsageError(f"--precision: expected one of {', '.join(LOW)}, got '{low}'")
        # A Python predicate says "passes"; the session's verdict is "bad", so invert it there.
        self.session = session or DebugSession(PredicateCheck(lambda it: not predicate(it.payload)))  # type: ignore[misc]
        # engine_options (engine_options_for): each candidate also built into an engine, which the check reads
        self.engines = EngineBuilds(engine_options) if engine_options is not None else None
        if self.engines is not None and not isinstance(self.session.check, CommandCheck):
            raise UsageError("debug precision builds engines for a --check command; a Python predicate gets the candidate model")
        loaded = load_model(model, external_data_dir)
        if shape_inference:  # Polygraphy's --shape-inference: every candidate (and its engine) carries the inferred shapes
            loaded = onnx.shape_inference.infer_shapes(loaded)  # a new proto; external weights stay references
        self.base_dir = data_dir_of(model, external_data_dir)
        self.files: CandidateFiles | None = None
        if onnx_external.has_external(loaded):
            if loaded is model:  # the caller's: only its graph is copied (weights are references)
                loaded = onnx.ModelProto()
                loaded.CopyFrom(model)
            self.files = CandidateFiles(loaded, self.base_dir, work_dir if work_dir is not None else work_near(self.session), print_warning)
        self.data_files = onnx_external.data_files(loaded, self.base_dir)  # the input's weights: never written
        self.mixed = MixedPrecision(loaded, low, keep_out_of_range, data_dir=self.base_dir, files=self.files)
        self.mode = mode
        self.low = low
        self.check_original = check_original
        self.direction = direction

    @property
    def data_dir(self) -> Path:
        """Where the candidates' external tensors resolve (a predicate runs one with
        ``parity.api.runtime_bytes(candidate, search.data_dir)``): the work folder, for a model with external data."""
        return self.files.data_dir if self.files is not None else self.base_dir

    def close(self) -> None:
        """Remove the work folder (lowered weights, candidates); results not yet saved lose their weights."""
        if self.files is not None:
            self.files.close()

    def _last_note(self) -> str:
        last = self.session.last_outcome
        return last.note if last is not None and last.note else "unresolved"

    def _span(self, full: list[int], k: int) -> list[int]:
        """The first k candidates (forward) or the last k (reverse), in the converter's (topological) order."""
        return full[:k] if self.direction == "forward" else full[len(full) - k :]

    def _run_span(self, full: list[int], oracle: Any) -> list[int]:
        """Polygraphy's search: the smallest k such that the first (last) k nodes in fp32 pass, by binary search
        over k (bisect: assumes more fp32 nodes never hurt) or k = 1, 2, ... (linear). Known: k = 0 fails, all pass."""
        if self.mode == "linear":
            for k in range(1, len(full)):
                if oracle(self._span(full, k)):
                    return self._span(full, k)
            return full
        bad, good = 0, len(full)
        while good - bad > 1:
            mid = (bad + good) // 2
            if oracle(self._span(full, mid)):
                good = mid
            else:
                bad = mid
        return self._span(full, good)

    def strategy(self) -> Any:
        return get_registry().strategy(self.mode).factory({})  # this plugin's modes are registered like any other

    def run(self) -> PrecisionResult:
        strategy = self.strategy()
        cands = self.mixed.candidates
        # Items are positions in the candidate list; the subset is the set kept in fp32.
        search = Search(self.session, lambda s: self.mixed.build({cands[k] for k in s}), describe=lambda s: f"{len(s)} node(s) in fp32", files=self.files)
        if self.engines is not None:  # the check reads each candidate's engine
            search.candidate = lambda subset, plain=search.candidate: self.engines.wrap(plain(subset))  # type: ignore[method-assign,union-attr]
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
            return PrecisionResult(self.mixed.build(set()), [], [self.mixed.name(i) for i in cands], summary, search.history, self.data_dir, self.files)
        if not oracle(full):
            if oracle.verdict(full) == "unresolved":
                raise ParityError(f"the check of the model with every node in fp32 is unresolved ({self._last_note()}): precision cannot be searched")
            raise AlwaysFails("the check fails even with every node in fp32: precision is not the cause")
        oracle.expect(None)  # until the strategy says how many checks it needs
        keep = frozenset(self._run_span(full, oracle) if self.direction else strategy.minimize(full, oracle))
        if oracle.verdict(keep) is None:
            oracle(keep)
        verified = oracle.verdict(keep) == "good"  # only a checked, passing set is a result
        best = oracle.best if oracle.best is not None and (len(oracle.best) < len(keep) or not verified) else keep
        summary = self.session.finish()
        nodes = sorted(cands[k] for k in best)
        model = self.mixed.build(set(nodes))
        return PrecisionResult(model, [self.mixed.name(i) for i in nodes], [self.mixed.name(i) for i in cands], summary, search.history, self.data_dir, self.files)
