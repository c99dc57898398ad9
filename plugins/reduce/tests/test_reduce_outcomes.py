"""Good, bad and unresolved in ``debug reduce`` / ``debug precision``, through the real CLI.

Rule: report only what was observed. A candidate whose check crashed, timed out, could not find its
input or failed differently from the original is unresolved, never bad; the original must fail first.
"""

from __future__ import annotations

import json
import subprocess
import sys

import onnx
from parity_reduce.testing import fp16_sensitive

from parity.testing import invoke

PY = sys.executable

def test_check_that_cannot_find_its_file_stops_before_searching(files):
    # Before: every candidate was "bad" (exit 2 from a missing file) and reduce announced
    # "Minimum bad model: 1 of 60 nodes" with exit 0.
    code, out, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--check", PY, "-S", "check.py", "no_such.onnx", "n20")
    assert code == 2
    assert "Minimum bad model" not in out
    assert not [ln for ln in err.splitlines() if "Traceback" in ln and not ln.startswith("    |")]  # only the check's own
    assert "cannot find its input" in err and "no_such.onnx" in err
    assert not (files / "red.onnx").exists()


def test_original_that_passes_is_exit_2(files):
    code, _, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--check", PY, "-S", "check.py", "parity_debug.onnx", "not_a_node")
    assert code == 2
    assert "does not fail the check" in err


def test_a_different_failure_is_unresolved_not_bad(files):
    # The original fails with exit 1 (n20 and n40 present). Candidates without n5 crash with exit 7:
    # not the original failure, so no reduction step is taken on them; the result keeps n5.
    (files / "crashy.py").write_text(
        "import sys\ndata = open(sys.argv[1], 'rb').read()\n"
        "has = lambda n: b'\\x1a' + bytes([len(n)]) + n.encode() in data\n"
        "if not has('n5'):\n    sys.exit(7)\n"
        "sys.exit(1 if has('n20') and has('n40') else 0)\n"
    )
    code, out, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--no-repro", "--check", PY, "-S", "crashy.py", "parity_debug.onnx")
    assert code == 0, err
    assert sorted(n.name for n in onnx.load("red.onnx").graph.node) == ["n20", "n40", "n5"]
    assert "unresolved: " in out and "unresolved: 0" not in out  # the summary counts them
    assert "not the original exit code 1" in err


def test_dominating_unresolved_checks_stop_with_exit_3(files):
    # The original fails with exit 1; every candidate missing one of five spread nodes is killed by a signal.
    (files / "segv.py").write_text(
        "import os, signal, sys\ndata = open(sys.argv[1], 'rb').read()\n"
        "if not all(b'\\x1a' + bytes([len(n)]) + n.encode() in data for n in ('n0', 'n15', 'n30', 'n45', 'n59')):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "sys.exit(1)\n"
    )
    code, out, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--no-repro", "--mode", "ddmin", "--check", PY, "-S", "segv.py", "parity_debug.onnx")
    assert code == 3
    assert "checks were unresolved" in err and "killed by signal 9" in err and "Traceback" not in err
    assert "Minimum bad model" not in out  # no result is announced
    state = json.loads((files / "parity_debug.onnx.state.json").read_text())
    assert "unresolved" in state["verdicts"].values()  # recorded for resume
    assert state["reference"] == ["exit", 1, None]


def test_fail_regex_signature_is_the_matched_text(files):
    # With --fail-regex the matched text is the signature: "error: B" is not the original "error: A".
    (files / "rx.py").write_text(
        "import sys\ndata = open(sys.argv[1], 'rb').read()\n"
        "has = lambda n: b'\\x1a' + bytes([len(n)]) + n.encode() in data\n"
        "print('error: A' if has('n30') else 'error: B' if has('n10') else 'fine')\n"
        "sys.exit(1 if has('n30') or has('n10') else 0)\n"
    )
    args = ["debug", "reduce", "chain.onnx", "-o", "red.onnx", "--no-repro", "--fail-regex", "error: [AB]"]
    code, _, err = invoke(*args, "--check", PY, "-S", "rx.py", "parity_debug.onnx")
    assert code == 0, err
    assert [n.name for n in onnx.load("red.onnx").graph.node] == ["n30"]


def test_polygraphy_guide_check_names_get_the_artifact(files):
    # Polygraphy's guides name polygraphy_debug.onnx in their checks; as written, with `parity` substituted.
    code, out, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--check", PY, "check.py", "polygraphy_debug.onnx", "n20", "n40")
    assert code == 0, err
    assert sorted(n.name for n in onnx.load("red.onnx").graph.node) == ["n20", "n40"]
    assert not (files / "polygraphy_debug.onnx").exists()
    assert "Repro bundle: red_repro" in out
    assert subprocess.run(["sh", "red_repro/check.sh"]).returncode == 1


def test_bundle_that_does_not_reproduce_is_not_announced(files):
    # The check reads a file it gets through the environment, which the bundle does not carry: the bundle's
    # check.sh then fails differently (exit 2: file missing), so it is not announced as a repro.
    (files / "envcheck.py").write_text(
        "import os, sys\nnames = open(os.environ['NAMES']).read().split()\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "sys.exit(1 if all(b'\\x1a' + bytes([len(n)]) + n.encode() in data for n in names) else 0)\n"
    )
    (files / "names.txt").write_text("n20 n40")
    import os

    os.environ["NAMES"] = str(files / "names.txt")
    try:
        code, out, _ = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--check", PY, "envcheck.py", "parity_debug.onnx")
        assert code == 0
        assert "Repro bundle: red_repro" in out  # reproduces: the variable is inherited
        os.environ["NAMES"] = "names.txt"  # relative: found in the working directory, not in the bundle
        code, out, err = invoke("debug", "reduce", "chain.onnx", "-o", "red2.onnx", "--check", PY, "envcheck.py", "parity_debug.onnx")
    finally:
        del os.environ["NAMES"]
    assert code == 0
    assert "Repro bundle:" not in out
    assert "does not reproduce" in err and "red2_repro" in err


def test_precision_unresolved_original_is_exit_2(tmp_path):
    onnx.save(fp16_sensitive(), "model.onnx")
    code, _, err = invoke("debug", "precision", "model.onnx", "-o", "mixed.onnx", "--check", "parity", "run", "missing_model.onnx", "--onnxrt")
    assert code == 2 and "cannot find its input" in err and "Traceback" not in err
    assert not (tmp_path / "mixed.onnx").exists()
