"""Timing-cache tactic replay (issue 12, item 8): checked against the engine, and a user's timing cache is kept.

The ``tensorrt`` module here is trt_model's 11.0 model, NOT TensorRT: a model of its documented behaviour (timing
cache keys and values, the engine inspector naming each layer's kernel only under ``ProfilingVerbosity.DETAILED``),
each behaviour cited in trt_model/behaviour.py. ``build`` stands in for TensorRT's autotuner: each op takes its
tactic from the timing cache unless told to re-time it: a stand-in for an engine whose layer used another kernel
than the replay's. (A cached tactic the layer cannot use does not make TensorRT re-time: it fails the build,
NvInfer.h@v11.0:L10283-L10284; test_tactics_flows.py covers that.)
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from tactics_synth import layer_key, layer_tactic
from trt_model.engine import serialize_engine

from parity.errors import BackendError

SRC = "timing-cache"
OPS = {f"conv{i}": layer_key(i, SRC) for i in range(3)}  # op name -> timing-cache key


def kernel_of(tactic_hash: int) -> str:
    return f"sm90_xmma_{tactic_hash:x}"


def config_with(trt: types.ModuleType, entries: dict[str, tuple[int, float]]) -> Any:
    """A builder config of the model holding a timing cache with ``entries`` (as --load-timing-cache leaves it)."""
    config = trt.Builder(trt.Logger()).create_builder_config()
    config.set_timing_cache(config.create_timing_cache(json.dumps(entries).encode()), False)
    return config


def build(config: Any, choice: int = 0, retime: frozenset[str] = frozenset()) -> bytes:
    """Build the 3-op network: an op reuses its cached tactic unless it is in ``retime`` (then TensorRT times it
    again and takes ``choice``, leaving the cache entry as it was). The engine bytes record each layer's kernel."""
    cache, layers = config.get_timing_cache(), []
    for index, (op, key) in enumerate(OPS.items()):
        cached = cache._entries.get(key) if cache is not None else None
        if cached is None or op in retime:
            tactic = layer_tactic(index, choice, SRC)
            if cached is None and cache is not None:
                cache._entries[key] = (tactic.tactic, tactic.timing_ms)
            tactic_hash = tactic.tactic
        else:
            tactic_hash = cached[0]
        layers.append({"Name": f"{op}_myl0_{index}", "TacticName": kernel_of(tactic_hash)})
    return serialize_engine(sys.modules["tensorrt"], layers, config.profiling_verbosity.name)


@pytest.fixture
def trt(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    from trt_model.install import install, uninstall

    yield install(monkeypatch, "11.0.0.114")  # the model as tensorrt, the plugins' cached TensorRT objects forgotten
    uninstall()


LOG = "\n".join(f"[V] Autotuning op {op}(key: {key})" for op, key in OPS.items())


def record(trt, tmp_path, choice: int):
    from parity_tactics.trt_tactics import TacticRecorder

    recorder = TacticRecorder(tmp_path / f"rec{choice}.json", SRC)
    config = config_with(trt, {})
    recorder.configure(None, None, config)
    recorder.add_log(LOG)
    engine = build(config, choice)
    return recorder.finish(None, None, config, engine)


def test_recorder_keeps_each_ops_kernel_from_the_engine(trt, tmp_path):
    replay = record(trt, tmp_path, 1)
    for index, (op, key) in enumerate(OPS.items()):
        assert replay.tactics[key].name == op
        assert replay.tactics[key].kernel == kernel_of(layer_tactic(index, 1, SRC).tactic)


def test_replay_that_the_engine_did_not_follow_is_reported(trt, tmp_path):
    from parity_tactics.trt_tactics import TacticExtension, TacticReplayer

    wanted = record(trt, tmp_path, 1)
    ext = TacticExtension([TacticReplayer(wanted)])
    config = config_with(trt, {})
    ext.postprocess_config(None, None, config)
    engine = build(config, choice=0, retime=frozenset({"conv1"}))  # TensorRT re-timed conv1 and took another kernel
    # the timing cache still holds the replayed tactic (Parity wrote it), so only the engine tells
    assert config.get_timing_cache()._entries[OPS["conv1"]][0] == wanted.tactics[OPS["conv1"]].tactic
    with pytest.raises(BackendError, match=r"for 1 layers/keys: .*\(conv1\): layer conv1_myl0_1 used kernel sm90_xmma_2000, the replay has sm90_xmma_2001"):
        ext.after_build(None, None, config, engine)


def test_replay_the_engine_followed_passes(trt, tmp_path):
    from parity_tactics.trt_tactics import TacticReplayer

    replayer = TacticReplayer(record(trt, tmp_path, 1))
    config = config_with(trt, {})
    replayer.configure(None, None, config)
    assert replayer.finish(None, None, config, build(config, choice=0)) == []


def test_user_timing_cache_is_kept_when_the_replay_embeds_one(trt, tmp_path):
    from parity_tactics.trt_tactics import TacticReplayer

    replay = record(trt, tmp_path, 1)
    assert replay.timing_cache is not None
    user_key = "0x" + "ab" * 16
    config = config_with(trt, {user_key: (0x77, 0.5)})  # --load-timing-cache, set by CreateConfig before extensions
    TacticReplayer(replay).configure(None, None, config)
    entries: dict[str, Any] = config.get_timing_cache()._entries
    assert entries[user_key] == (0x77, 0.5)
    assert {k: v[0] for k, v in entries.items() if k != user_key} == {k: t.tactic for k, t in replay.items()}
    assert config.profiling_verbosity == trt.ProfilingVerbosity.DETAILED
