"""Polygraphy 0.53.6's flags on ``parity debug reduce`` / ``precision``: ``--minimal-good``, ``--model-inputs``,
``--check-inference``, ``--ignore-fail-returncode``, several ``--fail-regex``, the debug replays, and
``--mode bisect`` on a branchy model shaped as Polygraphy's own ``reducable`` test model. Each asserts the
flag's effect on the model written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from parity_reduce.testing import finish

from parity.testing import invoke

PY = sys.executable
WIRE = Path(__file__).resolve().parents[3] / "tests" / "corpus"  # onnx_wire.py: node names without onnx, under python -S

# exit 1 iff every node named after the model is in it; otherwise exit argv's "--else CODE" (default 0). It prints
# "REALLY BAD" while node 'a' is present and "FOUND A BAD NODE" once it is gone (two texts of one failure), and
# leaves ran_<iteration> so a test can count the checks that ran.
CHECK = f"""import os, sys
sys.path.insert(0, {str(WIRE)!r})
from onnx_wire import NODE_NAME, node_strings
args = sys.argv[1:]
other = 0
if "--else" in args:
    other = int(args[args.index("--else") + 1])
    args = args[: args.index("--else")]
open("ran_" + os.environ.get("PARITY_DEBUG_ITERATION", "x"), "w").close()
names = set(node_strings(open(args[0], "rb").read(), NODE_NAME))
if all(n in names for n in args[1:]):
    print("REALLY BAD" if "a" in names else "FOUND A BAD NODE")
    sys.exit(1)
sys.exit(other)
"""


def reducable() -> onnx.ModelProto:
    """Polygraphy's test model's shape: two inputs through Identity each, joined by an Add, which feeds two
    Identity outputs (here a, b, join, d, e)."""
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Identity", ["X0"], ["ta"], name="a"),
        helper.make_node("Identity", ["Y0"], ["tb"], name="b"),
        helper.make_node("Add", ["ta", "tb"], ["tj"], name="join"),
        helper.make_node("Identity", ["tj"], ["out_d"], name="d"),
        helper.make_node("Identity", ["tj"], ["out_e"], name="e"),
    ]
    ins = [vi("X0", TensorProto.FLOAT, [1]), vi("Y0", TensorProto.FLOAT, [1])]
    return finish(nodes, ins, [vi("out_d", TensorProto.FLOAT, [1]), vi("out_e", TensorProto.FLOAT, [1])], [], "reducable")


@pytest.fixture()
def model(tmp_path) -> Path:
    onnx.save(reducable(), str(tmp_path / "reducable.onnx"))
    (tmp_path / "check.py").write_text(CHECK)
    return tmp_path / "reducable.onnx"


def nodes(path: str | Path) -> list[str]:
    return [n.name for n in onnx.load(str(path)).graph.node]


def reduce(*args: str):
    return invoke("debug", "reduce", "reducable.onnx", "--no-repro", *args)


@pytest.mark.parametrize("fail_node", ["a", "b", "join", "d", "e"])
def test_bisect_isolates_the_failing_node(model, fail_node):
    # Polygraphy's bisect leaves 3 nodes when 'a' fails and 2 when 'd' does (its test allows that); Parity's
    # isolates the failing node alone in every case.
    code, out, err = reduce("-o", "red.onnx", "--mode", "bisect", "--check", PY, "-S", "check.py", "polygraphy_debug.onnx", fail_node)
    assert code == 0, err
    assert nodes("red.onnx") == [fail_node]
    onnx.checker.check_model(onnx.load("red.onnx"), full_check=True)
    ort.InferenceSession("red.onnx")


def test_minimal_good_is_min_good(model):
    code, _, err = reduce("-o", "red.onnx", "--minimal-good", "good.onnx", "--mode", "linear", "--check", PY, "-S", "check.py", "parity_debug.onnx", "join")
    assert code == 0, err
    assert nodes("red.onnx") == ["join"]
    good = nodes("good.onnx")
    assert good and "join" not in good  # a passing model, close to the result


def test_model_inputs_freezes_input_shapes(tmp_path):
    vi = helper.make_tensor_value_info
    dyn = finish([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", TensorProto.FLOAT, ["N", 3])], [vi("y", TensorProto.FLOAT, ["N", 3])], [])
    onnx.save(dyn, str(tmp_path / "dyn.onnx"))
    code, _, err = invoke("debug", "reduce", "dyn.onnx", "-o", "red.onnx", "--no-repro", "--model-inputs", "x:[2,3]", "--check", "false")
    assert code == 0, err
    shape = [d.dim_value for d in onnx.load("red.onnx").graph.input[0].type.tensor_type.shape.dim]
    assert shape == [2, 3]


def test_check_inference_and_ignore_fail_returncode(model):
    # every passing candidate exits 2: without --ignore-fail-returncode 2 those are unresolved, and the original's
    # failure (exit 1) is still told apart; with it they are good and the search isolates the node
    code, out, err = reduce(
        "-o", "red.onnx", "--ignore-fail-returncode", "2", "--check-inference", PY, "-S", "check.py", "parity_debug.onnx", "join", "--else", "2"
    )  # fmt: skip
    assert code == 0, err
    assert nodes("red.onnx") == ["join"]
    assert "unresolved: 0" in out


def test_several_fail_regex_any_is_the_failure(model):
    # the failure prints "REALLY BAD" while node a is present, "FOUND A BAD NODE" once it is gone; exit 0 always
    check = ["--check", PY, "-S", "check.py", "parity_debug.onnx", "join", "--else", "0"]
    code, out, err = reduce("-o", "one.onnx", "--mode", "linear", "--fail-regex", "REALLY BAD", "--fail-code", "1", *check)
    assert code == 0, err
    assert "a" in nodes("one.onnx")  # one regex: a candidate without 'a' fails differently (unresolved)
    code, out, err = reduce("-o", "two.onnx", "--mode", "linear", "--fail-regex", "REALLY BAD", "BAD NODE", "--fail-code", "1", *check)
    assert code == 0, err
    assert nodes("two.onnx") == ["join"]  # several: either text is the failure, as in Polygraphy


def test_reduce_replay_skips_every_check(model, tmp_path):
    check = ["--check", PY, "-S", "check.py", "parity_debug.onnx", "join"]
    code, _, err = reduce("-o", "first.onnx", "--save-debug-replay", "replay.json", *check)
    assert code == 0, err
    ran = list(tmp_path.glob("ran_*"))
    assert ran and json.loads((tmp_path / "replay.json").read_text())["command"] == "reduce"
    for p in ran:
        p.unlink()
    code, out, err = reduce("-o", "second.onnx", "--load-debug-replay", "replay.json", *check)
    assert code == 0, err
    assert not list(tmp_path.glob("ran_*"))  # no check ran: every verdict came from the replay
    assert "from the debug replay" in out
    assert (tmp_path / "first.onnx").read_bytes() == (tmp_path / "second.onnx").read_bytes()


def test_replay_of_another_model_or_polygraphys_search_is_refused(model, tmp_path):
    check = ["--check", PY, "-S", "check.py", "parity_debug.onnx", "join"]
    assert reduce("-o", "first.onnx", "--save-debug-replay", "replay.json", *check).exit_code == 0
    other = reducable()
    other.graph.node[0].name = "a2"
    onnx.save(other, str(tmp_path / "other.onnx"))
    code, _, err = invoke("debug", "reduce", "other.onnx", "-o", "o.onnx", "--no-repro", "--load-debug-replay", "replay.json", *check)
    assert code == 2 and "saved for another model" in err and not (tmp_path / "o.onnx").exists()
    # Polygraphy's reduce replay records its own bisection steps: refused, naming what loads
    poly = {"_N0_outputs": {"state": {"num_nodes": 3}, "iteration_info": {"iteration": 0}, "success": False, "polygraphy_class": "IterationContext"}}
    (tmp_path / "polygraphy_debug_replay.json").write_text(json.dumps(poly))
    code, _, err = reduce("-o", "p.onnx", "--load-debug-replay", "polygraphy_debug_replay.json", *check)
    assert code == 2 and "a Polygraphy replay of its own search steps" in err and len(err.strip().splitlines()) == 1


# passes iff node add3 computes in float32 in the candidate (its output is float); leaves ran_<iteration>
PRECISION_CHECK = """import os, sys
import onnx
open("ran_" + os.environ.get("PARITY_DEBUG_ITERATION", "x"), "w").close()
m = onnx.shape_inference.infer_shapes(onnx.load(sys.argv[1]))
types = {v.name: v.type.tensor_type.elem_type for v in [*m.graph.value_info, *m.graph.output]}
out = next(n.output[0] for n in m.graph.node if n.name == "add3")
sys.exit(0 if types.get(out) == onnx.TensorProto.FLOAT else 1)
"""


def test_precision_replay_and_check_inference(tmp_path, monkeypatch):
    from parity_reduce.testing import fp16_sensitive

    monkeypatch.chdir(tmp_path)
    onnx.save(fp16_sensitive(), "model.onnx")
    (tmp_path / "pcheck.py").write_text(PRECISION_CHECK)
    check = ["--check-inference", PY, "pcheck.py", "parity_debug.onnx"]
    code, out, err = invoke("debug", "precision", "model.onnx", "-o", "a.onnx", "--save-nodes", "a.json", "--save-debug-replay", "r.json", *check)
    assert code == 0, err
    assert json.loads((tmp_path / "a.json").read_text())["fp32_nodes"] == ["add3"]
    for p in tmp_path.glob("ran_*"):
        p.unlink()
    code, out, err = invoke("debug", "precision", "model.onnx", "-o", "b.onnx", "--save-nodes", "b.json", "--load-debug-replay", "r.json", *check)
    assert code == 0, err
    assert not list(tmp_path.glob("ran_*")) and "from the debug replay" in out
    assert json.loads((tmp_path / "b.json").read_text())["fp32_nodes"] == ["add3"]


def test_precision_without_output_prints_the_nodes(tmp_path, monkeypatch):
    # Polygraphy's debug precision writes no model: -o is optional, the answer is printed (and --save-nodes)
    from parity_reduce.testing import fp16_sensitive

    monkeypatch.chdir(tmp_path)
    onnx.save(fp16_sensitive(), "model.onnx")
    (tmp_path / "pcheck.py").write_text(PRECISION_CHECK)
    code, out, err = invoke("debug", "precision", "model.onnx", "--save-nodes", "n.json", "--check", PY, "pcheck.py", "parity_debug.onnx")
    assert code == 0, err
    assert "node(s) must stay fp32: add3\n" in out
    assert json.loads((tmp_path / "n.json").read_text())["fp32_nodes"] == ["add3"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".onnx") == ["model.onnx"]  # no model written
    code, _, err = invoke("debug", "precision", "model.onnx", "--save-external-data", "--check", "true")
    assert code == 2 and "--save-external-data applies to the model -o writes" in err


def test_min_good_without_output(model, tmp_path):
    # Polygraphy's reduce takes --output and/or --min-good: with --min-good alone only the passing model is written
    code, out, err = reduce("--min-good", "good.onnx", "--mode", "linear", "--check", PY, "-S", "check.py", "parity_debug.onnx", "join")
    assert code == 0, err
    assert "Minimum bad model: 1 of 5 nodes (not written: no -o)" in out
    good = onnx.load("good.onnx")
    onnx.checker.check_model(good, full_check=True)
    assert "join" not in nodes("good.onnx")
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == ["good.onnx", "reducable.onnx"]
    code, _, err = reduce("--check", "true")
    assert code == 2 and "give -o PATH" in err and len(err.strip().splitlines()) == 1


def test_replay_path_is_not_another_output(model, tmp_path):
    code, _, err = reduce("-o", "red.onnx", "--save-debug-replay", "red.onnx", "--check", PY, "-S", "check.py", "parity_debug.onnx", "join")
    assert code == 2 and "are the same file" in err and not (tmp_path / "red.onnx").exists()
    code, _, err = reduce("-o", "red.onnx", "--save-debug-replay", "reducable.onnx", "--check", PY, "-S", "check.py", "parity_debug.onnx", "join")
    assert code == 2 and (tmp_path / "reducable.onnx").read_bytes() == reducable().SerializeToString()


def test_fail_code_codes_then_the_model(model):
    # --fail-code takes one or more codes, as Polygraphy's; the model after them is not read as a code
    check = ["--check", PY, "-S", "check.py", "parity_debug.onnx", "join", "--else", "2"]
    code, out, err = invoke("debug", "reduce", "--fail-code", "1", "3", "reducable.onnx", "-o", "red.onnx", "--no-repro", *check)
    assert code == 0, err
    assert nodes("red.onnx") == ["join"]  # exit 2 of passing candidates: not a --fail-code, so not bad (unresolved)
