"""Polygraphy 0.53.6's debug flags on ``parity debug repeat`` (the shared debug engine): ``--check-inference``,
``--ignore-fail-returncode``, ``--fail-code``/``--ignore-fail-code`` with several codes, several ``--fail-regex``,
the ``Passed: x/y | Pass Rate: z%`` summary, ``--until`` and the debug replays (``--save-debug-replay`` /
``--load-debug-replay``, Polygraphy's replay files included). Each asserts the flag's effect."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from parity.debug import CommandCheck, Verdict
from parity.testing import invoke

PY = sys.executable  # stdlib-only check scripts run as PY -S: skipping site (its .pth files) saves 20-45 ms a start

# A check whose verdict follows the iteration (PARITY_DEBUG_ITERATION): exit with the code listed for it, and
# leave a file ran_<iteration> so a test can tell which iterations ran a check at all.
CHECK = """import os, sys
i = int(os.environ["PARITY_DEBUG_ITERATION"])
open(f"ran_{i}", "w").close()
codes = [int(c) for c in sys.argv[1].split(",")]
print(sys.argv[2] if len(sys.argv) > 2 else "")
sys.exit(codes[i % len(codes)])
"""


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "check.py").write_text(CHECK)
    yield tmp_path


def _ran(folder: Path) -> list[int]:
    return sorted(int(p.name[4:]) for p in folder.glob("ran_*"))


def _repeat(*args: str):
    return invoke("debug", "repeat", *args)


def test_check_inference_is_check():
    code, out, err = _repeat("--until", "3", "--check-inference", PY, "-S", "check.py", "0,1,0")
    assert code == 1, err  # iteration 1 exits 1: bad
    assert "bad: 1, good: 2" in out
    assert _ran(Path.cwd()) == [0, 1, 2]


@pytest.mark.parametrize(
    ("opts", "passed"),
    [([], "0/5"), (["--ignore-fail-returncode", "2"], "0/5"), (["--ignore-fail-returncode", "1"], "5/5"), (["--ignore-fail-code", "3", "1"], "5/5")],
)
def test_ignore_fail_returncode(opts, passed):
    code, out, err = _repeat("--until", "5", *opts, "--check", PY, "-S", "check.py", "1")
    assert f"Passed: {passed} | Pass Rate: {'100.0' if passed == '5/5' else '0.0'}%" in out, err
    assert code == (0 if passed == "5/5" else 1)


def test_fail_code_takes_several_codes_as_polygraphy_does():
    # codes per iteration: 4 (listed: bad), 3 (listed: bad), 2 (not listed: neither, so unresolved), 0 good
    code, out, err = _repeat("--until", "4", "--fail-code", "3", "4", "--check", PY, "-S", "check.py", "4,3,2,0")
    assert "bad: 2, good: 1, unresolved: 1" in out, err
    assert code == 1


def test_pass_rate_line_is_polygraphys():
    code, out, _ = _repeat("--until", "3", "--check", PY, "-S", "check.py", "0,1,0")
    # Parity's own summary stays; Polygraphy's line follows it, its rate printed as Polygraphy prints the float
    assert "Finished 3 check(s) | bad: 1, good: 2, unresolved: 0" in out
    assert "Finished 3 iteration(s) | Passed: 2/3 | Pass Rate: 66.66666666666667%" in out
    assert code == 1


@pytest.mark.parametrize(
    ("until", "codes", "iterations", "exit_code"),
    [("good", "1,1,0,1", 3, 1), ("good", "0", 1, 0), ("bad", "0,0,1", 3, 1), ("5", "0", 5, 0), ("5", "1", 5, 1)],
)
def test_until_stops_and_exit_codes(until, codes, iterations, exit_code):
    # Parity's exit code says whether any iteration was bad (1) or none (0); Polygraphy exits 0 either way.
    code, out, err = _repeat("--until", until, "--check", PY, "-S", "check.py", codes)
    assert f"Finished {iterations} iteration(s)" in out, err
    assert _ran(Path.cwd()) == list(range(iterations))
    assert code == exit_code


def test_several_fail_regex_any_match_is_the_failure():
    # Polygraphy: several --fail-regex, any of them matching is a failure; exit 0 with a match is bad too.
    code, out, _ = _repeat("--until", "3", "--fail-regex", "REALLY BAD", "BAD NODE", "--check", PY, "-S", "check.py", "0", "BAD NODE here")
    assert "Passed: 0/3" in out and code == 1
    # against an original failure (reduce, precision): one regex keeps the matched text in the signature,
    # several accept a match of any of them
    one = CommandCheck(["x"], Verdict(fail_regex=("BAD \\w+",)), reference=("exit", 1, "BAD NODE"))
    several = CommandCheck(["x"], Verdict(fail_regex=("REALLY BAD", "BAD NODE")), reference=("exit", 1, "BAD NODE"))
    assert one.judge(1, "BAD THING", False).verdict == "unresolved"
    assert several.judge(1, "REALLY BAD", False).verdict == "bad"
    assert several.judge(1, "fine", False).verdict == "unresolved"  # exit 1 without a match: not the failure
    assert several.judge(0, "fine", False).verdict == "good"


def test_save_debug_replay_then_load_skips_the_checks(tmp_path):
    code, out, err = _repeat("--until", "3", "--save-debug-replay", "replay.json", "--check", PY, "-S", "check.py", "0,1,0")
    assert code == 1, err
    replay = json.loads((tmp_path / "replay.json").read_text())
    assert replay["format"] == "parity-debug-replay" and replay["command"] == "repeat"
    assert replay["verdicts"] == {"N0": False, "N1": True, "N2": False}  # false: good, true: bad (as the state file)
    assert not (tmp_path / "replay_skip_current.json").exists()  # only while a check runs
    for p in tmp_path.glob("ran_*"):
        p.unlink()
    # the replayed iterations are not checked again; iteration 3 and 4 are
    code, out, err = _repeat("--until", "5", "--load-debug-replay", "replay.json", "--check", PY, "-S", "check.py", "0")
    assert _ran(tmp_path) == [3, 4]
    assert "loading iteration information from debug replay replay.json: 3 verdict(s)" in err
    assert "Finished 5 check(s) (3 from the debug replay) | bad: 1, good: 4" in out
    assert code == 1  # the replayed bad iteration counts


def test_skip_current_marks_the_running_check_unresolved(tmp_path):
    # The check copies the skip-current replay written while it runs: its own iteration is in it, unresolved.
    (tmp_path / "peek.py").write_text("import os, shutil\ni = os.environ['PARITY_DEBUG_ITERATION']\nshutil.copy('r_skip_current.json', f'seen_{i}.json')\n")
    code, _, err = _repeat("--until", "2", "--save-debug-replay", "r.json", "--check", PY, "-S", "peek.py")
    assert code == 0, err
    seen = json.loads((tmp_path / "seen_1.json").read_text())
    assert seen["verdicts"] == {"N0": False, "N1": "unresolved"}
    # loaded after a crash, it skips the check that crashed: neither good nor bad, and not run again
    (tmp_path / "crashed.json").write_text(json.dumps(seen))
    code, out, _ = _repeat("--until", "2", "--load-debug-replay", "crashed.json", "--check", "false")
    assert "bad: 0, good: 1, unresolved: 1" in out and code == 3


POLYGRAPHY_REPLAY = {  # as Polygraphy 0.53.6 writes polygraphy_debug_replay.json for `debug repeat --until 3`
    "_N0": {"state": {}, "iteration_info": {"iteration": 0}, "success": True, "polygraphy_class": "IterationContext"},
    "_N1": {"state": {}, "iteration_info": {"iteration": 1}, "success": False, "polygraphy_class": "IterationContext"},
    "_N2": {"state": {}, "iteration_info": {"iteration": 2}, "success": True, "polygraphy_class": "IterationContext"},
}


def test_polygraphy_replay_loads_into_repeat(tmp_path):
    (tmp_path / "polygraphy_debug_replay.json").write_text(json.dumps(POLYGRAPHY_REPLAY, indent=4))
    code, out, err = _repeat("--until", "4", "--load-debug-replay", "polygraphy_debug_replay.json", "--check", PY, "-S", "check.py", "0")
    assert _ran(tmp_path) == [3]  # Polygraphy's _N0.._N2 are Parity's iterations 0..2
    assert "Passed: 3/4" in out and code == 1, err


@pytest.mark.skipif(shutil.which("polygraphy") is None, reason="polygraphy is not installed")
def test_a_replay_polygraphy_itself_wrote_loads(tmp_path):
    subprocess.run(["polygraphy", "debug", "repeat", "--until", "2", "--check", "false"], cwd=tmp_path, capture_output=True, timeout=300, check=True)
    code, out, err = _repeat("--until", "3", "--load-debug-replay", "polygraphy_debug_replay.json", "--check", PY, "-S", "check.py", "0")
    assert _ran(tmp_path) == [2], err
    assert "bad: 2, good: 1" in out and code == 1


def test_polygraphy_search_replay_and_other_files_are_refused_in_one_line(tmp_path):
    reduce_replay = {"_N0_outputs": {"state": {"num_nodes": 3}, "iteration_info": {"iteration": 0}, "success": True, "polygraphy_class": "IterationContext"}}
    (tmp_path / "reduce_replay.json").write_text(json.dumps(reduce_replay))
    (tmp_path / "notes.json").write_text('{"a": 1}')
    cases = {
        "reduce_replay.json": "a Polygraphy replay of its own search steps",
        "notes.json": "not a debug replay",
        "missing.json": "no such file",
    }
    for name, message in cases.items():
        code, out, err = _repeat("--until", "2", "--load-debug-replay", name, "--check", PY, "-S", "check.py", "0")
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
        assert not _ran(tmp_path)


def test_a_replay_of_another_command_is_refused(tmp_path):
    replay = {"format": "parity-debug-replay", "version": 1, "command": "reduce", "input": "x", "reference": None, "verdicts": {}}
    (tmp_path / "r.json").write_text(json.dumps(replay))
    code, _, err = _repeat("--until", "2", "--load-debug-replay", "r.json", "--check", "true")
    assert code == 2 and "a replay of 'debug reduce', not of 'debug repeat'" in err


def test_save_debug_replay_never_overwrites_another_file(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"not a replay")
    code, _, err = _repeat("--until", "2", "--save-debug-replay", "model.onnx", "--check", PY, "-S", "check.py", "0")
    assert code == 2 and "exists and is not a debug replay" in err
    assert (tmp_path / "model.onnx").read_bytes() == b"not a replay" and not _ran(tmp_path)


def test_help_shows_no_parameter_names_as_defaults():
    # a parameter name given as click.Option's second argument is its show_default: help said "[default: (fail_code)]"
    code, out, _ = _repeat("--help")
    assert code == 0 and "--check-inference" in out and "--ignore-fail-returncode" in out
    assert "[default: (" not in out
