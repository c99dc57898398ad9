"""Good, bad, unresolved; Polygraphy's artifact names; signals and leftover processes (the debug engine)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from parity.cli import main
from parity.debug import CommandCheck, Verdict
from parity.debug.session import Iteration

PY = sys.executable


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    yield tmp_path
    monkeypatch.delenv("PARITY_DEBUG_ITERATION", raising=False)


def _model(path: Path, n: int = 12) -> Path:
    nodes, prev = [], "x"
    for i in range(n):
        out = f"t{i}" if i < n - 1 else "y"
        nodes.append(helper.make_node("Relu", [prev], [out], name=f"n{i}"))
        prev = out
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _judge(check: CommandCheck, code: int, output: str = "", timed_out: bool = False) -> str:
    return check.judge(code, output, timed_out).verdict


def test_verdicts_follow_the_original_failure_signature():
    check = CommandCheck(["sh", "check.sh"], timeout=5)
    assert _judge(check, 3) == "bad"  # no original yet (debug repeat): Polygraphy's rule
    check.reference = ("exit", 3, None)
    assert _judge(check, 3) == "bad" and _judge(check, 0) == "good"
    assert _judge(check, 1) == "unresolved"  # another code
    assert _judge(check, -11) == "unresolved"  # killed by a signal
    assert _judge(check, 3, timed_out=True) == "unresolved"
    assert _judge(check, 3, "cat: parity_debug.onnx: No such file or directory") == "unresolved"
    assert _judge(check, 127, "sh: 1: foo: not found") == "unresolved"
    assert _judge(check, 3, "TensorRT: plugin not found") == "bad"  # a real failure that says "not found"
    regex = CommandCheck(["x"], Verdict(fail_codes=(1, 2), fail_regex=("error: \\w",)), reference=("exit", 1, "error: A"))
    assert _judge(regex, 2, "error: A") == "bad"  # --fail-code: any listed code
    assert _judge(regex, 1, "error: B") == "unresolved"  # the matched text is part of the signature
    assert _judge(regex, 1, "other") == "unresolved" and _judge(regex, 0, "") == "good"
    hang = CommandCheck(["x"], timeout=1, reference=("timeout",))
    assert _judge(hang, None, timed_out=True) == "bad"  # the original hung: a hang is the failure


def test_repeat_counts_unresolved_and_missing_input_is_not_bad(capsys):
    code = main(["debug", "repeat", "--until", "2", "--check", PY, "-S", "-c", "open('no_such_file.onnx')"])
    captured = capsys.readouterr()
    assert code == 3  # never observed a failure, nor a pass
    assert "bad: 0, good: 0, unresolved: 2" in captured.out
    assert "cannot find its input" in captured.err


def test_interactive_answer_unresolved(tmp_path):
    proc = subprocess.run(["parity", "debug", "repeat", "--until", "2"], input="u\np\n", capture_output=True, text=True, timeout=60)
    assert "[u]nresolved" in proc.stderr
    assert "bad: 0, good: 1, unresolved: 1" in proc.stdout, proc.stderr


def test_polygraphy_artifact_names_get_the_iteration_artifact(tmp_path):
    it = Iteration(0, "k", "parity_debug.job1.onnx", "parity_debug.onnx")
    assert CommandCheck(["cat", "polygraphy_debug.onnx", "{artifact}"]).command_for(it) == ["cat", "parity_debug.job1.onnx", "parity_debug.job1.onnx"]
    engine = Iteration(0, "k", "parity_debug.engine", "parity_debug.engine")
    assert CommandCheck(["x", "polygraphy_debug.engine"]).command_for(engine) == ["x", "parity_debug.engine"]
    # Polygraphy's guide, as written: `debug reduce ... --check polygraphy run polygraphy_debug.onnx --onnxrt`
    _model(tmp_path / "m.onnx")
    script = tmp_path / "c.py"
    script.write_text("import sys, onnx\nm = onnx.load(sys.argv[1])\nsys.exit(1 if 'n7' in {n.name for n in m.graph.node} else 0)\n")
    code = main(["debug", "reduce", "m.onnx", "-o", "r.onnx", "--no-repro", "--check", PY, str(script), "polygraphy_debug.onnx"])
    assert code == 0
    assert [n.name for n in onnx.load("r.onnx").graph.node] == ["n7"]


def test_timeout_with_a_setsid_child_holding_the_pipe(tmp_path):
    # Before: the output pipe stayed open (held by the child in its own session) and Parity hung ~1000 s.
    start = time.perf_counter()
    code = main(["debug", "repeat", "--until", "1", "--check-timeout", "2", "--check", "bash", "-c", "setsid sleep 1003 & echo $! > bg; sleep 1002"])
    assert time.perf_counter() - start < 15
    assert code == 1  # debug repeat: no original, a hung check is bad (Polygraphy's rule)
    pid = int((tmp_path / "bg").read_text())
    time.sleep(0.3)
    assert not _alive(pid)  # found through the subreaper / check id and killed


def test_leftover_after_a_normal_exit_does_not_hold_parity(tmp_path):
    start = time.perf_counter()
    code = main(["debug", "repeat", "--until", "1", "--check", "bash", "-c", "setsid sleep 1004 & echo $! > bg; exit 0"])
    assert code == 0 and time.perf_counter() - start < 10
    time.sleep(0.3)
    assert not _alive(int((tmp_path / "bg").read_text()))


def test_a_check_ending_while_another_ends_keeps_its_exit_code():
    # Before: the sweep after one check reaped any zombie child not yet registered as a running check, so a check
    # that had just started (and exited) in another --jobs thread lost its status: Python's wait then says 0 on
    # ECHILD, and a failing check read as passing (seen once as a wrong 'good' in test_parallel_answer; here 331
    # of 1468 checks had code 0 before the fix).
    import threading

    from parity.debug import procs
    from parity.debug.check import CheckJob, run_check_job

    stop = threading.Event()

    def other_checks_ending() -> None:
        while not stop.is_set():
            procs.sweep("another-check")

    sweeper = threading.Thread(target=other_checks_ending)
    sweeper.start()
    try:
        codes = [run_check_job(CheckJob(["sh", "-c", "exit 3"])).code for _ in range(100)]
    finally:
        stop.set()
        sweeper.join()
    assert set(codes) == {3}


def _start_reduce(tmp_path: Path) -> subprocess.Popen:
    _model(tmp_path / "m.onnx", 40)
    (tmp_path / "slow.sh").write_text("#!/bin/sh\nsleep 1005 &\necho $! >> kids\nwait\n")
    return subprocess.Popen(
        ["parity", "debug", "reduce", "m.onnx", "-o", "r.onnx", "--no-repro", "--check", "sh", "slow.sh", "parity_debug.onnx"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not (path.exists() and path.read_text().strip()):
        time.sleep(0.05)
    assert path.exists(), "the check never started"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_are_handled_like_ctrl_c(tmp_path, sig, code):
    proc = _start_reduce(tmp_path)
    _wait_for(tmp_path / "kids")
    time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err and f"terminated by {signal.Signals(sig).name}" in err
    assert len([ln for ln in err.splitlines() if ln.startswith("parity: ") and "terminated by" in ln]) == 1
    time.sleep(0.3)
    assert not any(_alive(int(p)) for p in (tmp_path / "kids").read_text().split())  # the check's group was killed
    assert not (tmp_path / "parity_debug.onnx").exists()  # intermediates removed
    state = json.loads((tmp_path / "parity_debug.onnx.state.json").read_text())  # state kept
    assert state["format"] == "parity-debug-state"


def test_a_check_never_outlives_parity_killed_with_sigkill(tmp_path):
    proc = _start_reduce(tmp_path)
    _wait_for(tmp_path / "kids")
    time.sleep(0.3)
    os.killpg(proc.pid, 0)  # still there
    proc.kill()  # SIGKILL Parity only (not its group): no handler runs
    proc.communicate(timeout=30)
    deadline = time.time() + 10
    kids = [int(p) for p in (tmp_path / "kids").read_text().split()]
    while time.time() < deadline and any(_alive(p) for p in kids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in kids)  # the check (PDEATHSIG) and its child (watchdog) are gone


def test_debug_build_does_not_count_unresolved_as_good(tmp_path):
    pytest.importorskip("parity_tactics")
    from parity_tactics.debug_build import debug_build

    (tmp_path / "model.onnx").write_bytes(b"onnx")

    def build(model: str, engine: str, options) -> None:
        Path(engine).write_bytes(b"engine")

    # Polygraphy's guide names polygraphy_debug.engine: it is the iteration's engine. The check then reads a
    # file that is not there: unresolved, neither a good build nor a bad one.
    check = [PY, "-S", "-c", "import sys; open(sys.argv[1], 'rb'); open('golden_missing.json')", "polygraphy_debug.engine"]
    result = debug_build("model.onnx", 2, check, build=build)
    assert result.outcomes == ["unresolved", "unresolved"]
    assert result.good == 0 and result.bad == 0 and result.unresolved == 2
    passing = debug_build("model.onnx", 1, [PY, "-S", "-c", "import sys; open(sys.argv[1], 'rb')", "polygraphy_debug.engine"], build=build)
    assert passing.outcomes == ["good"] and passing.good == 1


def test_an_unresolved_original_leaves_no_state_to_replay(tmp_path):
    """The run ended with an answer (exit 2), not an interruption: once the user fixes the check's input, the
    same command must check again instead of replaying the recorded 'unresolved'."""
    model = tmp_path / "m.onnx"
    onnx.save(helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])]), ir_version=8), str(model))  # fmt: skip
    cmd = ["debug", "reduce", str(model), "-o", "r.onnx", "--no-repro", "--check", PY, "-S", "-c", "import sys; open('needed.txt'); sys.exit(1)"]
    assert main(cmd) == 2
    assert not list(tmp_path.glob("*.state.json"))
    (tmp_path / "needed.txt").write_text("here now")
    assert main(cmd) == 0 and (tmp_path / "r.onnx").exists()
