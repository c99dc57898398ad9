"""Tactic selection of the TensorRT model (trt_model/tactics.py; a model of TensorRT's documented behaviour, NOT
TensorRT): default picks, the timing cache (shared keys, hits, editable mode), and the 10.x algorithm selector, driven
through ``trt_model.make(version)`` objects for every manifest version."""

from __future__ import annotations

import types
from typing import Any

import pytest
import trt_model
from trt_model import behaviour, tactics
from trt_model.tactics import LayerInfo, candidates, choose_tactics, timing_key


@pytest.fixture(params=trt_model.versions())
def trt(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    # where tactics.CLASSES / CONFIG_MEMBERS are not (yet) merged into the model's registry, merge them here
    if isinstance(getattr(behaviour, "CLASSES", None), dict):
        for name, cls in tactics.CLASSES.items():
            monkeypatch.setitem(behaviour.CLASSES, name, cls)
    registry = getattr(behaviour, "_registry", None)
    config_impl = registry()["IBuilderConfig"] if registry else behaviour.IBuilderConfig
    for name, member in tactics.CONFIG_MEMBERS.items():
        if name not in vars(config_impl):
            monkeypatch.setattr(config_impl, name, member, raising=False)
    return trt_model.make(request.param)


def has_selector(trt: types.ModuleType) -> bool:
    return hasattr(trt, "IAlgorithmSelector")


def has_flag(trt: types.ModuleType, name: str) -> bool:
    return hasattr(trt.BuilderFlag, name)


def conv(index: int, name: str, channels: int = 8, dtype: str = "FLOAT") -> LayerInfo:
    return LayerInfo(index, name, "CONVOLUTION", [(f"{name}_in", (1, 3, 16, 16), dtype)],
                     [(f"{name}_out", (1, channels, 16, 16), dtype)])


LAYERS = [conv(0, "conv_a"), conv(1, "conv_b"), conv(2, "conv_c", channels=16),
          LayerInfo(3, "relu", "ACTIVATION", [("x", (1, 16, 16, 16), "FLOAT")], [("y", (1, 16, 16, 16), "FLOAT")])]


class Build:
    def __init__(self, trt: types.ModuleType, cache: bool = True) -> None:
        self.trt = trt
        self.config = trt.Builder(trt.Logger()).create_builder_config()
        if cache:
            self.config.set_timing_cache(self.config.create_timing_cache(b""), False)
        self.errors: list[str] = []
        self.verbose: list[str] = []

    def __call__(self, layers: list[LayerInfo] = LAYERS) -> list[dict[str, Any]] | None:
        return choose_tactics(self.trt, self.config, layers, self.errors.append, self.verbose.append)

    @property
    def entries(self) -> dict[str, tuple[int, float]]:
        return self.config.get_timing_cache()._entries


def fastest(layer: LayerInfo) -> tactics.Tactic:
    return min(candidates(layer), key=lambda t: t.timing_ms)


def slowest(layer: LayerInfo) -> tactics.Tactic:
    return max(candidates(layer), key=lambda t: t.timing_ms)


# ---- candidates and the default pick ----------------------------------------------------------------------------
def test_candidates_are_deterministic_and_depend_on_configuration_not_name() -> None:
    a, b, c = (candidates(layer) for layer in LAYERS[:3])
    assert 2 <= len(a) <= 3 and a == candidates(conv(0, "conv_a")) and a == b and a != c
    assert len({t.timing_ms for t in a}) == len(a) and len({t.tactic_hash for t in a}) == len(a)
    assert candidates(conv(0, "x", dtype="HALF")) != a


def test_default_picks_the_fastest_and_the_inspector_names_it(trt) -> None:
    layers = Build(trt)()
    assert layers is not None and [d["Name"] for d in layers] == [layer.name for layer in LAYERS]
    for layer, info in zip(LAYERS, layers):
        best = fastest(layer)
        assert info["TacticName"] == best.kernel and info["TacticValue"] == f"0x{best.tactic_hash:016x}"
        assert info["LayerType"] == best.layer_type and info["StreamId"] == 0
        io = info["Inputs"][0]
        assert io["Name"] == layer.inputs[0][0] and io["Dimensions"] == list(layer.inputs[0][1])
        if trt.__version__.startswith("11"):
            assert io["Datatype"] == "FP32" and "Format/Datatype" not in io
        else:
            assert io["Format/Datatype"] == "Row major linear FP32"


# ---- the timing cache -----------------------------------------------------------------------------------------
def test_new_keys_are_added_and_identical_layers_share_one(trt) -> None:
    build = Build(trt)
    build()
    key_a, key_b = timing_key(LAYERS[0]), timing_key(LAYERS[1])
    assert key_a == key_b and key_a.startswith("0x") and len(key_a) == 34 and int(key_a, 16) >= 0
    assert build.entries == {timing_key(layer): (fastest(layer).tactic_hash, fastest(layer).timing_ms) for layer in LAYERS}
    assert len(build.entries) == 3  # conv_a and conv_b share one


def test_a_cached_tactic_is_used_without_timing(trt) -> None:
    build = Build(trt)
    slow = slowest(LAYERS[0])
    build.entries[timing_key(LAYERS[0])] = (slow.tactic_hash, 9.0)  # a cache from another build
    layers = build()
    assert layers is not None
    assert [d["TacticName"] for d in layers[:2]] == [slow.kernel, slow.kernel]  # both identical layers hit it
    assert build.entries[timing_key(LAYERS[0])] == (slow.tactic_hash, 9.0)  # hits leave the entry alone


def test_a_cached_tactic_the_layer_does_not_have_fails_the_build(trt) -> None:
    build = Build(trt)
    build.entries[timing_key(LAYERS[2])] = (0x1234, 1.0)
    assert build() is None
    assert len(build.errors) == 1 and "conv_c" in build.errors[0] and "0x1234" in build.errors[0]


def test_without_an_attached_cache_the_build_still_picks_fastest(trt) -> None:
    build = Build(trt, cache=False)
    layers = build()
    assert layers is not None and layers[0]["TacticName"] == fastest(LAYERS[0]).kernel
    assert build.config.get_timing_cache() is None


def test_disable_timing_cache_neither_reads_nor_writes_it(trt) -> None:
    build = Build(trt)
    build.config.set_flag(trt.BuilderFlag.DISABLE_TIMING_CACHE)
    build.entries[timing_key(LAYERS[0])] = (slowest(LAYERS[0]).tactic_hash, 9.0)
    layers = build()
    assert layers is not None and layers[0]["TacticName"] == fastest(LAYERS[0]).kernel
    assert list(build.entries) == [timing_key(LAYERS[0])]


def test_error_on_timing_cache_miss(trt) -> None:
    build = Build(trt)
    build.config.set_flag(trt.BuilderFlag.ERROR_ON_TIMING_CACHE_MISS)
    assert build() is None and "timing cache miss" in build.errors[0]
    warm = Build(trt)
    warm()
    build.config.set_timing_cache(warm.config.get_timing_cache(), False)
    assert build() is not None


def editable(trt: types.ModuleType) -> Build:
    if not has_flag(trt, "EDITABLE_TIMING_CACHE"):
        pytest.skip(f"TensorRT {trt.__version__} has no BuilderFlag.EDITABLE_TIMING_CACHE")
    build = Build(trt)
    build.config.set_flag(trt.BuilderFlag.EDITABLE_TIMING_CACHE)
    build.config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    return build


def test_editable_cache_gives_each_layer_its_own_key_and_logs_the_autotuning(trt) -> None:
    build = editable(trt)
    build()
    key_a, key_b = timing_key(LAYERS[0], editable=True), timing_key(LAYERS[1], editable=True)
    assert key_a != key_b and {key_a, key_b} <= set(build.entries) and len(build.entries) == len(LAYERS)
    assert f"Autotuning op conv_a(key: {key_a}):" in build.verbose
    assert f"Autotuning op conv_b(key: {key_b}):" in build.verbose
    best = fastest(LAYERS[0])
    assert any(line.startswith(f"The selected tactic is (tactic hash, cost(in ms)):0x{best.tactic_hash:x},") for line in build.verbose)
    # the python editing API sees the keys the build wrote
    assert {str(k) for k in build.config.get_timing_cache().queryKeys()} == set(build.entries)


def test_editable_cache_update_is_followed_by_the_next_build(trt) -> None:
    build = editable(trt)
    build()
    cache = build.config.get_timing_cache()
    other = next(t for t in candidates(LAYERS[0]) if t != fastest(LAYERS[0]))
    key = trt.TimingCacheKey.parse(timing_key(LAYERS[0], editable=True))
    assert cache.update(key, trt.TimingCacheValue(other.tactic_hash, 1.0))
    build.verbose.clear()
    layers = build()
    assert layers is not None
    assert layers[0]["TacticName"] == other.kernel and layers[1]["TacticName"] == fastest(LAYERS[1]).kernel
    assert build.verbose == []  # every key hit: no profiling


def test_editable_cache_update_naming_no_tactic_of_the_layer_fails_the_next_build(trt) -> None:
    build = editable(trt)
    build()
    key = trt.TimingCacheKey.parse(timing_key(LAYERS[3], editable=True))
    assert build.config.get_timing_cache().update(key, trt.TimingCacheValue(0xDEAD, 1.0))
    assert build() is None and "relu" in build.errors[0]


# ---- the algorithm selector (10.x) ------------------------------------------------------------------------------
def selector_class(trt: types.ModuleType) -> type:
    if not has_selector(trt):
        pytest.skip(f"TensorRT {trt.__version__} has no IAlgorithmSelector")

    class Selector(trt.IAlgorithmSelector):
        def __init__(self, pick: Any = None) -> None:
            trt.IAlgorithmSelector.__init__(self)
            self.pick, self.seen, self.reports = pick, [], []

        def select_algorithms(self, context: Any, choices: Any) -> Any:
            self.seen.append((context, choices))
            return self.pick(context, choices) if self.pick else list(range(len(choices)))

        def report_algorithms(self, contexts: Any, choices: Any) -> None:
            self.reports.append((contexts, choices))

    return Selector


def slowest_index(context: Any, choices: Any) -> list[int]:
    return [max(range(len(choices)), key=lambda i: choices[i].timing_msec)]


def test_selector_narrowing_is_followed_and_reported(trt) -> None:
    selector = selector_class(trt)(slowest_index)
    build = Build(trt)
    build.config.algorithm_selector = selector
    assert build.config.algorithm_selector is selector
    layers = build()
    assert layers is not None
    assert [d["TacticName"] for d in layers] == [slowest(layer).kernel for layer in LAYERS]
    assert [c.name for c, _ in selector.seen] == [layer.name for layer in LAYERS]
    (contexts, chosen), = selector.reports  # once, after every select_algorithms call
    assert [c.name for c in contexts] == [layer.name for layer in LAYERS]
    for layer, algo, info in zip(LAYERS, chosen, layers):
        variant = algo.algorithm_variant
        assert (variant.implementation, variant.tactic) == (slowest(layer).implementation, slowest(layer).tactic)
        assert info["TacticValue"] == f"0x{variant.tactic & (2**64 - 1):016x}"
        assert algo.timing_msec == slowest(layer).timing_ms


def test_selector_sees_contexts_and_algorithms_as_tensorrt_describes_them(trt) -> None:
    selector = selector_class(trt)()
    build = Build(trt)
    build.config.algorithm_selector = selector
    conv_b = LayerInfo(0, "conv_b", "CONVOLUTION", [("x", (2, 3, 8, 8), "HALF")], [("y", (2, 4, 8, 8), "HALF")],
                       ranges={"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))})
    build([conv_b])
    context, choices = selector.seen[0]
    assert (context.num_inputs, context.num_outputs) == (1, 1)
    assert context.get_shape(0) == [(1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8)]
    assert context.get_shape(1) == [(2, 4, 8, 8)] * 3 and context.get_shape(2) == []
    info = choices[0].get_algorithm_io_info(0)
    assert info.dtype == trt.DataType.HALF and tuple(info.strides) == (192, 64, 8, 1)
    assert (info.vectorized_dim, info.components_per_element) == (-1, 1)
    assert choices[0].get_algorithm_io_info(2) is None
    assert [c.algorithm_variant.tactic for c in choices] == [t.tactic for t in candidates(conv_b)]
    with pytest.raises(TypeError):
        context.get_shape()  # pybind11 arity, from the signature manifest


def test_selector_exception_is_printed_and_the_default_is_used(trt, capsys) -> None:
    def boom(context: Any, choices: Any) -> list[int]:
        raise ValueError("no such tactic")

    selector = selector_class(trt)(boom)
    build = Build(trt)
    build.config.algorithm_selector = selector
    layers = build()
    assert layers is not None and [d["TacticName"] for d in layers] == [fastest(layer).kernel for layer in LAYERS]
    assert capsys.readouterr().err.count("[ERROR] Exception caught in select_algorithms(): no such tactic") == len(LAYERS)
    assert len(selector.reports) == 1 and build.errors == []


@pytest.mark.parametrize("result", [[], "raise"])
def test_empty_or_failed_selection_fails_under_reject_empty_algorithms(trt, result) -> None:
    def pick(context: Any, choices: Any) -> list[int]:
        if result == "raise":
            raise RuntimeError("x")
        return result

    selector = selector_class(trt)(pick)
    build = Build(trt)
    build.config.algorithm_selector = selector
    assert build() is not None  # the default without the flag
    build.config.set_flag(trt.BuilderFlag.REJECT_EMPTY_ALGORITHMS)
    selector.reports.clear()
    assert build() is None and "REJECT_EMPTY_ALGORITHMS" in build.errors[0]
    assert selector.reports == []  # the build stopped before reporting


@pytest.mark.parametrize("pick", [lambda ctx, ch: [len(ch)], lambda ctx, ch: [-1], lambda ctx, ch: [0] * (len(ch) + 1)])
def test_selection_outside_the_choices_fails_the_build(trt, pick) -> None:
    build = Build(trt)
    build.config.algorithm_selector = selector_class(trt)(pick)
    assert build() is None and "conv_a" in build.errors[0]


def test_selection_that_is_not_a_list_of_int_is_printed_and_ignored(trt, capsys) -> None:
    build = Build(trt)
    build.config.algorithm_selector = selector_class(trt)(lambda ctx, ch: [0.0])
    layers = build()
    assert layers is not None and layers[0]["TacticName"] == fastest(LAYERS[0]).kernel
    assert "could not be interpreted as a List[int]" in capsys.readouterr().err


def test_selector_without_overrides_warns_and_uses_the_default(trt, capsys) -> None:
    if not has_selector(trt):
        pytest.skip("no IAlgorithmSelector")

    class Bare(trt.IAlgorithmSelector):
        pass

    build = Build(trt)
    build.config.algorithm_selector = Bare()
    assert build() is not None
    err = capsys.readouterr().err
    assert "Method: select_algorithms was not overriden" in err and "Method: report_algorithms was not overriden" in err


def test_selector_whose_init_skipped_the_base_is_refused(trt) -> None:
    if not has_selector(trt):
        pytest.skip("no IAlgorithmSelector")

    class NoInit(trt.IAlgorithmSelector):
        def __init__(self) -> None:
            pass

    config = trt.Builder(trt.Logger()).create_builder_config()
    with pytest.raises(TypeError, match="must be called when overriding __init__"):
        config.algorithm_selector = NoInit()
    with pytest.raises(TypeError):
        config.algorithm_selector = object()
    config.algorithm_selector = None
    assert config.algorithm_selector is None


def test_selector_decides_even_where_the_cache_has_the_key(trt) -> None:
    build = Build(trt)
    build.config.algorithm_selector = selector_class(trt)(slowest_index)
    build.entries[timing_key(LAYERS[0])] = (fastest(LAYERS[0]).tactic_hash, 0.1)
    layers = build()
    assert layers is not None and layers[0]["TacticName"] == slowest(LAYERS[0]).kernel


def test_11x_has_no_algorithm_selector(trt) -> None:
    if has_selector(trt):
        pytest.skip("10.x has the selector")
    config = trt.Builder(trt.Logger()).create_builder_config()
    assert not hasattr(config, "algorithm_selector") and not hasattr(trt, "IAlgorithm")
    assert Build(trt)() is not None
