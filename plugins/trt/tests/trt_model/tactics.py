"""Tactic selection in the TensorRT model (see ``trt_model/__init__.py``; this is NOT TensorRT).

``choose_tactics(trt, config, layers, log)`` is what the model's ``Builder.build_serialized_network`` calls to pick one
tactic per layer; it returns, per layer, the dict the engine inspector reports for a ``ProfilingVerbosity.DETAILED``
build, or None when the build fails (after ``log(message)``, an ERROR on the builder's logger).

What is modelled, each with its source (file@tag:Lline in NVIDIA/TensorRT unless a URL):

- Candidates. Every layer has 2-3 tactics, derived from a hash of its type and its inputs'/outputs' shapes and
  dtypes (NOT its name), so identical layers get identical candidates with identical timings, as in the sample's
  profiling table, where two MatMuls identical but for their names list the same tactics
  (samples/sampleEditableTimingCache/README.md@v11.0:L66-L83). Each has an implementation and a 64-bit tactic value.
  The default choice is the fastest ("choose the algorithms that globally minimize the execution time", TensorRT
  10.16 developer guide, precision-control.html "Algorithm Selection and Reproducible Builds"; "the fastest one will be
  chosen and will be written into the TimingCache", sampleEditableTimingCache/README.md@v11.0:L15).
- One tactic value, three views (the model's simplification; TensorRT documents no relation between them):
  ``IAlgorithmVariant.tactic`` is the value as int64 (signed; real ones are often negative), the inspector's
  ``TacticValue`` is it as ``"0x%016x"`` of the uint64 (as in trt-engine-explorer's resnet.onnx.engine.graph.json@v10.7.0),
  and the timing cache's ``TimingCacheValue.tacticHash`` is the uint64 (``uint64_t tacticHash``, NvInfer.h@v11.0:L10159).
- Timing cache (every version; python query/update/TimingCacheKey only from 10.8, as the manifests say). Keys are
  "0x" + 32 hex digits (NvInfer.h@v11.0:L10137-L10140). "The TensorRT builder skips profiling and reuses the cached
  result for the repeated layers if other layers have the same IO tensor configuration and layer parameters. If a
  timing query misses in the cache, the builder times the layer and updates the cache" (TensorRT 10.16 developer
  guide, performance/builder-performance.html "Timing Cache"): the key is a hash of type and io shapes/dtypes, a hit
  takes the cached tacticHash without timing, a miss times, takes the fastest and adds the entry to the cache the
  config holds; with no cache attached the build uses a temporary one of its own (same page), so identical layers
  of one build still share. ``BuilderFlag.DISABLE_TIMING_CACHE`` "Disable reuse of timing information across identical
  layers" (NvInfer.h@v10.7.0:L8423-L8424): every layer is timed, no cache is read or written.
- ``BuilderFlag.EDITABLE_TIMING_CACHE`` (10.8+): "each layer will have its own tactics, which means that changes in one
  layer will not affect others" (sampleEditableTimingCache.cpp@v11.0:L544-L548): the key also hashes the layer's
  name, so identical layers get different keys (README.md@v11.0:L68 and L77: matMul1/matMul2 keys differ). In this
  mode "the logs will contain profiling results of all layers" (same lines): for a layer it times, the model emits
  through ``verbose`` the lines the sample parses: "Autotuning op NAME(key: KEY)" (cpp@v11.0:L117-L139), the table
  header "tactic_id, cost(in ms), cost/fastest_cost, ..." (L142-L145), one row per tactic ending in kernel name and
  tactic hash (L153-L176), and "The selected tactic is (tactic hash, cost(in ms)):HASH, COST" (L178-L199). A cached
  value the user changed with ``ITimingCache.update`` is followed by the next build (README.md@v11.0:L23; the sample
  checks the layer's kernel changed, cpp@v11.0:L583-L600); "If this layer cannot use the new tactic, build errors
  will be reported when building the next engine" (NvInfer.h@v11.0:L10283-L10284): a cached tacticHash naming none of
  the layer's tactics fails the build (the model applies this to every cache hit, editable or not).
- ``BuilderFlag.ERROR_ON_TIMING_CACHE_MISS``: "Emit error when a tactic being timed is not present in the timing cache.
  This flag has an effect only when IBuilderConfig has an associated ITimingCache" (NvInfer.h@v10.7.0:L8478-L8480): the
  model logs the error and fails the build.
- ``IAlgorithmSelector`` (10.x; deprecated 10.8, NvInfer.h@v10.8.0:L8652-L8654; gone from the 11.0 manifests and sources):
  ``select_algorithms(context, choices)`` is called through pyAlgorithmSelector.cpp@v10.7.0:L51-L94 (same at
  v10.0.1, v10.8.0, v10.16): not overridden -> "Method: select_algorithms was not overriden..." on stderr
  (python/include/utils.h@v10.7.0:L73-L82) and -1; an exception -> "[ERROR] Exception caught in select_algorithms():
  ..." on stderr and -1 (L85-L93); a result that is not a List[int] -> "[ERROR] Return value of select_algorithms()
  could not be interpreted as a List[int]" and -1 (L70-L80); else the indices are copied into a buffer of nbChoices
  (L82, no bounds check). "If return value is 0, TensorRT's default algorithm selection is used unless
  BuilderFlag::kREJECT_EMPTY_ALGORITHMS is set" (NvInfer.h@v10.7.0:L8276-L8278; the flag: "Fail if
  IAlgorithmSelector::selectAlgorithms returns an empty set of algorithms", L8455-L8456). TensorRT documents no
  meaning for a negative count: the model treats -1 like 0 (the default is used, or the build fails under
  REJECT_EMPTY_ALGORITHMS). Indices must be in [0, nbChoices-1] (NvInfer.h@v10.7.0:L8270): an index out of range, or
  more indices than choices (a write past the buffer in pyAlgorithmSelector.cpp L82), fails the build here
  (TensorRT's behaviour there is undocumented). Among the selected choices TensorRT uses its default selection
  (L8276; pyAlgorithmSelectorDoc.h@v10.7.0:L114): the fastest of them. ``report_algorithms(contexts,
  choices)`` is called once after every ``select_algorithms`` call with the choice made per context ("For a given
  optimization profile, this call comes after all calls to selectAlgorithms", NvInfer.h@v10.7.0:L8287-L8288;
  pyAlgorithmSelector.cpp@v10.7.0:L96-L125: exceptions printed, ignored). The model builds one profile, so it
  reports once. TensorRT always offers at least one choice (sampleAlgorithmSelector.cpp@v10.7.0:L70).
  With a selector set, the model lets the selector decide every layer (the timing cache is not consulted for the
  choice, new keys are still recorded): the TensorRT 8 developer guide said "the cache is incompatible with
  algorithm selection"; later guides are silent. This is the weakest-sourced rule here.
- ``IAlgorithmContext``: ``name`` is the layer's name (a unique identifier, NvInfer.h@v10.7.0:L8154-L8163);
  ``get_shape(i)`` is [min, opt, max] or [] (pyAlgorithmSelector.cpp@v10.7.0:L33-L43, pyAlgorithmSelectorDoc.h L70);
  the model returns [] for an index past the inputs and outputs. ``IAlgorithm.get_algorithm_io_info(i)`` is None past
  them ("nullptr if index is out of range", NvInfer.h@v10.7.0:L8236-L8246). Every format is linear: strides are the
  row-major strides of the opt shape, ``vectorized_dim`` -1 and ``components_per_element`` 1 (L8083-L8100).
- Inspector dicts: "Name", "LayerType" (the kernel family, e.g. "CaskConvolution", not the network LayerType, as in
  resnet.onnx.engine.graph.json@v10.7.0), "Inputs"/"Outputs" (Name, Location, Dimensions and, for 10.x,
  "Format/Datatype"; 11.x split it into "Format" and "Datatype", per Polygraphy 0.53.6
  tools/inspect/subtool/model/extractors/_trt.py:243-250), "TacticName", "TacticValue", "StreamId", "Metadata"
  (sampleEditableTimingCache/README.md@v11.0:L54, cpp@v11.0:L207-L246 reads Name and TacticName).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLASSES", "CONFIG_MEMBERS", "LayerInfo", "Tactic", "candidates", "choose_tactics", "timing_key"]

Shape = tuple[int, ...]
UINT64 = (1 << 64) - 1


@dataclass
class LayerInfo:
    """One network layer as the builder sees it (what ``engine.py`` hands ``choose_tactics``)."""

    index: int
    name: str  # ILayer.name
    type: str  # LayerType member name, e.g. "CONVOLUTION"
    inputs: list[tuple[str, Shape, str]]  # (tensor name, opt profile shape, DataType member name)
    outputs: list[tuple[str, Shape, str]]
    # optional (min, opt, max) per tensor name for IAlgorithmContext.get_shape; a tensor missing here has its
    # shape three times (a static shape)
    ranges: dict[str, tuple[Shape, Shape, Shape]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tactic:
    """One candidate implementation of a layer."""

    implementation: int  # IAlgorithmVariant.implementation
    tactic_hash: int  # uint64: TimingCacheValue.tacticHash; TacticValue is f"0x{tactic_hash:016x}"
    kernel: str  # the inspector's TacticName
    layer_type: str  # the inspector's LayerType
    timing_ms: float  # IAlgorithm.timing_msec
    workspace: int  # IAlgorithm.workspace_size

    @property
    def tactic(self) -> int:
        """IAlgorithmVariant.tactic: int64 (``int64_t getTactic()``, NvInfer.h@v10.7.0:L8132-L8137)."""
        return self.tactic_hash - (1 << 64) if self.tactic_hash >= 1 << 63 else self.tactic_hash

    @property
    def value(self) -> str:
        return f"0x{self.tactic_hash:016x}"


# kernel families per network LayerType: (inspector LayerType, kernel-name stem, implementation id)
_FAMILIES: dict[str, list[tuple[str, str, int]]] = {
    "CONVOLUTION": [("CaskConvolution", "sm80_xmma_fprop_implicit_gemm", 0x24), ("CaskGemmConvolution", "sm80_xmma_gemm", 0x25),
                    ("CaskConvolution", "ampere_scudnn", 0x24)],
    "MATRIX_MULTIPLY": [("gemm", "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n", 0x30), ("CaskGemmMatrixMultiply", "sm80_xmma_gemm", 0x31)],
    "ELEMENTWISE": [("PointWiseV2", "PointWiseV2", -2147483627), ("PointWise", "PointWise", -2147483628)],
    "ACTIVATION": [("PointWiseV2", "PointWiseV2", -2147483627), ("CaskActivation", "sm80_xmma_activation", 0x40)],
}
_GENERIC = [("{}", "generic_{}", -2147483600), ("{}", "generic_{}_v2", -2147483599)]


def _digest(*parts: Any) -> bytes:
    return hashlib.sha256(repr(parts).encode()).digest()


def _signature(layer: LayerInfo) -> tuple:
    """What identifies a layer's configuration: type and io shapes/dtypes, not names."""
    return (layer.type, tuple((tuple(s), d) for _, s, d in layer.inputs), tuple((tuple(s), d) for _, s, d in layer.outputs))


def timing_key(layer: LayerInfo, editable: bool = False) -> str:
    """The timing-cache key of ``layer``: "0x" + 32 hex digits; with EDITABLE_TIMING_CACHE it also hashes the name."""
    parts = (_signature(layer), layer.name) if editable else (_signature(layer),)
    return "0x" + _digest("key", *parts)[:16].hex()


def candidates(layer: LayerInfo) -> list[Tactic]:
    """The layer's 2-3 tactics, in the order TensorRT offers them (not sorted by time); distinct timings."""
    sig = _signature(layer)
    families = _FAMILIES.get(layer.type) or [(t.format(layer.type.title()), k.format(layer.type.lower()), i) for t, k, i in _GENERIC]
    count = 2 + _digest("count", sig)[0] % 2
    out = []
    for n in range(count):
        d = _digest("tactic", sig, n)
        layer_type, stem, implementation = families[n % len(families)]
        tactic_hash = int.from_bytes(d[:8], "big")
        timing = round(0.005 + int.from_bytes(d[8:12], "big") / 2**32 * 0.5, 7) + n * 1e-7  # distinct
        kernel = f"{stem}_{d[12:16].hex()}"
        out.append(Tactic(implementation, tactic_hash, kernel, layer_type, timing, 256 * (d[16] % 64)))
    return out


# ---- the 10.x algorithm-selector classes (merged into the model's registry) ------------------------------------
class IAlgorithmIOInfo:
    def _init(self, dtype: Any, strides: Shape) -> None:
        self._dtype, self._strides = dtype, tuple(strides)

    dtype = property(lambda self: self._dtype)
    strides = property(lambda self: self._strides)
    vectorized_dim = property(lambda self: -1)  # -1 for non-vectorized formats: NvInfer.h@v10.7.0:L8083-L8091
    components_per_element = property(lambda self: 1)  # always 1 for non-vectorized formats: L8093-L8100


class IAlgorithmVariant:
    def _init(self, implementation: int, tactic: int) -> None:
        self._implementation, self._tactic = implementation, tactic

    implementation = property(lambda self: self._implementation)
    tactic = property(lambda self: self._tactic)


class IAlgorithmContext:
    def _init(self, name: str, shapes: list[tuple[Shape, Shape, Shape]], num_inputs: int, num_outputs: int) -> None:
        self._name, self._shapes, self._num_inputs, self._num_outputs = name, shapes, num_inputs, num_outputs

    name = property(lambda self: self._name)
    num_inputs = property(lambda self: self._num_inputs)
    num_outputs = property(lambda self: self._num_outputs)

    def get_shape(self, index: int) -> list[Shape]:
        # [min, opt, max], or [] when getDimensions gives nbDims -1: pyAlgorithmSelector.cpp@v10.7.0:L33-L43
        return [tuple(s) for s in self._shapes[index]] if 0 <= index < len(self._shapes) else []


class IAlgorithm:
    def _init(self, variant: Any, timing_msec: float, workspace_size: int, io_info: list[Any]) -> None:
        self._variant, self._timing, self._workspace, self._io = variant, timing_msec, workspace_size, io_info

    algorithm_variant = property(lambda self: self._variant)
    timing_msec = property(lambda self: self._timing)
    workspace_size = property(lambda self: self._workspace)

    def get_algorithm_io_info(self, index: int) -> Any:
        # nullptr (None) when the index is out of range: NvInfer.h@v10.7.0:L8236-L8246
        return self._io[index] if 0 <= index < len(self._io) else None


class IAlgorithmSelector:
    """Subclassed by users; ``trt.IAlgorithmSelector.__init__(self)`` must run (pyAlgorithmSelectorDoc.h@v10.7.0:L102-L107,
    ``py::init_alias<>()`` pyAlgorithmSelector.cpp@v10.7.0:L180)."""

    def __init__(self) -> None:
        self._alias_initialised = True

    # the "fake bindings" the user overrides: pyAlgorithmSelector.cpp@v10.7.0:L128-L141
    def select_algorithms(self, context: Any, choices: Any) -> list[int]:
        return []

    def report_algorithms(self, contexts: Any, choices: Any) -> None:
        return None


def _get_selector(self: Any) -> Any:
    return self.__dict__.get("_algorithm_selector")  # nullptr (None) until set


def _set_selector(self: Any, selector: Any) -> None:
    # setAlgorithmSelector(IAlgorithmSelector*) with keep_alive<1, 2>: pyCore.cpp@v10.7.0:L1559-L1560. pybind11 takes
    # None (nullptr) and refuses what is not an IAlgorithmSelector (TypeError, as for any bound argument)
    if selector is not None and not isinstance(selector, self._trt.IAlgorithmSelector):
        raise TypeError("(): incompatible function arguments. The following argument types are supported:\n"
                        "    1. (self: tensorrt.IBuilderConfig, arg0: tensorrt.IAlgorithmSelector) -> None")
    if selector is not None and not selector.__dict__.get("_alias_initialised"):
        # pybind11 raises this when a subclass's __init__ did not call the bound __init__ (at construction there,
        # at assignment here: the model cannot hook construction)
        raise TypeError(f"{type(selector).__name__}.__init__() must be called when overriding __init__")
    self.__dict__["_algorithm_selector"] = selector


CLASSES: dict[str, type] = {
    "IAlgorithmIOInfo": IAlgorithmIOInfo,
    "IAlgorithmVariant": IAlgorithmVariant,
    "IAlgorithmContext": IAlgorithmContext,
    "IAlgorithm": IAlgorithm,
    "IAlgorithmSelector": IAlgorithmSelector,
}
CONFIG_MEMBERS: dict[str, Any] = {"algorithm_selector": property(_get_selector, _set_selector)}


# ---- the selector trampoline -----------------------------------------------------------------------------------
def _override(trt: Any, selector: Any, method: str) -> Callable | None:
    """pybind11's get_override: the Python override, or None (and the warning utils.h@v10.7.0:L73-L82 prints)."""
    found = getattr(selector, method, None)
    base = getattr(trt.IAlgorithmSelector, method)
    if found is None or getattr(found, "__func__", None) is base:
        print(f"Method: {method} was not overriden. Please provide an implementation for this method.", file=sys.stderr)
        return None
    return found


def _as_int32_list(result: Any) -> list[int] | None:
    """pybind11's cast to std::vector<int32_t>: a sequence (not str/bytes/dict) of ints; None when it cannot."""
    if isinstance(result, (str, bytes, bytearray, dict)) or not (hasattr(type(result), "__getitem__") and hasattr(type(result), "__len__")):
        return None
    out = []
    for value in result:
        if isinstance(value, float) or not hasattr(value, "__index__"):
            return None
        number = value.__index__()
        if not -(1 << 31) <= number < 1 << 31:
            return None
        out.append(number)
    return out


def _select(trt: Any, selector: Any, context: Any, choices: list[Any]) -> list[int] | int:
    """selectAlgorithms through the trampoline (pyAlgorithmSelector.cpp@v10.7.0:L51-L94): the indices, or -1."""
    fn = _override(trt, selector, "select_algorithms")
    if fn is None:
        return -1
    try:
        result = fn(context, list(choices))
    except Exception as exc:  # noqa: BLE001 - TensorRT's catch (std::exception const&), L85-L88
        print(f"[ERROR] Exception caught in select_algorithms(): {exc}", file=sys.stderr)
        return -1
    indices = _as_int32_list(result)
    if indices is None:
        print("[ERROR] Return value of select_algorithms() could not be interpreted as a List[int]", file=sys.stderr)
        return -1
    return indices


def _report(trt: Any, selector: Any, contexts: list[Any], choices: list[Any]) -> None:
    fn = _override(trt, selector, "report_algorithms")
    if fn is None:
        return
    try:
        fn(list(contexts), list(choices))
    except Exception as exc:  # noqa: BLE001 - pyAlgorithmSelector.cpp@v10.7.0:L117-L124
        print(f"[ERROR] Exception caught in report_algorithms(): {exc}", file=sys.stderr)


def _strides(shape: Shape) -> Shape:
    out, step = [], 1
    for dim in reversed(shape):
        out.append(step)
        step *= max(int(dim), 1)
    return tuple(reversed(out))


def _algorithm_objects(trt: Any, layer: LayerInfo, tactics: list[Tactic]) -> tuple[Any, list[Any]]:
    io = layer.inputs + layer.outputs
    shapes = [layer.ranges.get(name, (tuple(shape), tuple(shape), tuple(shape))) for name, shape, _ in io]
    context = trt.IAlgorithmContext._new(layer.name, shapes, len(layer.inputs), len(layer.outputs))
    algos = []
    for t in tactics:
        infos = [trt.IAlgorithmIOInfo._new(getattr(trt.DataType, dtype), _strides(tuple(shape))) for _, shape, dtype in io]
        algos.append(trt.IAlgorithm._new(trt.IAlgorithmVariant._new(t.implementation, t.tactic), t.timing_ms, t.workspace, infos))
    return context, algos


# ---- inspector -------------------------------------------------------------------------------------------------
_DTYPE_TEXT = {"FLOAT": "FP32", "HALF": "FP16", "BF16": "BF16", "INT8": "Int8", "INT32": "Int32", "INT64": "Int64",
               "BOOL": "Bool", "UINT8": "UInt8", "FP8": "FP8", "INT4": "Int4", "FP4": "FP4", "E8M0": "E8M0"}


def _io_dicts(trt: Any, io: list[tuple[str, Shape, str]]) -> list[dict[str, Any]]:
    eleven = int(str(trt.__version__).split(".")[0]) >= 11
    out = []
    for name, shape, dtype in io:
        entry: dict[str, Any] = {"Name": name, "Location": "Device", "Dimensions": list(shape)}
        text = _DTYPE_TEXT.get(dtype, dtype)
        if eleven:
            entry.update({"Format": "Row major linear", "Datatype": text})
        else:
            entry["Format/Datatype"] = f"Row major linear {text}"
        out.append(entry)
    return out


def _inspector_dict(trt: Any, layer: LayerInfo, chosen: Tactic) -> dict[str, Any]:
    return {"Name": layer.name, "LayerType": chosen.layer_type, "Inputs": _io_dicts(trt, layer.inputs),
            "Outputs": _io_dicts(trt, layer.outputs), "TacticName": chosen.kernel, "TacticValue": chosen.value,
            "StreamId": 0, "Metadata": ""}


def _profiling_log(verbose: Callable[[str], None], layer: LayerInfo, key: str, tactics: list[Tactic], chosen: Tactic) -> None:
    """The editable-mode autotuning log the sample parses (sampleEditableTimingCache.cpp@v11.0:L117-L199)."""
    fastest = min(t.timing_ms for t in tactics)
    verbose(f"Autotuning op {layer.name}(key: {key}):")
    verbose("Sorted table of all evaluated tactics:")
    verbose("tactic_id, cost(in ms), cost/fastest_cost, prediction_correlation, kernel_name, tactic_hash, tunable_parameter")
    for tactic_id, t in sorted(enumerate(tactics), key=lambda it: it[1].timing_ms):
        verbose(f"{tactic_id:4d}, {t.timing_ms:.7f}, {t.timing_ms / fastest:.5f}, 0.50000, {t.kernel}, 0x{t.tactic_hash:x},")
    verbose(f"The selected tactic is (tactic hash, cost(in ms)):0x{chosen.tactic_hash:x}, {chosen.timing_ms:.7g}")
    verbose(f"Writing the best tactic (0x{chosen.tactic_hash:x}) to cache")


def _selector_of(trt: Any, config: Any) -> Any:
    """``config.algorithm_selector`` where this version has it (10.x, not 11.x)."""
    if not hasattr(trt, "IAlgorithmSelector") or not hasattr(type(config), "algorithm_selector"):
        return None
    if type(config).algorithm_selector.fget is _get_selector:
        return config.algorithm_selector
    # CONFIG_MEMBERS not merged into the model's IBuilderConfig: the placeholder property keeps a set value here
    return config.__dict__.get("_set_algorithm_selector")


# ---- the build step --------------------------------------------------------------------------------------------
def choose_tactics(trt: Any, config: Any, layers: list[LayerInfo], log: Callable[[str], None],
                   verbose: Callable[[str], None] | None = None) -> list[dict[str, Any]] | None:
    """Pick one tactic per layer as TensorRT's builder does (see the module docstring) and return per layer the
    inspector's DETAILED dict; None when the build fails, after ``log(message)``. ``verbose(message)``, when given,
    receives the builder's VERBOSE lines (the editable timing cache's autotuning log)."""
    flags = config._flags
    editable = "EDITABLE_TIMING_CACHE" in flags
    disabled = "DISABLE_TIMING_CACHE" in flags
    # the cache the config holds, else a temporary one for this build; none at all under DISABLE_TIMING_CACHE
    entries: dict[str, tuple[int, float]] | None = None
    if not disabled:
        entries = config._cache._entries if config._cache is not None else {}
    selector = _selector_of(trt, config)
    contexts, reported, out = [], [], []
    for layer in layers:
        tactics = candidates(layer)
        key = timing_key(layer, editable)
        if selector is not None:
            context, algos = _algorithm_objects(trt, layer, tactics)
            picked = _select(trt, selector, context, algos)
            if isinstance(picked, int) or not picked:  # -1 (error) or an empty list
                if "REJECT_EMPTY_ALGORITHMS" in flags:
                    log(f"{layer.name}: IAlgorithmSelector::selectAlgorithms returned no algorithms and "
                        "BuilderFlag::kREJECT_EMPTY_ALGORITHMS is set")
                    return None
                picked = list(range(len(tactics)))
            if len(picked) > len(tactics) or any(not 0 <= i < len(tactics) for i in picked):
                log(f"{layer.name}: IAlgorithmSelector::selectAlgorithms selected {picked}, outside the "
                    f"{len(tactics)} choices [0, {len(tactics) - 1}]")
                return None
            index = min(set(picked), key=lambda i: tactics[i].timing_ms)
            chosen = tactics[index]
            contexts.append(context)
            reported.append(algos[index])
            if entries is not None:
                entries.setdefault(key, (chosen.tactic_hash, chosen.timing_ms))
        elif entries is not None and key in entries:
            cached = entries[key][0]
            match = [t for t in tactics if t.tactic_hash == cached]
            if not match:
                log(f"{layer.name}: the timing cache's tactic {cached:#x} for key {key} is not a tactic of this layer "
                    f"(its tactics: {', '.join(f'0x{t.tactic_hash:x}' for t in tactics)})")
                return None
            chosen = match[0]
        else:
            if "ERROR_ON_TIMING_CACHE_MISS" in flags and config._cache is not None:
                log(f"{layer.name}: timing cache miss for key {key} and BuilderFlag::kERROR_ON_TIMING_CACHE_MISS is set")
                return None
            chosen = min(tactics, key=lambda t: t.timing_ms)
            if editable and verbose is not None:
                _profiling_log(verbose, layer, key, tactics, chosen)
            if entries is not None:
                entries[key] = (chosen.tactic_hash, chosen.timing_ms)
        out.append(_inspector_dict(trt, layer, chosen))
    if selector is not None:
        _report(trt, selector, contexts, reported)
    return out
