"""One answer whatever the parallelism (issue 26, part 2): ``debug reduce``, ``debug precision`` and ``debug repeat
--until`` give the same result and use the same checks, in the same order, with ``--jobs 1, 2, 4``. ``--jobs``
only runs checks ahead (speculation); the serial search's choice wins even when a later candidate ends first.

The planted check fails on an odd number of the named nodes: not monotone, so a search that lets ``--jobs`` pick
its probes (as the (jobs+1)-ary search did) lands on another minimal model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest
from parity_reduce.testing import chain

from parity.testing import invoke

PY = sys.executable  # stdlib-only check scripts run as PY -S: skipping site (its .pth files) saves 20-45 ms a start

# exit 1 (the failure) iff an odd number of the nodes named in argv[2:] are in the model argv[1]; sleeps a little,
# later nodes longer, so that with --jobs the checks end in another order than they started
ODD = """import sys, time
data = open(sys.argv[1], 'rb').read()
has = [b'\\x1a' + bytes([len(n)]) + n.encode() in data for n in sys.argv[2:]]
time.sleep(0.01 * data.count(b'\\x1a\\x02n') % 0.05)
sys.exit(1 if sum(has) % 2 else 0)
"""


def used(path: str) -> dict:
    """What the search found and the checks it used, in order (run numbers and times aside)."""
    data = json.loads(Path(path).read_text())
    checks = [(c["key"], c["verdict"], c["label"], c["size"], c["original"]) for c in data["checks"]]
    counts = {k: data["counts"][k] for k in ("checks", "bad", "good", "unresolved")}
    return {"result": {k: v for k, v in data["result"].items() if k not in ("min_good", "repro")}, "checks": checks, "counts": counts, "exit": data["exit_code"]}


@pytest.fixture()
def odd(tmp_path):
    onnx.save(chain(40), str(tmp_path / "chain.onnx"))
    (tmp_path / "odd.py").write_text(ODD)
    return tmp_path


@pytest.mark.parametrize("mode", ["dichotomic", "staged", "ddmin", "bisect", "linear"])
def test_reduce_gives_one_answer_for_every_jobs(odd, mode):
    runs = {}
    for jobs in (1, 2, 4):
        args = ["debug", "reduce", "chain.onnx", "-o", f"r{jobs}.onnx", "--no-repro", "--mode", mode, "--report", f"r{jobs}.json", "--jobs", str(jobs)]
        res = invoke(*args, "--check", PY, "-S", "odd.py", "parity_debug.onnx", "n7", "n13", "n29")
        assert res.exit_code == 0, res.stdout + res.stderr
        runs[jobs] = used(f"r{jobs}.json")
        runs[jobs]["nodes"] = [n.name for n in onnx.load(f"r{jobs}.onnx").graph.node]
    assert runs[1] == runs[2] == runs[4]
    assert runs[1]["checks"][0][4] and runs[1]["counts"]["checks"] == len(runs[1]["checks"])


def test_max_checks_stops_where_the_serial_search_does(odd):
    runs = {}
    for jobs in (1, 4):
        args = ["debug", "reduce", "chain.onnx", "-o", f"r{jobs}.onnx", "--no-repro", "--mode", "dichotomic", "--max-checks", "5", "--report", f"r{jobs}.json"]
        res = invoke(*args, "--jobs", str(jobs), "--check", PY, "-S", "odd.py", "parity_debug.onnx", "n7", "n13", "n29")
        assert res.exit_code == 0, res.stdout + res.stderr
        runs[jobs] = used(f"r{jobs}.json")
    assert runs[1] == runs[4] and len(runs[1]["checks"]) == 5 and runs[1]["result"]["stopped"]


def test_the_report_lists_checks_run_ahead_apart(odd):
    args = ["debug", "reduce", "chain.onnx", "-o", "r.onnx", "--no-repro", "--mode", "dichotomic", "--report", "r.json", "--jobs", "4"]
    res = invoke(*args, "--check", PY, "-S", "odd.py", "parity_debug.onnx", "n7", "n13", "n29")
    assert res.exit_code == 0, res.stdout + res.stderr
    data = json.loads(Path("r.json").read_text())
    ahead = data["speculative"]
    assert ahead and data["counts"]["speculative"] == len(ahead)
    assert not {c["key"] for c in ahead} & {c["key"] for c in data["checks"]}
    assert f"+{len(ahead)} run ahead in parallel, unused" in res.stderr + res.stdout


def test_precision_gives_one_answer_for_every_jobs(tmp_path):
    from parity_reduce.testing import fp16_sensitive

    onnx.save(fp16_sensitive(), "m.onnx")
    # passes (exit 0) iff an odd number of the named nodes stay fp32 (are not fed by a Cast to float16)
    Path("odd_fp32.py").write_text(
        "import sys, onnx\nm = onnx.load(sys.argv[1])\nlow = {o for n in m.graph.node if n.op_type == 'Cast' and n.attribute[0].i == 10 for o in n.output}\n"
        "fp32 = [n.name for n in m.graph.node if n.name in sys.argv[2:] and not set(n.input) & low]\nsys.exit(0 if len(fp32) % 2 else 1)\n"
    )
    runs = {}
    for jobs in (1, 2, 4):
        res = invoke(
            "debug",
            "precision",
            "m.onnx",
            "-o",
            f"p{jobs}.onnx",
            "--report",
            f"p{jobs}.json",
            "--jobs",
            str(jobs),
            "--check",
            PY,
            "odd_fp32.py",
            "parity_debug.onnx",
            "shift_a",
            "unshift_b",
            "shift_b",
        )
        assert res.exit_code == 0, res.stdout + res.stderr
        runs[jobs] = used(f"p{jobs}.json")
    assert runs[1] == runs[2] == runs[4]


@pytest.mark.parametrize("until", ["bad", "good", "5"])
def test_repeat_until_uses_the_serial_iterations(tmp_path, until):
    Path("flaky.py").write_text("import os, sys\ni = int(os.environ['PARITY_DEBUG_ITERATION'])\nsys.exit(1 if i in (2, 3) else 0)\n")
    runs = {}
    for jobs in (1, 3):
        res = invoke("debug", "repeat", "--until", until, "--report", f"u{jobs}.json", "--jobs", str(jobs), "--check", PY, "-S", "flaky.py")
        data = json.loads(Path(f"u{jobs}.json").read_text())
        runs[jobs] = (res.exit_code, data["result"], [(c["key"], c["verdict"]) for c in data["checks"]], data["counts"]["checks"])
    assert runs[1] == runs[3]
