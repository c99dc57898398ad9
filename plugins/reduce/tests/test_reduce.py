"""``parity debug reduce`` and ``Reducer``: check counts, minimality, valid candidates, CLI behaviour."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from parity_reduce import Reducer
from parity_reduce.testing import chain, encoder, finish, planted_check

from parity.testing import invoke

PY = sys.executable


def has(*names):
    return lambda model: all(n in {x.name for x in model.graph.node} for n in names)


def runs(model: onnx.ModelProto, feeds=None) -> dict:
    """The candidate is valid ONNX that onnxruntime loads and runs."""
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = feeds or {i.name: np.random.rand(*[d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in sess.get_inputs()}
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


@pytest.mark.parametrize(
    ("model", "fault", "budget"),
    [(chain(800), ["n417"], 18), (encoder(), ["softmax_67"], 40), (chain(800), ["n100", "n700"], 60), (encoder(), ["softmax_17", "erf_136"], 60)],
    ids=["chain-single", "encoder-single", "chain-pair", "encoder-pair"],
)
def test_default_mode_finds_the_exact_culprits_within_budget(model, fault, budget):
    result = Reducer(model, has(*fault)).run()
    assert sorted(result.nodes) == sorted(fault)  # 1-minimal: just the culprit node(s)
    assert result.checks <= budget
    runs(result.model)


@pytest.mark.parametrize("mode", ["dichotomic", "quickxplain", "ddmin", "bisect"])
def test_every_mode_returns_a_failing_model(mode):
    model = encoder(layers=1)
    result = Reducer(model, has("softmax_17", "erf_36"), mode=mode).run()
    assert has("softmax_17", "erf_36")(result.model)
    assert len(result.nodes) < len(model.graph.node)


def test_polygraphy_bisect_keeps_connected_ancestors_and_linear_agrees():
    model = chain(60)
    bisect = Reducer(model, has("n30"), mode="bisect").run()
    linear = Reducer(model, has("n30"), mode="linear").run()
    assert bisect.nodes == linear.nodes == ["n30"]
    assert linear.checks > bisect.checks


def test_full_model_that_passes_is_an_error():
    from parity_reduce.reducer import NotFailing

    with pytest.raises(NotFailing):
        Reducer(chain(10), lambda m: False).run()


def branchy() -> onnx.ModelProto:
    """Two outputs, a branch that joins, a Constant node and an omitted optional input ('')."""
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=numpy_helper.from_array(np.array(2.0, np.float32))),
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Mul", ["a", "c"], ["b1"], name="left"),
        helper.make_node("Sigmoid", ["a"], ["b2"], name="right"),
        helper.make_node("Add", ["b1", "b2"], ["j"], name="join"),
        helper.make_node("Clip", ["j", "", "cmax"], ["y1"], name="clip"),  # min omitted
        helper.make_node("Tanh", ["b2"], ["y2"], name="tanh"),
    ]
    inits = [numpy_helper.from_array(np.array(3.0, np.float32), "cmax")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    outs = [helper.make_tensor_value_info("y1", TensorProto.FLOAT, None), helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)]
    return finish(nodes, [x], outs, inits)


def test_branches_constants_optional_inputs_and_dynamic_shapes():
    result = Reducer(branchy(), has("clip", "right"), input_shapes={"x": [2, 4]}).run()
    assert sorted(result.nodes) == ["clip", "right"]
    assert "const" not in [n.name for n in result.model.graph.node]  # Constant nodes became initializers
    clip = next(n for n in result.model.graph.node if n.name == "clip")
    assert list(clip.input)[1] == ""  # the omitted optional input is kept omitted
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in result.model.graph.input}
    assert shapes["j"] == [2, 4]  # cut tensors get the frozen (reference) shape
    outputs = runs(result.model)
    assert set(outputs) == {"y1", "b2"}


def test_cut_tensors_as_constants_reproduce_data_dependent_faults():
    # The fault shows only with the values the full model computes: y1 saturates at the Clip max.
    model = branchy()
    feeds = [{"x": np.full((2, 4), 5.0, np.float32)}]

    def saturated(candidate):
        if "clip" not in {n.name for n in candidate.graph.node}:
            return False
        sess = ort.InferenceSession(candidate.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        rng = np.random.default_rng(0)
        out = sess.run(["y1"], {n: np.full((2, 4), 5.0, np.float32) if n == "x" else rng.random((2, 4), np.float32) for n in names})[0]
        return bool((out == 3.0).all())

    result = Reducer(model, saturated, inputs=feeds, cut="constant", input_shapes={"x": [2, 4]}).run()
    assert result.nodes == ["clip"]  # its input is frozen to the reference value (join = 10 + ~1)
    assert not result.model.graph.input
    # As graph inputs fed random data, the cut tensor no longer saturates: more of the graph is needed.
    as_inputs = Reducer(model, saturated, inputs=feeds, cut="input", input_shapes={"x": [2, 4]}).run()
    assert len(as_inputs.nodes) > 1 and "clip" in as_inputs.nodes


def test_multi_sample_reference_keeps_per_sample_values():
    feeds = [{"x": np.full((1, 8), v, np.float32)} for v in (1.0, 2.0, 3.0)]
    result = Reducer(chain(12), has("n6"), inputs=feeds).run()
    inputs = result.inputs()
    assert len(inputs) == 3 and list(inputs[0]) == ["t5"]
    assert not np.array_equal(inputs[0]["t5"], inputs[2]["t5"])
    expected = result.expected()
    assert len(expected) == 3
    got = runs(result.model, inputs[1])
    np.testing.assert_allclose(got["t6"], expected[1]["t6"], rtol=1e-6)


# --- the command line ----------------------------------------------------------------------------------

def test_fast_check_agrees_with_the_onnx_check(files):
    (files / "slow_check.py").write_text(planted_check())
    for names in (["n5"], ["n5", "n59"], ["n60"], ["n5", "x"]):
        fast = subprocess.run([PY, "-S", "check.py", "chain.onnx", *names]).returncode
        assert fast == subprocess.run([PY, "slow_check.py", "chain.onnx", *names]).returncode


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cli_reduce_writes_output_min_good_and_repro_bundle(files):
    before = digest(files / "chain.onnx")
    code, _, err = invoke("debug", "reduce", "chain.onnx", "-o", "red.onnx", "--min-good", "good.onnx", "--check", PY, "check.py", "parity_debug.onnx", "n20", "n40")
    assert code == 0, err
    assert digest(files / "chain.onnx") == before  # the input is never modified
    assert sorted(n.name for n in onnx.load("red.onnx").graph.node) == ["n20", "n40"]
    assert len(onnx.load("good.onnx").graph.node) >= 1
    bundle = files / "red_repro"
    assert {p.name for p in bundle.iterdir()} >= {"model.onnx", "inputs.npz", "expected.npz", "check.sh", "check.py", "README.md"}
    assert subprocess.run(["sh", str(bundle / "check.sh")]).returncode == 1  # the failure reproduces from the bundle alone
    rerun = invoke("run", bundle / "model.onnx", "--onnxrt", "--load-inputs", bundle / "inputs.npz", "--load-outputs", bundle / "expected.npz")
    assert rerun.exit_code == 0, rerun.stderr
    assert not (files / "parity_debug.onnx").exists() and not (files / "parity_debug.onnx.state.json").exists()


def test_cli_in_process_parity_run_check_with_iteration_inputs(files, monkeypatch):
    # Neg then Sqrt make NaN: with the reference values fed through parity_debug_inputs.npz, Sqrt alone
    # reproduces it (its input is negative in the full model), so the result is one node.
    model = chain(30)
    model.graph.node[10].op_type, model.graph.node[11].op_type = "Neg", "Sqrt"
    for k in (10, 11):
        del model.graph.node[k].input[1:]
    onnx.save(model, "nan.onnx")
    import parity.debug.check as check_mod

    def no_subprocess(*a, **k):
        raise AssertionError("parity run checks must run in-process")

    monkeypatch.setattr(check_mod.subprocess, "Popen", no_subprocess)
    code, _, err = invoke(
        "debug",
        "reduce",
        "nan.onnx",
        "-o",
        "red.onnx",
        "--no-repro",
        "--iterations",
        "2",
        "--check",
        "parity",
        "run",
        "parity_debug.onnx",
        "--onnxrt",
        "--validate",
        "--load-inputs",
        "parity_debug_inputs.npz",
    )
    assert code == 0, err
    assert [n.name for n in onnx.load("red.onnx").graph.node] == ["n11"]


def test_cli_jobs_give_the_same_result_as_serial(files):
    args = ["debug", "reduce", "chain.onnx", "--no-repro", "--mode", "ddmin", "--check", PY, "-S", "check.py", "parity_debug.onnx", "n7", "n50"]
    assert invoke(*args[:3], "-o", "serial.onnx", *args[3:]).exit_code == 0
    assert invoke(*args[:3], "-o", "par.onnx", "--jobs", "2", *args[3:]).exit_code == 0
    assert [n.name for n in onnx.load("par.onnx").graph.node] == [n.name for n in onnx.load("serial.onnx").graph.node] == ["n7", "n50"]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["debug", "reduce", "missing.onnx", "-o", "r.onnx", "--check", "true"], 2),
        (["debug", "reduce", "chain.onnx", "-o", "chain.onnx", "--check", "true"], 2),
        (["debug", "reduce", "chain.onnx", "-o", "r.onnx", "--mode", "nope", "--check", "true"], 2),
        (["debug", "reduce", "chain.onnx", "-o", "r.onnx", "--no-reduce-inputs", "--no-reduce-outputs", "--check", "false"], 2),
        (["debug", "reduce", "chain.onnx", "-o", "r.onnx", "--model-input-shapes", "z:[1,8]", "--check", "false"], 2),
        (["debug", "reduce", "chain.onnx", "-o", "r.onnx", "--check", "true"], 2),  # never fails: nothing to reduce
    ],
)
def test_cli_bad_input_is_one_line(files, args, code):
    result = invoke(*args)
    err = result.stderr
    assert result.exit_code == code, err
    assert "Traceback" not in err and "error:" in err


def test_interrupted_run_resumes_where_it_stopped(files):
    # A slow check that counts its runs; kill the reduction mid-way, then run the same command again.
    (files / "slow.py").write_text("import sys, time\nopen('count', 'a').write('x')\ntime.sleep(0.2)\n" + (files / "check.py").read_text())
    cmd = ["parity", "debug", "reduce", "chain.onnx", "-o", "red.onnx", "--no-repro", "--mode", "dichotomic"]
    cmd += ["--check", PY, "-S", "slow.py", "parity_debug.onnx", "n13", "n44"]
    proc = subprocess.Popen(cmd, cwd=files, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    state = files / "parity_debug.onnx.state.json"
    deadline = time.time() + 60
    while time.time() < deadline:
        if state.exists() and len(json.loads(state.read_text() or "{}").get("verdicts", {})) >= 5:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # as hard as a crash or reboot
    proc.wait()
    if (files / "red.onnx").exists():  # the best failing model so far, written atomically as found: valid and no bigger
        onnx.checker.check_model(str(files / "red.onnx"), full_check=True)
        assert len(onnx.load(str(files / "red.onnx")).graph.node) <= 60
    recorded = len(json.loads(state.read_text())["verdicts"])
    first = len((files / "count").read_text())
    assert invoke(*cmd[1:]).exit_code == 0
    assert not list(files.glob(".*.part"))  # a part the kill left between link and rename is removed by the next write
    total = len((files / "count").read_text())
    assert sorted(n.name for n in onnx.load(str(files / "red.onnx")).graph.node) == ["n13", "n44"]
    # An uninterrupted run needs `fresh` checks; the resumed one ran only what was missing (plus the killed check).
    fresh = Reducer(chain(60), has("n13", "n44")).run().checks
    assert total - first <= fresh - recorded + 1
    assert recorded >= 5


GREEDY_PLUGIN = """
from parity import hookimpl
from parity.registry import StrategySpec


class Greedy:
    name = "greedy"

    def minimize(self, items, oracle):
        current = list(items)
        for i in list(current):
            trial = [x for x in current if x != i]
            if oracle(trial):
                current = trial
        return current


@hookimpl
def parity_register_debug_strategies(register):
    register(StrategySpec("greedy", lambda options: Greedy(), "remove one node at a time"))
"""


def test_third_party_strategy_through_the_hook(files):
    (files / "greedy.py").write_text(GREEDY_PLUGIN)
    onnx.save(chain(12), "small.onnx")
    code, _, err = invoke(
        "--plugin",
        "greedy.py",
        "debug",
        "reduce",
        "small.onnx",
        "-o",
        "g.onnx",
        "--no-repro",
        "--mode",
        "greedy",
        "--check",
        PY,
        "-S",
        "check.py",
        "parity_debug.onnx",
        "n3",
        "n9",
    )
    assert code == 0, err
    assert [n.name for n in onnx.load("g.onnx").graph.node] == ["n3", "n9"]


def test_parallel_dichotomic_search_finds_the_same_culprits():
    from parity.debug import DebugSession, PredicateCheck, ThreadExecutor

    serial = Reducer(chain(200), has("n20", "n150")).run()
    session = DebugSession(PredicateCheck(lambda it: has("n20", "n150")(it.payload)), executor=ThreadExecutor(3))
    parallel = Reducer(chain(200), session=session).run()
    assert parallel.nodes == serial.nodes == ["n20", "n150"]


def dynamic_chain() -> onnx.ModelProto:
    """x[n,4] -> Relu -> Neg -> Relu -> y[n,4]: ONNX shape inference keeps the symbolic dim n."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Neg", ["a"], ["b"], name="neg"), helper.make_node("Relu", ["b"], ["y"], name="r2")]
    graph = helper.make_graph(
        nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])]
    )
    return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])


def test_shape_inference_flags_take_effect(files):
    """Polygraphy's --no-shape-inference (types from the reference run only) and --force-fallback-shape-inference
    (shapes frozen to what an onnxruntime run saw)."""
    model = dynamic_chain()
    assert Reducer(model, has("neg")).model.graph.value_info  # default: ONNX shape inference fills value_info
    assert not Reducer(model, has("neg"), shape_inference="none").model.graph.value_info
    onnx.save(model, "dyn.onnx")
    dims = {}
    for name, flags in (("default", []), ("fallback", ["--force-fallback-shape-inference"]), ("none", ["--no-shape-inference"])):
        result = invoke("debug", "reduce", "dyn.onnx", "-o", f"{name}.onnx", "--no-repro", "--no-reduce-outputs", *flags, "--check", "false")
        assert result.exit_code == 0, result.stderr
        reduced = onnx.load(f"{name}.onnx")
        onnx.checker.check_model(reduced, full_check=True)
        dims[name] = [d.dim_value or d.dim_param for d in reduced.graph.output[0].type.tensor_type.shape.dim]
    assert dims["default"] == dims["none"] == ["n", 4]
    assert all(isinstance(d, int) for d in dims["fallback"])  # frozen to the run's shape
    both = invoke("debug", "reduce", "dyn.onnx", "-o", "r.onnx", "--no-shape-inference", "--force-fallback-shape-inference", "--check", "false")
    assert both.exit_code == 2 and "exclude each other" in both.stderr and "Traceback" not in both.stderr


def test_float64_inputs_are_cast_for_the_reference_run():
    """Saved inputs are often float64 (Polygraphy's JSON from Python floats): as parity run does, the reference run
    casts them to the model's float type (it failed before: no reference, cut tensors without values)."""
    model = dynamic_chain()
    warnings = []
    feeds = [{"x": np.array([[-1.0, 2.0, -3.0, 4.0]], dtype=np.float64)}]
    reducer = Reducer(model, has("neg"), inputs=feeds, warn=warnings.append)
    assert reducer.reference is not None and not any("reference run" in w for w in warnings)
    assert any("'x' float64 -> float32" in w for w in warnings)
    assert reducer.reference.values("b")[0].dtype == np.float32 and reducer.reference.values("b")[0].tolist() == [[-0.0, -2.0, -0.0, -4.0]]
