"""Record and replay TensorRT tactics on both TensorRT lines.

Two mechanisms, chosen by what the installed TensorRT has (never by version-number guesses):

* ``timing-cache`` (TensorRT 10.8+ and 11.x): build with ``BuilderFlag.EDITABLE_TIMING_CACHE`` and a fresh
  (or the user's) timing cache; afterwards ``ITimingCache.queryKeys()``/``query(key)`` give each key's
  ``TimingCacheValue.tacticHash``. Replay loads the recorded cache and writes the wanted tactic back with
  ``ITimingCache.update(TimingCacheKey.parse(key), TimingCacheValue(hash, ms))`` before the build, so the
  builder reuses it instead of timing again. A user's own timing cache (``--load-timing-cache``) stays: the
  replay's embedded cache is combined into it. Whether the engine followed the replay is read from the engine,
  not from the cache Parity itself edited: each op's layer's ``TacticName`` from ``IEngineInspector`` (builds
  get ``ProfilingVerbosity.DETAILED``), compared with the kernel recorded for that op, as TensorRT's
  samples/sampleEditableTimingCache/sampleEditableTimingCache.cpp@v11.0:L457-467, L567-600 checks it.
* ``algorithm-selector`` (TensorRT 10.x only; deprecated in 10.8, removed in 11.0): an ``IAlgorithmSelector``
  whose ``report_algorithms`` records the choice per layer and whose ``select_algorithms`` narrows the
  choices to the recorded tactic.

Both objects are build extensions of the TensorRT plugin (``parity_trt.config``): ``postprocess_config(builder,
network, config)`` before the build and ``after_build(builder, network, config, engine_bytes)`` after it
(``configure``/``finish`` are the same with plain names; ``__call__`` makes them plain config post-processors).
:func:`build_extension` is what this plugin's ``parity_trt_build_extension`` hook returns (parity_tactics.hooks).

Every TensorRT name used here is checked against the 10.x/11.x API manifests by
tests/test_tactics_conformance.py, per line: ``LINE_OF`` says which functions run on one line only.
"""

from __future__ import annotations

import functools
import json
import os
import re
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from parity.api import BackendError, UsageError
from parity_tactics.match import compare_choices, matching_choices
from parity_tactics.options import MECHANISMS
from parity_tactics.replay import Tactic, TacticReplay, TensorFormat, load_replay, tactic_hex

INVALID_TACTIC_HASH = (1 << 64) - 1  # TimingCacheValue.tacticHash of an entry with no tactic

# The capability probes of available_mechanisms(): present on exactly one line each (checked by the tests).
SELECTOR_PROBE = "IAlgorithmSelector"
CACHE_PROBES = ("TimingCacheKey", "BuilderFlag.EDITABLE_TIMING_CACHE")
# Every TensorRT name used here that is not in all releases: selector names until 11.0, cache names from 10.8.
SELECTOR_NAMES = (
    "IAlgorithmSelector", "IAlgorithmSelector.select_algorithms", "IAlgorithmSelector.report_algorithms",
    "IBuilderConfig.algorithm_selector", "IAlgorithm.algorithm_variant", "IAlgorithm.get_algorithm_io_info",
    "IAlgorithm.timing_msec", "IAlgorithmContext.name", "IAlgorithmContext.num_inputs", "IAlgorithmContext.num_outputs",
    "IAlgorithmVariant.tactic", "IAlgorithmVariant.implementation", "IAlgorithmIOInfo.dtype", "IAlgorithmIOInfo.strides",
    "IAlgorithmIOInfo.vectorized_dim", "IAlgorithmIOInfo.components_per_element",
)
CACHE_NAMES = (
    "BuilderFlag.EDITABLE_TIMING_CACHE", "TimingCacheKey", "TimingCacheKey.parse", "TimingCacheValue",
    "TimingCacheValue.tacticHash", "TimingCacheValue.timingMSec", "ITimingCache.queryKeys", "ITimingCache.query",
    "ITimingCache.update",
)
# For the conformance test: functions that run on one line only, and the TensorRT class of variable names.
LINE_OF = {
    "tactic_from_algorithm": "algorithm-selector",
    "_selector_class": "algorithm-selector",
    "_attach_selector": "algorithm-selector",
    "_editable_cache": "timing-cache",
    "_cache_tactics": "timing-cache",
    "_update_cache": "timing-cache",
    "engine_layer_kernels": "timing-cache",
}
VAR_TYPES = {
    "config": "IBuilderConfig",
    "cache": "ITimingCache",
    "existing": "ITimingCache",
    "value": "TimingCacheValue",
    "context": "IAlgorithmContext",
    "algorithm": "IAlgorithm",
    "choice": "IAlgorithm",
    "variant": "IAlgorithmVariant",
    "info": "IAlgorithmIOInfo",
    "embedded": "ITimingCache",
    "engine": "ICudaEngine",
    "inspector": "EngineInspector",
}

# The op is everything up to "(", spaces included, as the sample's sscanf "%128[^(](key: %128[^)])" reads it
# (sampleEditableTimingCache.cpp@v11.0:L117-L139); trailing blanks before "(" are not part of the name.
_LOG_KEY = re.compile(r"Autotuning op ([^(\n]*?[^(\s])\s*\(key:\s*(0x[0-9a-fA-F]+)\)")


def import_trt() -> ModuleType:
    """The TensorRT plugin's :func:`parity_trt.api.import_trt` (one import, one "not installed" message)."""
    # imported here: only builds need the TensorRT plugin (reading replay files does not), and every caller runs
    # inside one of its builds
    from parity_trt.api import import_trt as trt_plugin_import

    return trt_plugin_import()


def available_mechanisms(trt: ModuleType) -> list[str]:
    """Mechanisms this TensorRT supports, preferred first (the timing cache is the non-deprecated one)."""
    from parity_trt.api import has  # here: only builds need it (as in import_trt above)

    found = []
    if all(has(trt, name) for name in CACHE_PROBES):
        found.append("timing-cache")
    if has(trt, SELECTOR_PROBE):
        found.append("algorithm-selector")
    return found


def resolve_mechanism(trt: ModuleType, wanted: str = "auto") -> str:
    have = available_mechanisms(trt)
    if wanted not in MECHANISMS:
        raise UsageError(f"unknown tactics mechanism '{wanted}'; choices: {', '.join(MECHANISMS)}")
    if wanted == "auto":
        if not have:
            raise BackendError(f"TensorRT {trt.__version__} has neither an editable timing cache nor IAlgorithmSelector")
        return have[0]
    if wanted not in have:
        needs = "TensorRT 10.x (removed in 11.0)" if wanted == "algorithm-selector" else "TensorRT 10.8 or newer"
        raise UsageError(f"--tactics-mechanism {wanted} is not available on TensorRT {trt.__version__}; it needs {needs}")
    return wanted


def op_names_from_log(text: str) -> dict[str, str]:
    """Timing-cache key -> op name, from a verbose build log's ``Autotuning op NAME(key: 0x...)`` lines."""
    return {key.lower(): name for name, key in _LOG_KEY.findall(text)}


def _short(dtype: Any) -> str:
    text = str(dtype)
    return text.split(".", 1)[1] if text.startswith("DataType.") else text


def tactic_from_algorithm(context: Any, algorithm: Any) -> Tactic:
    """A :class:`Tactic` from an ``IAlgorithmContext`` and one of its ``IAlgorithm`` choices (10.x)."""
    variant = algorithm.algorithm_variant
    formats = []
    for index in range(context.num_inputs + context.num_outputs):
        info = algorithm.get_algorithm_io_info(index)
        formats.append(TensorFormat(_short(info.dtype), tuple(info.strides), info.vectorized_dim, info.components_per_element))
    return Tactic(
        tactic=variant.tactic,
        implementation=variant.implementation,
        inputs=tuple(formats[: context.num_inputs]),
        outputs=tuple(formats[context.num_inputs :]),
        timing_ms=algorithm.timing_msec,
    )


@functools.cache
def _selector_class(trt: ModuleType) -> type:
    """One ``IAlgorithmSelector`` subclass per TensorRT module; defined lazily so importing needs no TensorRT."""

    from parity_trt.api import guard  # TensorRT swallows callback exceptions: keep them, re-raise after the build

    class ParitySelector(trt.IAlgorithmSelector):
        def __init__(self) -> None:
            trt.IAlgorithmSelector.__init__(self)
            self.replay: TacticReplay | None = None
            self.recorders: list[TacticRecorder] = []
            self.chosen: dict[str, Tactic] = {}
            self.notes: list[str] = []

        @guard("the tactic selector's select_algorithms", default=list)
        def select_algorithms(self, context: Any, choices: Any) -> list[int]:
            everything = list(range(len(choices)))
            wanted = self.replay.tactics.get(context.name) if self.replay is not None else None
            if wanted is None:
                return everything
            picked, how = matching_choices(wanted, [tactic_from_algorithm(context, c) for c in choices])
            if how == "none":
                self.notes.append(f"{context.name}: recorded tactic {wanted.label} is not among TensorRT's choices")
                return everything
            return picked

        @guard("the tactic selector's report_algorithms")
        def report_algorithms(self, contexts: Any, choices: Any) -> None:
            for context, choice in zip(contexts, choices, strict=True):
                self.chosen[context.name] = tactic_from_algorithm(context, choice)
            for recorder in self.recorders:
                recorder.record_selection(self.chosen)

    return ParitySelector


def _attach_selector(trt: ModuleType, config: Any) -> Any:
    """The config's Parity selector, installed if absent, so a replayer and a recorder share the one slot."""
    cls = _selector_class(trt)
    selector = config.algorithm_selector
    if not isinstance(selector, cls):
        if selector is not None:
            raise UsageError("the builder config already has an algorithm selector; tactic recording cannot share it")
        selector = cls()
        config.algorithm_selector = selector
    return selector


def _editable_cache(trt: ModuleType, config: Any, base: bytes | None) -> Any:
    """Switch the config to an editable timing cache holding what the config already had (a user's
    ``--load-timing-cache``) plus ``base`` (a replay's embedded cache), so neither is dropped.

    ``ITimingCache.combine`` appends the input cache's entries and skips conflicting ones (NvInfer.h@v11.0:L10209):
    the user's entries win, the replayed keys are written afterwards by :func:`_update_cache` anyway.
    """
    if config.get_flag(trt.BuilderFlag.DISABLE_TIMING_CACHE):
        raise UsageError("tactic record/replay uses the timing cache on this TensorRT; do not disable the timing cache")
    config.set_flag(trt.BuilderFlag.EDITABLE_TIMING_CACHE)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED  # the engine inspector then names each layer's tactic
    existing = config.get_timing_cache()
    cache = config.create_timing_cache(bytes(existing.serialize()) if existing is not None else b"")
    if base:
        embedded = config.create_timing_cache(base)
        if not cache.combine(embedded, False):
            raise UsageError("the replay's timing cache was written by another TensorRT version or GPU; record the tactics again here")
    if not config.set_timing_cache(cache, False):
        raise BackendError("the timing cache was written by another TensorRT version or GPU; record the tactics again here")
    return cache


def _update_cache(trt: ModuleType, cache: Any, replay: TacticReplay) -> list[str]:
    """Write each recorded tactic into the cache; returns the keys the cache does not hold (update() is False)."""
    missing = []
    for key, tactic in replay.items():
        timing = tactic.timing_ms if tactic.timing_ms is not None else 1.0  # TensorRT's sample uses 1.0 ms
        if not cache.update(trt.TimingCacheKey.parse(key), trt.TimingCacheValue(tactic.tactic, timing)):
            missing.append(key)
    return missing


def _cache_tactics(cache: Any, names: Mapping[str, str]) -> dict[str, Tactic]:
    found = {}
    for key in cache.queryKeys():
        value = cache.query(key)
        if value.tacticHash == INVALID_TACTIC_HASH:
            continue
        text = str(key)
        found[text] = Tactic(value.tacticHash, timing_ms=value.timingMSec, name=names.get(text.lower()))
    return found


def engine_layer_kernels(trt: ModuleType, engine_bytes: bytes) -> list[tuple[str, str]]:
    """``(layer name, TacticName)`` of each layer of a built engine, read with ``IEngineInspector`` as
    sampleEditableTimingCache.cpp@v11.0:L457-467 does (JSON form: Polygraphy's inspect reads ``Name`` and
    ``TacticName``). Without ``ProfilingVerbosity.DETAILED`` a layer's JSON is only its name: no tactic then."""
    from parity_trt.api import get_runtime  # here: it loads the TensorRT plugin's engine module (numpy)

    engine = get_runtime().deserialize_cuda_engine(bytes(engine_bytes))
    if engine is None:
        raise BackendError("TensorRT could not deserialize the engine it just built, so the tactics it used cannot be read")
    inspector = engine.create_engine_inspector()
    layers = []
    for index in range(engine.num_layers):
        layer_info = json.loads(inspector.get_layer_information(index, trt.LayerInformationFormat.JSON))
        if isinstance(layer_info, dict) and layer_info.get("Name"):
            layers.append((str(layer_info["Name"]), str(layer_info.get("TacticName") or "")))
    return layers


def _layer_of(op: str, layers: list[tuple[str, str]], ops: Any = ()) -> tuple[str, str] | None:
    """The engine layer made from an op: the layer named exactly like the op, else the first whose name starts
    with the op's name (the sample's findLayer, sampleEditableTimingCache.cpp@v11.0:L484-498) and is not made
    from a longer op of ``ops`` that also prefixes it (op ``conv1`` never takes the layer of op ``conv10``)."""
    exact = next((layer for layer in layers if layer[0] == op), None)
    if exact is not None:
        return exact
    longer = [other for other in ops if other and other != op and other.startswith(op)]
    return next((layer for layer in layers if layer[0].startswith(op) and not any(layer[0].startswith(o) for o in longer)), None)


# ---- the builder's log: op names for timing-cache keys, and the error of a build that failed -------------------
_TAG = "_parity_tactics_listener"


def _listen(builder: Any, config: Any, owner: Any, callback: Any) -> bool:
    """Give ``callback(severity, message)`` every message the builder's logger gets during this build, where the
    logger offers ``listeners`` (Parity's logger, parity_trt._trt.get_logger); False where it does not.

    The logger is one per process: listeners left by earlier builds (a build that failed never reaches
    ``after_build``) are dropped here; ``_unlisten`` removes ``owner``'s after the build."""
    logger = getattr(builder, "logger", None) if builder is not None else None
    listeners = getattr(logger, "listeners", None)
    if not isinstance(listeners, list):
        return False

    def listener(level: Any, msg: str) -> None:
        callback(level, msg)

    setattr(listener, _TAG, (config, owner))
    listeners[:] = [f for f in listeners if getattr(f, _TAG, (config,))[0] is config]
    listeners.append(listener)
    return True


def _unlisten(builder: Any, owner: Any) -> None:
    listeners = getattr(getattr(builder, "logger", None), "listeners", None) if builder is not None else None
    if isinstance(listeners, list):
        listeners[:] = [f for f in listeners if getattr(f, _TAG, (None, None))[1] is not owner]


def _is_error(trt: ModuleType, level: Any) -> bool:
    try:
        return int(level) <= int(trt.ILogger.Severity.ERROR)
    except (TypeError, ValueError):
        return False


class TacticRecorder:
    """``--save-tactics PATH``: write the tactics TensorRT chose in this build to a replay file.

    Each build re-times its tactics (a fresh timing cache, or TensorRT's cache disabled for the selector)
    unless the config already holds a user's timing cache: repeated ``debug build`` runs must be free to differ.
    """

    def __init__(self, path: str | os.PathLike[str], mechanism: str = "auto") -> None:
        self.path = os.fspath(path)
        self.wanted = mechanism
        self.mechanism: str | None = None
        self.replay: TacticReplay | None = None
        self.names: dict[str, str] = {}

    def __call__(self, builder: Any, network: Any, config: Any) -> None:
        self.configure(builder, network, config)

    def configure(self, builder: Any, network: Any, config: Any) -> None:
        trt = import_trt()
        self.mechanism = resolve_mechanism(trt, self.wanted)
        self.replay = TacticReplay(source=self.mechanism, tensorrt=trt.__version__)
        if self.mechanism == "algorithm-selector":
            _attach_selector(trt, config).recorders.append(self)
            if config.get_timing_cache() is None:  # a shared cache would hand back earlier choices
                config.set_flag(trt.BuilderFlag.DISABLE_TIMING_CACHE)
        else:
            _editable_cache(trt, config, None)
            _listen(builder, config, self, self._on_log)  # op names for the keys, from the autotuning log

    def _on_log(self, level: Any, msg: str) -> None:
        if "Autotuning op " in msg:
            self.add_log(msg)

    def postprocess_config(self, builder: Any, network: Any, config: Any) -> None:
        self.configure(builder, network, config)

    def after_build(self, builder: Any, network: Any, config: Any, engine_bytes: bytes | None = None) -> None:
        self.finish(builder, network, config, engine_bytes)

    def add_log(self, text: str) -> None:
        """Give the verbose build log so timing-cache keys get readable op names."""
        self.names.update(op_names_from_log(text))

    def record_selection(self, chosen: Mapping[str, Tactic]) -> None:
        """Called from ``report_algorithms``; saved at once so a crashing build still leaves its replay."""
        assert self.replay is not None
        self.replay.tactics = dict(chosen)
        self.replay.save(self.path)

    def finish(self, builder: Any = None, network: Any = None, config: Any = None, engine_bytes: bytes | None = None) -> TacticReplay:
        if self.replay is None:
            raise BackendError("the tactic recorder was never attached to a builder config")
        _unlisten(builder, self)
        if self.mechanism == "timing-cache":
            cache = config.get_timing_cache()
            tactics = _cache_tactics(cache, self.names)
            if engine_bytes is not None:  # the kernel each op's layer used, so a replay can be checked against it
                layers = engine_layer_kernels(import_trt(), engine_bytes)
                ops = [t.name for t in tactics.values() if t.name]
                for key, tactic in tactics.items():
                    layer = _layer_of(tactic.name, layers, ops) if tactic.name else None
                    if layer is not None and layer[1]:
                        tactics[key] = Tactic(tactic.tactic, timing_ms=tactic.timing_ms, name=tactic.name, kernel=layer[1])
            self.replay.tactics = tactics
            self.replay.timing_cache = bytes(cache.serialize())
        self.replay.save(self.path)
        return self.replay


class TacticReplayer:
    """``--load-tactics PATH``: make TensorRT use the tactics of a replay file.

    ``strict`` (default) turns a replay TensorRT could not honour into a one-line error after the build.
    """

    def __init__(self, replay: TacticReplay | str | os.PathLike[str], strict: bool = True) -> None:
        self.replay = replay if isinstance(replay, TacticReplay) else load_replay(replay)
        self.strict = strict
        self.problems: list[str] = []
        self._selector: Any = None
        self._failure: str | None = None  # why the build failed, when TensorRT's error names a replayed key or op

    @property
    def _where(self) -> str:
        return self.replay.path or "the tactic replay"

    def __call__(self, builder: Any, network: Any, config: Any) -> None:
        self.configure(builder, network, config)

    def configure(self, builder: Any, network: Any, config: Any) -> None:
        trt = import_trt()
        have = available_mechanisms(trt)
        if self.replay.source == "algorithm-selector":
            if "algorithm-selector" not in have:
                raise UsageError(
                    f"{self._where} holds per-layer tactics from TensorRT 10.x's algorithm selector, which TensorRT "
                    f"{trt.__version__} removed; record a new replay here (it will use the editable timing cache)"
                )
            self._selector = _attach_selector(trt, config)
            self._selector.replay = self.replay
            return
        if "timing-cache" not in have:
            raise UsageError(
                f"{self._where} holds timing-cache tactics (recorded with TensorRT {self.replay.tensorrt or 'unknown'}), which "
                f"need TensorRT 10.8 or newer; this is TensorRT {trt.__version__}: record the tactics again here"
            )
        recorded = self.replay.tensorrt
        if self.replay.timing_cache is not None and recorded and recorded != str(trt.__version__):
            # "The input cache must be generated by a TensorRT build of exact same version, otherwise combine will
            # be skipped and return false" (NvInfer.h@v11.0:L10210-L10211): its keys and tactics are not this build's
            raise UsageError(
                f"{self._where} was recorded with TensorRT {recorded}; its timing cache only works with that exact "
                f"version, this is TensorRT {trt.__version__}: record the tactics again here"
            )
        cache = _editable_cache(trt, config, self.replay.timing_cache)
        missing = _update_cache(trt, cache, self.replay)
        if missing and self.strict:
            hint = "" if self.replay.timing_cache is not None else " (the replay has no embedded timing cache; pass --load-timing-cache)"
            raise BackendError(f"{len(missing)} of {len(self.replay)} keys of {self._where} are not in the timing cache, first {missing[0]}{hint}")
        self.problems = [f"{key}: not in the timing cache" for key in missing]
        self._failure = None
        _listen(builder, config, self, functools.partial(self._on_log, trt))

    def _on_log(self, trt: ModuleType, level: Any, msg: str) -> None:
        """An error TensorRT logs about a replayed key or op fails the build ("If this layer cannot use the new
        tactic, build errors will be reported when building the next engine", NvInfer.h@v11.0:L10283-L10284):
        kept, so ``build_failed`` names the op and the replay."""
        if self._failure is not None or not _is_error(trt, level):
            return
        text = " ".join(str(msg).split())
        lowered = text.lower()
        for key, tactic in self.replay.items():
            if key.lower() in lowered or (tactic.name and tactic.name in text):
                op = f"op '{tactic.name}', " if tactic.name else ""
                self._failure = (f"TensorRT cannot use tactic {tactic_hex(tactic.tactic)} that {self._where} gives {op}key "
                                 f"{key}: the build failed ({text}); record the tactics again with --save-tactics")
                return

    def build_failed(self, builder: Any, network: Any, config: Any, reason: str) -> str | None:
        """The build extension hook of a failed build: the replayed tactic TensorRT refused, if that was why."""
        _unlisten(builder, self)
        return self._failure

    def postprocess_config(self, builder: Any, network: Any, config: Any) -> None:
        self.configure(builder, network, config)

    def _check_engine(self, engine_bytes: bytes | None) -> list[str]:
        checkable = {k: t for k, t in self.replay.items() if t.name and t.kernel}
        unchecked = len(self.replay) - len(checkable)
        if unchecked:
            warnings.warn(
                f"{unchecked} of {len(self.replay)} keys of {self._where} name no op and kernel (recorded without the "
                "verbose build log or the engine), so whether TensorRT used their tactics cannot be checked",
                stacklevel=3,
            )
        if not checkable:
            return []
        if engine_bytes is None:
            return ["the engine was not given to the tactic replayer, so the tactics it used cannot be checked"]
        layers = engine_layer_kernels(import_trt(), engine_bytes)
        ops = [str(t.name) for t in checkable.values()]
        problems = []
        for key, tactic in checkable.items():
            layer = _layer_of(str(tactic.name), layers, ops)
            if layer is None:
                problems.append(f"{key} ({tactic.name}): the engine has no layer made from this op")
            elif layer[1] != tactic.kernel:
                problems.append(f"{key} ({tactic.name}): layer {layer[0]} used kernel {layer[1] or '(unnamed)'}, the replay has {tactic.kernel}")
        return problems

    def finish(self, builder: Any = None, network: Any = None, config: Any = None, engine_bytes: bytes | None = None) -> list[str]:
        """Check that the build used the replayed tactics; returns the differences (raises if ``strict``).

        Timing-cache replays are checked against the engine (its layers' ``TacticName``), never against the
        timing cache: Parity wrote the replayed tactics into that cache itself, so it always agrees."""
        if self._selector is not None:
            self.problems += self._selector.notes
            self.problems += compare_choices(self.replay.tactics, self._selector.chosen)
        else:
            _unlisten(builder, self)
            self.problems += self._check_engine(engine_bytes)
        if self.problems and self.strict:
            raise BackendError(f"TensorRT did not follow {self._where} for {len(self.problems)} layers/keys: {self.problems[0]}")
        return self.problems


def build_hooks(options: Mapping[str, Any]) -> list[Any]:
    """The recorder/replayer for parsed CLI options (``load_tactics``, ``save_tactics``, ``tactics_mechanism``).

    Replayer first: with the selector it installs the replay, and the recorder then shares that selector.
    """
    hooks: list[Any] = []
    if options.get("load_tactics"):
        hooks.append(TacticReplayer(options["load_tactics"]))
    if options.get("save_tactics"):
        hooks.append(TacticRecorder(options["save_tactics"], options.get("tactics_mechanism") or "auto"))
    return hooks


class TacticExtension:
    """Several hooks as one TensorRT-plugin build extension, called in order."""

    def __init__(self, hooks: list[Any]) -> None:
        self.hooks = hooks

    def postprocess_config(self, builder: Any, network: Any, config: Any) -> None:
        for hook in self.hooks:
            hook.configure(builder, network, config)

    def after_build(self, builder: Any, network: Any, config: Any, engine_bytes: bytes | None = None) -> None:
        for hook in self.hooks:
            hook.finish(builder, network, config, engine_bytes)

    def build_failed(self, builder: Any, network: Any, config: Any, reason: str) -> str | None:
        messages = [hook.build_failed(builder, network, config, reason) for hook in self.hooks if hasattr(hook, "build_failed")]
        return next((m for m in messages if m), None)


def build_extension(options: Mapping[str, Any]) -> TacticExtension | None:
    """For the ``parity_trt_build_extension`` hook: an extension when a tactic option is used, else ``None``."""
    hooks = build_hooks(options)
    return TacticExtension(hooks) if hooks else None
