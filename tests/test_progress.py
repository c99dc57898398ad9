"""Progress a person can read (issue 14): on a terminal, `parity run --iterations N`, layerwise runs and the
debug loops draw a live bar with counts and the time left; piped, with NO_COLOR, -q or --silent, nothing extra.

The CLI runs in a fresh process whose stderr (and stdout, where it matters) is a pseudo-terminal, as a person's
shell would give it."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import core_models
import pytest

from parity.cli.progress import LiveProgress, progress_wanted
from parity.console import SETTINGS

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PYTHON_SLEEP = [sys.executable, "-S", "-c", "import time; time.sleep(0.2)"]  # a check: stdlib only, -S skips site


def on_terminal(*args: str, env: dict[str, str] | None = None, stdout_tty: bool = True, cwd: Path | None = None) -> tuple[int, str, str]:
    """``parity ARGS`` with stderr (and stdout unless ``stdout_tty`` is False) on a pseudo-terminal:
    (exit code, what the terminal showed with escape codes removed, stdout when piped)."""
    master, slave = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")} | {"TERM": "xterm", "COLUMNS": "160"} | (env or {})
    proc = subprocess.Popen(
        ["parity", *args], stdout=slave if stdout_tty else subprocess.PIPE, stderr=slave, env=full_env, cwd=cwd
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    piped = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=120)
    return code, ANSI.sub("", shown.decode("utf-8", "replace")).replace("\r", "\n"), piped


def bars(screen: str) -> list[str]:
    return [line for line in screen.splitlines() if " elapsed, " in line]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "env", "quiet", "wanted"),
    [
        (FakeTerminal(), {}, False, True),
        (io.StringIO(), {}, False, False),  # piped
        (FakeTerminal(), {"NO_COLOR": "1"}, False, False),
        (FakeTerminal(), {"NO_COLOR": ""}, False, False),  # set, even empty, as no-color.org asks
        (FakeTerminal(), {"TERM": "dumb"}, False, False),
        (FakeTerminal(), {}, True, False),  # -q / --silent
    ],
    ids=["terminal", "piped", "NO_COLOR", "NO_COLOR-empty", "TERM-dumb", "quiet"],
)
def test_progress_is_wanted_only_by_a_person_at_a_terminal(monkeypatch, stream, env, quiet, wanted):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setitem(SETTINGS, "quiet", quiet)
    assert progress_wanted(stream) is wanted


def test_a_disabled_display_prints_nothing_and_never_imports_rich():
    code = (
        "import sys\nfrom parity.cli.progress import LiveProgress\n"
        "bar = LiveProgress(enabled=False)\nbar.update('iterations', 1, 3)\nbar.close()\n"
        "print('rich' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False" and proc.stderr == ""


def test_the_display_shows_counts_and_the_time_left():
    screen = FakeTerminal()
    bar = LiveProgress(enabled=True, console_file=screen)
    for done in range(4):
        bar.update("iterations", done, 3, status="onnxrt")
    bar.print("a line above the bar")
    bar.close()
    text = ANSI.sub("", screen.getvalue())
    assert "3/3" in text and " left" in text and "a line above the bar" in text


def test_run_iterations_show_a_bar_with_counts_then_the_verdict(tiny_cnn):
    code, screen, _ = on_terminal("run", str(tiny_cnn), "--onnxrt", "--iterations", "12", "--input-shapes", "x:[1,3,16,16]")
    assert code == 0
    shown = bars(screen)
    assert shown and any("12/12" in line for line in shown), screen[-800:]
    assert all(line.startswith("iterations") for line in shown)
    # the summary lines are intact, not cut by the bar
    assert re.search(r"^onnxrt-0: 12 iteration\(s\), median inference", screen, re.M), screen[-800:]
    assert re.search(r"^PASSED \| 12 iteration\(s\)", screen, re.M)


def test_run_lines_land_above_the_bar_when_stdout_is_the_terminal(tiny_cnn):
    code, screen, _ = on_terminal("run", str(tiny_cnn), "--onnxrt", "--onnx-ref", "--iterations", "3", "--input-shapes", "x:[1,3,16,16]")
    assert code == 0
    for index in range(3):
        assert re.search(rf"^\[onnxrt-0 vs onnx-ref-1\] iteration {index}: PASSED$", screen, re.M), screen[-1500:]


def test_a_layerwise_run_counts_the_outputs_it_compares(tmp_path):
    model = core_models.chain(tmp_path / "chain.onnx", length=30)
    code, screen, _ = on_terminal("run", str(model), "--onnxrt", "--onnx-ref", "--onnx-outputs", "mark", "all")
    assert code == 0, screen[-1500:]
    assert any(line.startswith("outputs") and "31/31" in line for line in bars(screen)), screen[-1500:]


@pytest.mark.parametrize(
    ("env", "flags"),
    [({}, ()), ({"NO_COLOR": "1"}, ()), ({}, ("--silent",)), ({}, ("-q",))],
    ids=["piped", "NO_COLOR", "silent", "quiet"],
)
def test_nothing_extra_when_piped_no_color_or_silent(tiny_cnn, env, flags):
    args = ["run", str(tiny_cnn), "--onnxrt", "--iterations", "5", "--input-shapes", "x:[1,3,16,16]", *flags]
    if not env and not flags:  # piped: stderr is a pipe too
        proc = subprocess.run(["parity", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0
        assert "\x1b[" not in proc.stderr + proc.stdout and "elapsed" not in proc.stderr
        return
    code, screen, _ = on_terminal(*args, env=env)
    assert code == 0
    assert not bars(screen), screen[-800:]


def test_debug_repeat_shows_checks_done_of_until(tmp_path):
    code, screen, _ = on_terminal("debug", "repeat", "--until", "3", "--check", *PYTHON_SLEEP, cwd=tmp_path)
    assert code == 0
    assert any(line.startswith("repeat checks") and "3/3" in line for line in bars(screen)), screen[-1500:]
    # every check keeps its line above the bar
    for index in range(3):
        assert f"parity: [N{index}] good" in screen


def test_debug_repeat_piped_prints_its_lines_only(tmp_path):
    proc = subprocess.run(["parity", "debug", "repeat", "--until", "2", "--check", *PYTHON_SLEEP], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0
    assert "\x1b[" not in proc.stderr and "elapsed" not in proc.stderr
    assert [line.split(" | ")[0] for line in proc.stderr.splitlines() if line.startswith("parity: [N")] == ["parity: [N0] good", "parity: [N1] good"]


def test_a_binary_search_tells_how_many_checks_remain(tmp_path):
    """debug reduce --mode bisect: the bar's total comes from the search's steps (log2 of the candidates)."""
    model = core_models.chain(tmp_path / "chain.onnx", length=16)
    fails_with_add7 = "import sys, onnx; sys.exit(any(n.name == 'add7' for n in onnx.load('parity_debug.onnx').graph.node))"
    check = [sys.executable, "-c", fails_with_add7]
    code, screen, _ = on_terminal("debug", "reduce", str(model), "-o", str(tmp_path / "min.onnx"), "--mode", "bisect", "--check", *check, cwd=tmp_path)
    assert code == 0, screen[-2000:]
    totals = [int(m.group(2)) for line in bars(screen) for m in [re.search(r"(\d+)/(\d+)", line)] if m]
    assert totals and max(totals) >= 3, screen[-2000:]
