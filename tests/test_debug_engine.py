"""The core debug engine, exercised through the installed CLI (``parity debug repeat`` / ``reduce``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parity.cli import main
from parity.debug import DebugSession, InteractiveCheck, PredicateCheck, Verdict
from parity.debug.session import Iteration

PY = sys.executable  # stdlib-only check scripts run as PY -S: skipping site (its .pth files) saves 20-45 ms a start



@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    """Debug commands write parity_debug.* and state files into the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    yield tmp_path
    monkeypatch.delenv("PARITY_DEBUG_ITERATION", raising=False)

def test_verdict_rules_match_polygraphy():
    assert Verdict().is_bad(1, "") and not Verdict().is_bad(0, "")
    assert not Verdict(ignore_fail_codes=(3,)).is_bad(3, "")
    assert Verdict(fail_codes=(3,)).is_bad(3, "") and not Verdict(fail_codes=(3,)).is_bad(1, "")
    assert Verdict(fail_regex=("mismatch",)).is_bad(0, "accuracy mismatch")  # regex alone: even with exit 0
    assert not Verdict(fail_regex=("mismatch",)).is_bad(1, "crash")
    assert not Verdict(fail_codes=(1,), fail_regex=("mismatch",)).is_bad(1, "crash")  # code and regex must both match


def test_repeat_until_bad_sorts_artifacts(tmp_path):
    # The check writes out.txt and fails on its third run.
    script = tmp_path / "flaky.py"
    script.write_text(
        "import os, pathlib\np = pathlib.Path('n'); n = int(p.read_text()) if p.exists() else 0\np.write_text(str(n + 1))\n"
        "pathlib.Path('out.txt').write_text(str(n))\nraise SystemExit(1 if n == 2 else 0)\n"
    )
    code = main(["debug", "repeat", "--until", "bad", "--artifacts", "out.txt", "--artifacts-dir", "arts", "--check", PY, "-S", str(script)])
    assert code == 1
    assert sorted(p.name for p in (tmp_path / "arts" / "good").iterdir()) == ["out_N0.txt", "out_N1.txt"]
    assert [p.read_text() for p in (tmp_path / "arts" / "bad").iterdir()] == ["2"]


def test_repeat_until_n_passes_and_good_stops_early(tmp_path):
    assert main(["debug", "repeat", "--until", "3", "--check", PY, "-S", "-c", "pass"]) == 0
    assert main(["debug", "repeat", "--until", "good", "--check", PY, "-S", "-c", "pass"]) == 0
    assert main(["debug", "repeat", "--until", "soon", "--check", PY, "-S", "-c", "pass"]) == 2


def test_check_timeout_kills_the_process_group(tmp_path):
    # The check starts a grandchild and hangs; the timeout must kill both.
    check = f"{PY} -S -c \"import subprocess,sys; p=subprocess.Popen(['sleep','60']); open('child','w').write(str(p.pid)); p.wait()\""
    start = time.perf_counter()
    code = main(["debug", "repeat", "--until", "1", "--check-timeout", "1", "--check", "sh", "-c", check])
    assert code == 1  # a hung check is bad
    assert time.perf_counter() - start < 15
    pid = int((tmp_path / "child").read_text())
    time.sleep(0.2)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Running (a killed orphan may linger as a zombie until init reaps it: that is dead)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_iteration_info_is_readable_by_the_check(tmp_path):
    script = tmp_path / "info.py"
    script.write_text("import json, sys\ninfo = json.load(open('info.json'))\nsys.exit(0 if info['iteration'] >= 0 and 'key' in info else 1)\n")
    assert main(["debug", "repeat", "--until", "2", "--iteration-info", "info.json", "--check", PY, "-S", str(script)]) == 0
    assert not (tmp_path / "info.json").exists()  # removed after each iteration


def test_interactive_check_asks_until_it_understands():
    answers = iter(["maybe", "f"])
    it = Iteration(0, "k", "parity_debug.onnx", "parity_debug.onnx")
    assert InteractiveCheck(prompt=lambda text: next(answers))(it).bad


def test_interactive_mode_from_the_terminal(tmp_path):
    proc = subprocess.run(["parity", "debug", "repeat", "--until", "2"], input="p\nx\nf\n", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("[p]ass or [f]ail") == 3


def test_session_caches_and_resumes_from_state(tmp_path):
    calls = []
    check = PredicateCheck(lambda it: calls.append(it.key) or it.key == "b")
    state = str(tmp_path / "s.json")
    session = DebugSession(check, state_path=state, fingerprint={"x": 1})
    assert session.evaluate("a", lambda it: None) is False
    assert session.evaluate("b", lambda it: None) is True
    assert session.evaluate("a", lambda it: None) is False  # cached: no second check
    assert calls == ["a", "b"]
    # A new process (same fingerprint) replays the recorded verdicts without checking.
    again = DebugSession(check, state_path=state, fingerprint={"x": 1})
    assert again.evaluate("b", lambda it: None) is True and calls == ["a", "b"]
    assert again.summary.resumed == 1
    # A different command ignores the file.
    other = DebugSession(check, state_path=state, fingerprint={"x": 2})
    assert other.evaluate("b", lambda it: None) is True and calls == ["a", "b", "b"]
    other.finish()
    assert not Path(state).exists()


def test_bad_check_command_is_one_line_error(tmp_path, capsys):
    code = main(["debug", "repeat", "--until", "1", "--check", "/no/such/binary"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot run" in err and "Traceback" not in err


def test_bad_regex_is_a_usage_error():
    assert main(["debug", "repeat", "--until", "1", "--fail-regex", "(", "--check", PY, "-S", "-c", "pass"]) == 2


def test_state_file_content_is_json(tmp_path):
    check = PredicateCheck(lambda it: True)
    session = DebugSession(check, state_path="st.json", fingerprint={})
    session.evaluate("k", lambda it: None)
    data = json.loads(Path("st.json").read_text())
    assert data["format"] == "parity-debug-state" and data["verdicts"] == {"k": True}


def test_a_reporter_without_the_optional_methods_is_completed_once(tmp_path, capsys):
    """A third party's debug reporter with only ``iteration`` (no ``expect``, ``warn``...): the session calls every
    method directly, its own where it has them and parity.api.DebugReporter's defaults where not."""
    from parity.api import DebugReporter

    seen = []

    class Minimal:
        def iteration(self, index, verdict, seconds, info, resumed=False, note=""):
            seen.append((index, verdict))

    session = DebugSession(PredicateCheck(lambda it: it.key == "b"), reporter=Minimal())
    assert isinstance(session.reporter, DebugReporter)
    session.expect(2)  # the default: nothing
    session.evaluate("a", lambda it: None)
    session.evaluate("b", lambda it: None)
    session.reporter.warn("watch out")  # the default: one line on stderr
    session.finish()
    assert [verdict for _, verdict in seen] == ["good", "bad"]
    assert "watch out" in capsys.readouterr().err
