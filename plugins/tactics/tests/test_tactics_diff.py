"""diff-tactics on simulated flaky builds: planted culprits, label noise, several culprits, no answer."""

from __future__ import annotations

import math

import pytest
from parity_tactics.diff import NO_RESULT, diff_replays, diff_tactics, fisher_one_sided
from parity_tactics.render import render_diff
from parity_tactics.replay import Tactic, TacticReplay
from tactics_synth import layer_key, layer_tactic, simulate, write_sorted

from parity.errors import UsageError


def polygraphy_set_difference(good, bad):
    """What Polygraphy reports: per layer, tactics of bad replays never seen in a good one."""
    seen = {(k, t) for r in good for k, t in r.items()}
    return {(k, t) for r in bad for k, t in r.items() if (k, t) not in seen}


def test_fisher_matches_hand_computed_values():
    assert fisher_one_sided(5, 5, 0, 5) == pytest.approx(1 / math.comb(10, 5))
    assert fisher_one_sided(1, 1, 0, 2) == pytest.approx(1 / 3)
    # 3 of 4 bad and 1 of 6 good: P(X>=3), X ~ Hypergeom(N=10, K=4, n=4)
    expected = sum(math.comb(4, k) * math.comb(6, 4 - k) for k in (3, 4)) / math.comb(10, 4)
    assert fisher_one_sided(3, 4, 1, 6) == pytest.approx(expected)
    assert fisher_one_sided(0, 3, 3, 3) == 1.0


@pytest.mark.parametrize("source", ["algorithm-selector", "timing-cache"])
@pytest.mark.parametrize("seed", range(5))
def test_planted_culprit_ranks_first(source, seed):
    good, bad = simulate(40, culprits=[(7, 2)], seed=seed, source=source)
    result = diff_replays(good, bad)
    top = result.suspects[0]
    assert (top.key, top.tactic) == (layer_key(7, source), layer_tactic(7, 2, source))
    assert top.rank == 1 and top.bad == len(bad) and top.good == 0 and top.bad_only
    assert all(s.p_value > top.p_value for s in result.suspects[1:])


@pytest.mark.parametrize("seed", range(8))
def test_culprit_still_first_when_a_good_build_also_has_it(seed):
    """One mislabelled/lucky good build hides the culprit from a set difference, not from the ranking."""
    good, bad = simulate(40, culprits=[(3, 1)], seed=seed)
    culprit = (layer_key(3), layer_tactic(3, 1))
    lucky = TacticReplay(source="algorithm-selector")
    for layer in range(12):
        lucky.add(layer_key(layer), layer_tactic(layer, 1 if layer == 3 else 0))
    good.append(lucky)
    assert culprit not in polygraphy_set_difference(good, bad)
    top = diff_replays(good, bad).suspects[0]
    assert (top.key, top.tactic) == culprit and top.good == 1


@pytest.mark.parametrize("seed", range(6))
def test_label_noise(seed):
    """10% of verdicts flipped by a flaky check: the culprit still ranks first."""
    good, bad = simulate(80, culprits=[(5, 0)], label_noise=0.1, seed=seed)
    top = diff_replays(good, bad).suspects[0]
    assert (top.key, top.tactic) == (layer_key(5), layer_tactic(5, 0))


def test_two_independent_culprits_rank_above_everything_else():
    good, bad = simulate(120, culprits=[(2, 0), (9, 1)], seed=3)
    result = diff_replays(good, bad)
    top_two = {(s.key, s.tactic) for s in result.suspects[:2]}
    assert top_two == {(layer_key(2), layer_tactic(2, 0)), (layer_key(9), layer_tactic(9, 1))}
    assert all(s.good == 0 for s in result.suspects[:2])


def test_tied_suspects_share_a_rank():
    def replay(*tactics):
        r = TacticReplay()
        for i, t in enumerate(tactics):
            r.add(f"L{i}", Tactic(t))
        return r

    # L0:9 and L1:8 always appear together in bad builds: the data cannot tell them apart
    good = [replay(1, 1, 1), replay(1, 1, 2)]
    bad = [replay(9, 8, 1), replay(9, 8, 2)]
    result = diff_replays(good, bad)
    assert [(s.key, s.rank) for s in result.suspects] == [("L0", 1), ("L1", 1)]


def test_nothing_determined_cases():
    good, _ = simulate(2, culprits=[], seed=1)
    no_bad = diff_replays(good, [])
    assert not no_bad.determined and no_bad.reason == "no bad tactic replays"
    text = render_diff(no_bad)
    assert text.splitlines()[:3] == ["Loaded 2 good tactic replays.", "Loaded 0 bad tactic replays.", NO_RESULT]
    assert diff_replays([], good).reason == "no good tactic replays to compare against"
    same = diff_replays([good[0], good[0]], [good[0]])
    assert not same.determined and "at least as common" in same.reason
    assert same.unexplained == 1
    assert "1 of 1 bad replays used exactly the tactics of a good build" in render_diff(same)


def test_mixed_sources_are_refused():
    sel = TacticReplay(source="algorithm-selector").add("L", Tactic(1))
    cache = TacticReplay(source="timing-cache").add("0x" + "0" * 32, Tactic(1))
    with pytest.raises(UsageError, match="cannot compare"):
        diff_replays([sel], [cache])


def test_diff_from_folders_and_lists(tmp_path):
    good, bad = simulate(30, culprits=[(4, 2)], seed=11)
    write_sorted(tmp_path, good, bad)
    by_dir = diff_tactics(str(tmp_path))
    assert (by_dir.n_good, by_dir.n_bad) == (len(good), len(bad))
    files = sorted(str(p) for p in (tmp_path / "bad").glob("*.json"))
    by_list = diff_tactics(good=[str(tmp_path / "good")], bad=files)
    assert [s.to_json() for s in by_list.suspects] == [s.to_json() for s in by_dir.suspects]
    assert by_dir.suspects[0].key == layer_key(4)
    # a missing bad/ folder counts as empty: the seeds' all-good case
    (tmp_path / "only_good").mkdir()
    write_sorted(tmp_path / "only_good", good[:2], [])
    assert diff_tactics(str(tmp_path / "only_good")).reason == "no bad tactic replays"
    with pytest.raises(UsageError, match="no such directory"):
        diff_tactics(str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="give --dir"):
        diff_tactics(good=[str(tmp_path / "good")])
