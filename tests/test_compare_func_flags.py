"""``parity run``'s Polygraphy comparison flags that act on every metric: ``--postprocess`` (top-K before comparing),
``--postprocess-func-script``, ``--no-shape-check`` and ``--compare-func-script``; onnxruntime's outputs of a model
built here against golden outputs the test writes."""

from __future__ import annotations

import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from parity import IterationResult, RunResults, save_inputs, save_results
from parity.compare.prepare import match_shape, parse_postprocess, top_k_indices
from parity.errors import UsageError
from parity.testing import invoke

SHAPE = (2, 6)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """y = 3x and z = x + 1 over rows of six scores; inputs saved; the exact outputs kept for goldens."""
    tmp = tmp_path_factory.mktemp("compare_flags")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("y", "z")]
    inits = [helper.make_tensor("three", TensorProto.FLOAT, [], [3.0]), helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    nodes = [helper.make_node("Mul", ["x", "three"], ["y"]), helper.make_node("Add", ["x", "one"], ["z"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], outs, inits), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, tmp / "m.onnx")
    feed = {"x": np.array([[0.1, 0.9, 0.5, 0.3, 0.7, 0.2], [0.6, 0.1, 0.8, 0.4, 0.0, 0.3]], dtype=np.float32)}
    save_inputs([feed], tmp / "in.npz")
    exact = {"y": 3 * feed["x"], "z": feed["x"] + 1}
    return {"tmp": tmp, "model": str(tmp / "m.onnx"), "inputs": str(tmp / "in.npz"), "exact": exact}


def golden(case, name: str, **outputs: np.ndarray) -> str:
    path = case["tmp"] / f"{name}.npz"
    values = {**case["exact"], **outputs}
    save_results(RunResults([("golden", [IterationResult(values, runner_name="golden")])]), path)
    return str(path)


def run(case, gold: str, *args: str):
    return invoke("run", case["model"], "--onnxrt", "--load-inputs", case["inputs"], "--load-outputs", gold, *args)


def text(result) -> str:
    return result.stdout + result.stderr


def test_top_k_indices_match_numpy():
    a = np.array([[0.1, 0.9, 0.5, 0.9], [3.0, 1.0, 2.0, 0.0]], dtype=np.float32)
    assert top_k_indices(a, 2).tolist() == [[1, 3], [0, 2]]  # ties: the lower index first
    assert top_k_indices(a, 10).tolist() == np.argsort(-a, axis=-1, kind="stable").tolist()  # K clamped to the axis
    assert top_k_indices(a, 1, axis=0).tolist() == [[1, 1, 1, 0]]
    assert parse_postprocess(["top-5", "probs:top-3,axis=1"]) == {"": (5, -1), "probs": (3, 1)}
    for bad in ("top5", "bottom-2", "top-0", "top-2,axes=1"):
        with pytest.raises(UsageError, match="--postprocess"):
            parse_postprocess([bad])


def test_postprocess_compares_top_k_classes(case):
    """Scores scaled by 1.5 keep every row's order: simple fails on the values, passes on the top-3 indices; a
    golden whose best class differs fails even then."""
    scaled = golden(case, "scaled", y=case["exact"]["y"] * 1.5)
    assert run(case, scaled).exit_code == 1
    result = run(case, scaled, "--postprocess", "top-3")
    assert result.exit_code == 0, text(result)
    swapped = case["exact"]["y"].copy()
    swapped[0, [1, 4]] = swapped[0, [4, 1]]  # row 0's best and third-best classes trade places
    assert run(case, golden(case, "swapped", y=swapped), "--postprocess", "top-1").exit_code == 1
    assert run(case, golden(case, "swapped2", y=swapped), "--postprocess-func", "top-1,axis=1").exit_code == 1


def test_postprocess_per_output(case):
    """y:top-2 changes y only: z (off by 0.5) is still compared on its values and fails."""
    gold = golden(case, "both", y=case["exact"]["y"] * 1.5, z=case["exact"]["z"] + 0.5)
    result = run(case, gold, "--postprocess", "y:top-2")
    assert result.exit_code == 1
    assert "z" in text(result) and "mismatched outputs: z " in text(result)
    assert run(case, gold, "--postprocess", "y:top-2", "z:top-2").exit_code == 0


def test_postprocess_func_script(case, tmp_path):
    script = tmp_path / "post.py"
    script.write_text(textwrap.dedent("""
        import numpy as np

        def postprocess_outputs(iter_result):
            for name, out in iter_result.items():
                iter_result[name] = np.argmax(out, axis=-1)
            return iter_result

        def broken(iter_result):
            raise RuntimeError("no")
    """))
    scaled = golden(case, "scaled_s", y=case["exact"]["y"] * 1.5, z=case["exact"]["z"] * 1.5)
    result = run(case, scaled, "--postprocess-func-script", str(script))
    assert result.exit_code == 0, text(result)
    refused = run(case, scaled, "--postprocess-func-script", f"{script}:broken")
    assert refused.exit_code == 2 and "raised RuntimeError: no" in text(refused) and "Traceback" not in text(refused)
    both = run(case, scaled, "--postprocess-func-script", str(script), "--postprocess", "top-1")
    assert both.exit_code == 2 and "--postprocess" in text(both)


def test_no_shape_check(case):
    flat = golden(case, "flat", y=case["exact"]["y"].reshape(12))
    strict = run(case, flat)
    assert strict.exit_code == 1 and "shape" in text(strict)
    result = run(case, flat, "--no-shape-check")
    assert result.exit_code == 0, text(result)
    assert run(case, golden(case, "flat_off", y=case["exact"]["y"].reshape(12) + 1), "--no-shape-check").exit_code == 1
    a = np.zeros((2, 3, 4))
    assert match_shape(np.zeros((24,)), (2, 3, 4)).shape == (2, 3, 4)
    assert match_shape(np.zeros((5,)), a.shape).shape == (5,)  # nothing matches: left as it is (the metric says so)


def test_compare_func_script(case, tmp_path):
    script = tmp_path / "cmp.py"
    script.write_text(textwrap.dedent("""
        import numpy as np

        class Verdict:
            def __init__(self, diff):
                self.diff = diff
            def __bool__(self):
                return self.diff < 0.05
            def metric_values(self):
                return {"max_diff": self.diff}

        def compare_outputs(run0, run1):
            return {name: Verdict(float(np.max(np.abs(out - run1[name])))) for name, out in run0.items()}

        def nothing(run0, run1):
            return {}
    """))
    near = golden(case, "near", y=case["exact"]["y"] + 0.01)
    far = golden(case, "far", y=case["exact"]["y"] + 0.1)
    report = tmp_path / "r.json"
    result = run(case, near, "--compare-func-script", str(script), "--report", str(report))
    assert result.exit_code == 0, text(result)
    assert "max_diff" in report.read_text()
    assert run(case, far, "--compare-func-script", str(script)).exit_code == 1
    assert run(case, near, "--compare-func-script", f"{script}:nothing").exit_code == 1  # no verdict is no pass
    for args, words in (
        (("--atol", "1"), "--atol"),
        (("--compare-func", "simple"), "--compare-func"),
    ):
        refused = run(case, near, "--compare-func-script", str(script), *args)
        assert refused.exit_code == 2 and words in text(refused), text(refused)
    missing = run(case, near, "--compare-func-script", f"{script}:nope")
    assert missing.exit_code == 2 and "no function 'nope'" in text(missing)


def test_refused_when_nothing_is_compared(case):
    result = invoke("run", case["model"], "--onnxrt", "--load-inputs", case["inputs"], "--postprocess", "top-1")
    assert result.exit_code == 2 and "compares nothing" in text(result)


def test_indices_after_postprocess_compares_all_k(case):
    """--postprocess top-3 --compare-func indices checks the three classes of each row, not only the first (as
    Polygraphy's indices comparison of top-K outputs does); --top-k still chooses."""
    changed = case["exact"]["y"].copy()
    changed[0, 2] = 0.0  # row 0's third-best class (0.5) drops to last: the best two stay
    gold = golden(case, "third", y=changed)
    failed = run(case, gold, "--postprocess", "top-3", "--compare-func", "indices")
    assert failed.exit_code == 1 and "top-3" in text(failed)
    assert run(case, gold, "--postprocess", "top-3", "--compare-func", "indices", "--top-k", "2").exit_code == 0


def test_failing_indices_run_is_a_mismatch_not_a_crash(case):
    """A failing indices check has details of its own (rows, agreeing rows); before, the printer read them as the
    simple metric's and the run ended in "KeyError: 'shape'", exit 3."""
    swapped = case["exact"]["y"].copy()
    swapped[0, [1, 4]] = swapped[0, [4, 1]]
    result = run(case, golden(case, "swapped_idx", y=swapped), "--compare-func", "indices")
    assert result.exit_code == 1, text(result)
    assert "rows 2 agreeing_rows 1" in text(result)
