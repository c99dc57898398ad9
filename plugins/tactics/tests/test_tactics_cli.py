"""The installed plugin through the ``parity`` command: discovery, tables, the seeds' wording, clean errors."""

from __future__ import annotations

import json

import pytest
from parity_tactics.replay import Tactic, TacticReplay
from tactics_synth import layer_key, simulate, write_polygraphy_replay, write_sorted

from parity.testing import invoke


def test_discovered_through_its_entry_point():
    import importlib.metadata

    eps = [ep for ep in importlib.metadata.entry_points(group="parity") if ep.name == "tactics"]
    assert eps and eps[0].value == "parity_tactics.hooks"
    out = invoke("inspect", "--help")
    assert "tactics" in out.stdout and "diff-tactics" in out.stdout


def test_inspect_tactics_table_and_json(tmp_path):
    replay = TacticReplay(source="timing-cache", tensorrt="11.4.0.106")
    replay.add("0x" + "18" * 16, Tactic(0x665DED9ABBF88, timing_ms=0.011264, name="matMul1"))
    replay.save(tmp_path / "r.json")
    out = invoke("inspect", "tactics", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "source: timing-cache, TensorRT 11.4.0.106, 1 timing-cache key" in lines[0]
    assert lines[1].split() == ["#", "Timing-cache", "key", "Op", "Tactic", "hash", "Time", "(ms)"]
    assert lines[3].split() == ["1", "0x" + "18" * 16, "matMul1", "0x000665ded9abbf88", "0.01126"]
    as_json = invoke("inspect", "tactics", str(tmp_path / "r.json"), "--json")
    assert json.loads(as_json.stdout)["tactics"]["0x" + "18" * 16]["tactic"] == "0x000665ded9abbf88"


def test_inspect_polygraphy_file(tmp_path):
    write_polygraphy_replay(tmp_path / "pg.json", {"/conv1/Conv": [-2147483642, -4566512812484733616, [["FLOAT", [4, 1], -1, 1]], [["HALF", [4, 1], 0, 2]]]})
    out = invoke("inspect", "tactics", str(tmp_path / "pg.json"))
    assert out.exit_code == 0, out.stderr
    assert "Polygraphy tactic replay" in out.stdout
    row = out.stdout.splitlines()[3].split()
    assert row[:4] == ["1", "/conv1/Conv", "0xc0a07cca9d93d550", "-2147483642"]


def test_seed_all_good_wording(tmp_path, monkeypatch):
    """Seeds 000/001: two good builds, no bad ones."""
    good, _ = simulate(2, culprits=[], seed=0)
    write_sorted(tmp_path / "replays", good, [])
    monkeypatch.chdir(tmp_path)
    for group in ("inspect", "debug"):  # debug diff-tactics: the seeds' older spelling
        out = invoke(group, "diff-tactics", "--dir", "replays")
        assert out.exit_code == 0, out.stderr
        assert out.stdout.splitlines()[:3] == [
            "Loaded 2 good tactic replays.",
            "Loaded 0 bad tactic replays.",
            "Could not determine potentially bad tactics. Try generating more tactic replay files?",
        ]


def test_diff_reports_ranked_suspects(tmp_path):
    good, bad = simulate(30, culprits=[(6, 1)], seed=2)
    write_sorted(tmp_path, good, bad)
    out = invoke("inspect", "diff-tactics", "--dir", str(tmp_path), "--top", "3")
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"Loaded {len(good)} good tactic replays."
    assert lines[2].startswith("Found ")
    first = lines[5].split()
    assert first[0] == "1" and first[1] == layer_key(6) and first[-1] == "yes"
    assert f"{len(bad)}/{len(bad)}" in first and f"0/{len(good)}" in first
    ranks = [int(line.split()[0]) for line in lines[5:8]]
    assert ranks == sorted(ranks) and len(lines) == 9 and lines[8].startswith("... ") and "--top 0" in lines[8]
    as_json = json.loads(invoke("inspect", "diff-tactics", "--good", str(tmp_path / "good"), "--bad", str(tmp_path / "bad"), "--json").stdout)
    assert as_json["suspects"][0]["key"] == layer_key(6) and as_json["suspects"][0]["rank"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "tactics", "missing.json"], "tactic replay file not found: missing.json"),
        (["inspect", "tactics", "broken.json"], "broken.json is not valid JSON"),
        (["inspect", "tactics", "golden.json"], "golden.json is not a tactic replay"),
        (["inspect", "diff-tactics", "--dir", "nowhere"], "no such directory: nowhere"),
        (["inspect", "diff-tactics", "--good", "broken.json", "--bad", "golden.json"], "broken.json is not valid JSON"),
        (["inspect", "diff-tactics"], "give --dir"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, args, message):
    (tmp_path / "broken.json").write_text('{"replay": ')
    (tmp_path / "golden.json").write_text('{"lst": []}')
    monkeypatch.chdir(tmp_path)
    out = invoke(*args)
    assert out.exit_code == 2
    assert out.stderr.strip() == f"parity: error: {out.stderr.strip().removeprefix('parity: error: ')}"
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
