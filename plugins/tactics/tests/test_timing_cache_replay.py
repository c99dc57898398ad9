"""Timing-cache tactic replay (issue 12, item 8): checked against the engine, and a user's timing cache is kept.

The ``tensorrt`` module here is a small test double, NOT TensorRT: a model of the documented behaviour these tests
need, each behaviour cited from NVIDIA/TensorRT (file, tag, line). Its builder takes each op's tactic from the timing
cache unless told to re-time an op (as TensorRT does when a cached tactic cannot be used), and names each engine
layer's kernel through the engine inspector only under ``ProfilingVerbosity.DETAILED``.
"""

from __future__ import annotations

import enum
import json
import sys
import types
from typing import Any

import pytest
from tactics_synth import layer_key, layer_tactic

from parity.errors import BackendError

SRC = "timing-cache"
OPS = {f"conv{i}": layer_key(i, SRC) for i in range(3)}  # op name -> timing-cache key


def kernel_of(tactic_hash: int) -> str:
    return f"sm90_xmma_{tactic_hash:x}"


class _Key:
    """TimingCacheKey: parsed from and printed as "0x" + 32 hex digits (NvInfer.h@v11.0:L10125-10140)."""

    def __init__(self, text: str) -> None:
        self.text = text.lower()

    @staticmethod
    def parse(text: str) -> _Key:  # pyCore.cpp@v11.0:L1665 def_static("parse", ..., "text"_a)
        return _Key(text)

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class _Value:
    def __init__(self, tacticHash: int, timingMSec: float) -> None:  # noqa: N803 - TensorRT's names (NvInfer.h@v11.0:L10156-10162)
        self.tacticHash, self.timingMSec = tacticHash, timingMSec


class _Cache:
    def __init__(self, entries: dict[str, tuple[int, float]]) -> None:
        self.entries = dict(entries)

    def serialize(self) -> bytes:
        return json.dumps(self.entries).encode()

    def queryKeys(self) -> list[_Key]:  # noqa: N802
        return [_Key(k) for k in self.entries]

    def query(self, key: _Key) -> _Value:
        return _Value(*self.entries[key.text])

    def update(self, key: _Key, value: _Value) -> bool:
        # NvInfer.h@v11.0:L10279: "If the key does not exist, return false" (pyCore.cpp@v11.0:L1689 returns it)
        if key.text not in self.entries:
            return False
        self.entries[key.text] = (value.tacticHash, value.timingMSec)
        return True

    def combine(self, input_cache: _Cache, ignore_mismatch: bool) -> bool:
        # NvInfer.h@v11.0:L10209: "Append entries in input cache to local cache. Conflicting entries will be skipped"
        for key, value in input_cache.entries.items():
            self.entries.setdefault(key, value)
        return True


class BuilderFlag(enum.Enum):
    DISABLE_TIMING_CACHE = 1
    EDITABLE_TIMING_CACHE = 2


class ProfilingVerbosity(enum.Enum):
    LAYER_NAMES_ONLY = 0
    DETAILED = 2


class LayerInformationFormat(enum.Enum):
    ONELINE = 0
    JSON = 1


class _Config:
    def __init__(self, cache: _Cache | None = None) -> None:
        self.flags: set[BuilderFlag] = set()
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY  # TensorRT's default
        self._cache = cache

    def get_flag(self, flag: BuilderFlag) -> bool:
        return flag in self.flags

    def set_flag(self, flag: BuilderFlag) -> None:
        self.flags.add(flag)

    def create_timing_cache(self, serialized_timing_cache: bytes) -> _Cache:
        data = bytes(serialized_timing_cache)
        return _Cache({k: tuple(v) for k, v in json.loads(data).items()} if data else {})

    def set_timing_cache(self, cache: _Cache, ignore_mismatch: bool) -> bool:  # bool: pyCore.cpp@v10.7.0:L1566
        self._cache = cache
        return True

    def get_timing_cache(self) -> _Cache | None:  # None until one is set
        return self._cache


def build(config: _Config, choice: int = 0, retime: frozenset[str] = frozenset()) -> bytes:
    """Build the 3-op network: an op reuses its cached tactic unless it is in ``retime`` (then TensorRT times it
    again and takes ``choice``, leaving the cache entry as it was). The engine bytes record each layer's kernel."""
    cache, layers = config.get_timing_cache(), []
    for index, (op, key) in enumerate(OPS.items()):
        cached = cache.entries.get(key) if cache is not None else None
        if cached is None or op in retime:
            tactic = layer_tactic(index, choice, SRC)
            if cached is None and cache is not None:
                cache.entries[key] = (tactic.tactic, tactic.timing_ms)
            tactic_hash = tactic.tactic
        else:
            tactic_hash = cached[0]
        layers.append({"Name": f"{op}_myl0_{index}", "TacticName": kernel_of(tactic_hash)})
    return json.dumps({"layers": layers, "verbosity": config.profiling_verbosity.name}).encode()


class _Inspector:
    def __init__(self, engine: _Engine) -> None:
        self.engine = engine

    def get_layer_information(self, layer_index: int, format: LayerInformationFormat) -> str:  # noqa: A002
        layer = self.engine.layers[layer_index]
        # the tactic is named only for DETAILED builds (sampleEditableTimingCache.cpp@v11.0:L540-542)
        return json.dumps(layer if self.engine.detailed else layer["Name"])


class _Engine:
    def __init__(self, data: bytes) -> None:
        parsed = json.loads(data)
        self.layers, self.detailed = parsed["layers"], parsed["verbosity"] == "DETAILED"

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def create_engine_inspector(self) -> _Inspector:
        return _Inspector(self)


class _Runtime:
    def deserialize_cuda_engine(self, serialized_engine: bytes) -> _Engine:
        return _Engine(serialized_engine)


@pytest.fixture
def trt(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    import parity_trt.engine

    module = types.ModuleType("tensorrt")
    module.__version__ = "11.0.0.114"
    module.BuilderFlag, module.ProfilingVerbosity, module.LayerInformationFormat = BuilderFlag, ProfilingVerbosity, LayerInformationFormat
    module.TimingCacheKey, module.TimingCacheValue, module.ITimingCache = _Key, _Value, _Cache
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    monkeypatch.setattr(parity_trt.engine, "get_runtime", _Runtime)
    return module


LOG = "\n".join(f"[V] Autotuning op {op}(key: {key})" for op, key in OPS.items())


def record(tmp_path, choice: int):
    from parity_tactics.trt_tactics import TacticRecorder

    recorder = TacticRecorder(tmp_path / f"rec{choice}.json", SRC)
    config = _Config(_Cache({}))
    recorder.configure(None, None, config)
    recorder.add_log(LOG)
    engine = build(config, choice)
    return recorder.finish(None, None, config, engine)


def test_recorder_keeps_each_ops_kernel_from_the_engine(trt, tmp_path):
    replay = record(tmp_path, 1)
    for index, (op, key) in enumerate(OPS.items()):
        assert replay.tactics[key].name == op
        assert replay.tactics[key].kernel == kernel_of(layer_tactic(index, 1, SRC).tactic)


def test_replay_that_the_engine_did_not_follow_is_reported(trt, tmp_path):
    from parity_tactics.trt_tactics import TacticExtension, TacticReplayer

    wanted = record(tmp_path, 1)
    ext = TacticExtension([TacticReplayer(wanted)])
    config = _Config(_Cache({}))
    ext.postprocess_config(None, None, config)
    engine = build(config, choice=0, retime=frozenset({"conv1"}))  # TensorRT re-timed conv1 and took another kernel
    # the timing cache still holds the replayed tactic (Parity wrote it), so only the engine tells
    assert config.get_timing_cache().entries[OPS["conv1"]][0] == wanted.tactics[OPS["conv1"]].tactic
    with pytest.raises(BackendError, match=r"for 1 layers/keys: .*\(conv1\): layer conv1_myl0_1 used kernel sm90_xmma_2000, the replay has sm90_xmma_2001"):
        ext.after_build(None, None, config, engine)


def test_replay_the_engine_followed_passes(trt, tmp_path):
    from parity_tactics.trt_tactics import TacticReplayer

    replayer = TacticReplayer(record(tmp_path, 1))
    config = _Config(_Cache({}))
    replayer.configure(None, None, config)
    assert replayer.finish(None, None, config, build(config, choice=0)) == []


def test_user_timing_cache_is_kept_when_the_replay_embeds_one(trt, tmp_path):
    from parity_tactics.trt_tactics import TacticReplayer

    replay = record(tmp_path, 1)
    assert replay.timing_cache is not None
    user_key = "0x" + "ab" * 16
    config = _Config(_Cache({user_key: (0x77, 0.5)}))  # --load-timing-cache, set by CreateConfig before extensions
    TacticReplayer(replay).configure(None, None, config)
    entries: dict[str, Any] = config.get_timing_cache().entries
    assert entries[user_key] == (0x77, 0.5)
    assert {k: v[0] for k, v in entries.items() if k != user_key} == {k: t.tactic for k, t in replay.items()}
    assert config.profiling_verbosity == ProfilingVerbosity.DETAILED
