"""The replay format: round trips, Polygraphy files (written by Polygraphy itself), and bad input."""

from __future__ import annotations

import json

import pytest
from parity_tactics.replay import (
    Tactic,
    TacticReplay,
    TensorFormat,
    load_replay,
    load_replays,
    normalize_tactic,
    tactic_hex,
)
from tactics_synth import FLOAT, HALF, write_polygraphy_replay

from parity.errors import UsageError


def test_tactic_ids_are_one_unsigned_64_bit_form():
    assert normalize_tactic(-1) == (1 << 64) - 1
    assert normalize_tactic("0xffffffffffffffff") == (1 << 64) - 1
    assert normalize_tactic("-4566512812484733616") == normalize_tactic(-4566512812484733616)
    assert tactic_hex(normalize_tactic(-4566512812484733616)) == "0xc0a07cca9d93d550"
    assert Tactic(-1) == Tactic("0xFFFFFFFFFFFFFFFF")
    for bad in (True, 1.5, "zz", 1 << 64, -(1 << 63) - 1):
        with pytest.raises(ValueError):
            normalize_tactic(bad)


def test_identity_ignores_timing_and_name_but_not_formats():
    a = Tactic(7, 1, (FLOAT,), (HALF,), timing_ms=0.1, name="x")
    assert a == Tactic(7, 1, (FLOAT,), (HALF,), timing_ms=9.0)
    assert hash(a) == hash(Tactic(7, 1, (FLOAT,), (HALF,)))
    assert a != Tactic(7, 1, (FLOAT,), (FLOAT,))
    assert a != Tactic(7, 2, (FLOAT,), (HALF,))


def test_round_trip_both_sources(tmp_path):
    selector = TacticReplay(source="algorithm-selector", tensorrt="10.7.0")
    selector.add("/conv1/Conv", Tactic(-4566512812484733616, -2147483642, (FLOAT,), (HALF,), timing_ms=0.5))
    selector.add("/relu", Tactic(3))
    cache = TacticReplay(source="timing-cache", tensorrt="11.4.0.106", timing_cache=bytes(range(256)) * 3)
    cache.add("0x" + "ab" * 16, Tactic(0x665DED9ABBF88, timing_ms=0.011264, name="matMul1"))
    for replay in (selector, cache):
        path = tmp_path / f"{replay.source}.json"
        replay.save(path)
        loaded = load_replay(path)
        assert loaded == replay
        assert list(loaded) == list(replay)  # build order kept
        assert loaded.path == str(path)
    data = json.loads((tmp_path / "algorithm-selector.json").read_text())
    assert data["format"] == "parity-tactics" and data["version"] == 1
    assert data["tactics"]["/conv1/Conv"]["tactic"] == "0xc0a07cca9d93d550"
    assert data["tactics"]["/conv1/Conv"]["inputs"][0] == {
        "dtype": "FLOAT", "strides": [64, 16, 4, 1], "vectorized_dim": -1, "components_per_element": 1
    }
    # readable: one line per tensor format, not one per stride
    assert '"inputs": [{"dtype": "FLOAT", "strides": [64, 16, 4, 1]' in (tmp_path / "algorithm-selector.json").read_text()
    cached = json.loads((tmp_path / "timing-cache.json").read_text())
    assert cached["timing_cache"]["size"] == 768
    assert load_replay(tmp_path / "timing-cache.json").tactics["0x" + "ab" * 16].name == "matMul1"


def test_reads_files_written_by_polygraphy(tmp_path):
    path = tmp_path / "pg.json"
    write_polygraphy_replay(
        path,
        {
            "/conv1/Conv": [-2147483642, -4566512812484733616, [["FLOAT", [150528, 50176, 224, 1], -1, 1]], [["HALF", [802816, 12544, 112, 1], 0, 2]]],
            "/fc/Gemm": [5, 1024, [["HALF", [4, 1], -1, 1]], [["FLOAT", [2, 1], -1, 1]]],
        },
    )
    assert json.loads(path.read_text())["polygraphy_class"] == "TacticReplayData"
    replay = load_replay(path)
    assert replay.origin == "polygraphy" and replay.source == "algorithm-selector"
    assert list(replay) == ["/conv1/Conv", "/fc/Gemm"]
    conv = replay.tactics["/conv1/Conv"]
    assert conv == Tactic(
        -4566512812484733616,
        -2147483642,
        (TensorFormat("FLOAT", (150528, 50176, 224, 1), -1, 1),),
        (TensorFormat("HALF", (802816, 12544, 112, 1), 0, 2),),
    )
    # converting to the Parity format keeps the identity
    replay.save(tmp_path / "converted.json")
    assert load_replay(tmp_path / "converted.json").tactics == replay.tactics


def test_reads_old_polygraphy_pair_form(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"replay": {"L": {"implementation": 1, "tactic": 2,
                                                "inputs": [["TensorFormat.LINEAR", "DataType.FLOAT"]],
                                                "outputs": [["TensorFormat.CHW2", "DataType.HALF"]]}}}))
    tactic = load_replay(path).tactics["L"]
    assert tactic.inputs[0].dtype == "FLOAT" and tactic.inputs[0].format == "TensorFormat.LINEAR"
    assert tactic.outputs[0].dtype == "HALF"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not valid JSON (line 1"),
        ("[1, 2]", "is not a tactic replay (expected a JSON object)"),
        ('{"results": []}', "is not a tactic replay"),
        ('{"format": "parity-tactics", "version": 2, "tactics": {}}', "version 2; this parity-tactics reads up to 1"),
        ('{"format": "parity-tactics", "version": 1, "tactics": []}', "malformed"),
        ('{"format": "parity-tactics", "version": 1, "tactics": {"L": {"no": 1}}}', "entry needs a 'tactic'"),
        ('{"format": "parity-tactics", "version": 1, "source": "guess", "tactics": {}}', "unknown replay source"),
        ('{"format": "parity-tactics", "version": 1, "tactics": {}, "timing_cache": {"encoding": "base64", "data": "@@"}}', "not base64"),
        ('{"replay": {"L": {"tactic": "0xnothex"}}}', "malformed"),
    ],
)
def test_bad_files_are_one_line_usage_errors(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(UsageError) as info:
        load_replay(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(UsageError, match="tactic replay file not found"):
        load_replay(tmp_path / "nope.json")
    with pytest.raises(UsageError, match="no such file or directory"):
        load_replays([tmp_path / "nope"])


def test_directory_search_skips_non_replays_and_binaries(tmp_path):
    TacticReplay().add("L", Tactic(1)).save(tmp_path / "a" / "replay.json")
    TacticReplay().add("L", Tactic(2)).save(tmp_path / "b" / "deeper" / "replay.json")
    (tmp_path / "golden.json").write_text('{"results": 1}')
    (tmp_path / "a" / "parity_debug.engine").write_bytes(b"\x00\xff" * 100)
    found = load_replays(tmp_path)
    assert sorted(r.tactics["L"].tactic for r in found.replays) == [1, 2]
    assert [p for p, _ in found.skipped] == [str(tmp_path / "golden.json")]
