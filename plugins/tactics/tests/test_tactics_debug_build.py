"""``debug build``: the loop, artifact sorting and the seed workflow end to end.

TensorRT cannot run here, so the loop is driven through its ``build`` parameter by a stand-in builder that
writes what a TensorRT build writes (an engine file, a replay, a timing cache) with tactics drawn at random;
the check is a real subprocess. The TensorRT build itself (``trt_build``) is covered where TensorRT imports.
"""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from pathlib import Path

import pytest
from parity_tactics.debug_build import debug_build, timing_cache_path
from parity_tactics.diff import diff_tactics
from parity_tactics.replay import load_replay
from tactics_synth import layer_key, layer_tactic

from parity.debug.check import PredicateCheck
from parity.errors import BackendError, UsageError

CULPRIT = (4, 2)  # layer 4 with tactic choice 2 computes wrong results
CHECK = [sys.executable, "-S", "-c", "import sys; sys.exit(b'WRONG' in open('parity_debug.engine', 'rb').read())"]


def flaky_builder(seed: int):
    rng = random.Random(seed)

    def build(model: str, engine: str, options) -> None:
        from parity_tactics.replay import TacticReplay

        replay = TacticReplay(source="timing-cache", tensorrt="11.4.0.106")
        picks = [rng.randrange(3) for _ in range(8)]
        for layer, choice in enumerate(picks):
            replay.add(layer_key(layer, "timing-cache"), layer_tactic(layer, choice, "timing-cache"))
        Path(engine).write_bytes(b"WRONG" if picks[CULPRIT[0]] == CULPRIT[1] else b"fine")
        Path(options["save_timing_cache"]).write_bytes(b"cache")
        replay.save(options["save_tactics"])

    return build


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    return tmp_path


def test_until_n_sorts_replays_and_caches_then_diff_finds_the_culprit(workdir):
    result = debug_build(
        "model.onnx", "20", CHECK, build=flaky_builder(1),
        save_tactics="replay.json", artifacts=["replay.json"], artifacts_dir="replays",
    )
    assert len(result.verdicts) == 20 and result.summary.checks == 20
    assert result.bad > 0 and result.good > 0
    good = sorted((workdir / "replays" / "good").glob("replay_N*.json"))
    bad = sorted((workdir / "replays" / "bad").glob("replay_N*.json"))
    assert (len(good), len(bad)) == (result.good, result.bad)
    assert len(list((workdir / "replays").rglob("parity_debug.timing_N*.cache"))) == 20
    for path in bad:  # each bad replay really holds the culprit
        assert load_replay(path).tactics[layer_key(CULPRIT[0], "timing-cache")] == layer_tactic(*CULPRIT, "timing-cache")
    analysis = diff_tactics("replays")
    top = analysis.suspects[0]
    assert (top.key, top.tactic) == (layer_key(CULPRIT[0], "timing-cache"), layer_tactic(*CULPRIT, "timing-cache"))
    assert not (workdir / "parity_debug.engine").exists()  # the iteration's engine is removed after its check


@pytest.mark.parametrize("until", ["good", "bad"])
def test_until_good_or_bad_stops_at_the_first(workdir, until):
    result = debug_build("model.onnx", until, CHECK, build=flaky_builder(3), save_tactics="r.json", artifacts=["r.json"])
    assert result.verdicts[-1] == (until == "bad")
    assert all(v != (until == "bad") for v in result.verdicts[:-1])


def test_failed_build_is_bad_without_running_the_check(workdir):
    calls = []

    def broken(model, engine, options):
        raise BackendError("TensorRT failed to build the engine")

    result = debug_build("model.onnx", 2, PredicateCheck(lambda it: calls.append(it) or False), build=broken)
    assert result.verdicts == [True, True] and calls == []
    assert result.build_errors == {0: "TensorRT failed to build the engine", 1: "TensorRT failed to build the engine"}


def test_missing_tensorrt_stops_at_once(workdir):
    def no_trt(model, engine, options):
        raise BackendError("tensorrt is not installed; install it with: pip install tensorrt")

    with pytest.raises(BackendError, match="not installed"):
        debug_build("model.onnx", 5, ["true"], build=no_trt)


def test_bad_arguments(workdir):
    for text in ("0", "sometimes"):
        with pytest.raises(UsageError, match="--until"):
            debug_build("model.onnx", text, ["true"], build=flaky_builder(0), save_tactics="r.json")
    with pytest.raises(UsageError, match="model not found"):
        debug_build("nope.onnx", 1, ["true"], build=flaky_builder(0))


def test_timing_cache_sits_beside_the_engine():
    assert timing_cache_path("dir/parity_debug.engine") == str(Path("dir/parity_debug.timing.cache"))


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="checks the behaviour without TensorRT")
def test_seed_command_fails_cleanly_without_tensorrt(workdir):
    """Seed 000/001 step 2, as typed (with parity for polygraphy)."""
    model = str(Path(__file__).resolve().parents[3] / "examples" / "models" / "identity.onnx")
    args = ["debug", "build", model, "--save-tactics", "replay.json", "--artifacts-dir", "replays",
            "--artifacts", "replay.json", "--until=2", "--check", "parity", "run", "parity_debug.engine", "--trt",
            "--load-outputs", "golden.json"]
    code = "import sys; from parity.cli import main; sys.exit(main(sys.argv[1:]))"
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert out.returncode == 3
    assert out.stderr.strip().startswith("parity: error: tensorrt is not installed") and len(out.stderr.strip().splitlines()) == 1
    out = subprocess.run([sys.executable, "-c", code, *args[:-10]], capture_output=True, text=True)  # no --until
    assert out.returncode == 2 and "--until" in out.stderr
