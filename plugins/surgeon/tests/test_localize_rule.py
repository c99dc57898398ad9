"""``debug localize``'s "within tolerance" line states the per-element rule it judged by (issue 26, part 6): a node
whose max abs error exceeds atol can pass, since an element passes within atol *or* within rtol of the
reference, and the line must say so rather than read as a contradiction."""

from __future__ import annotations


def test_within_tolerance_states_the_per_element_rule(planted, mlp_model):
    from parity_surgeon import localize

    from parity.api import get_registry, make_compare_funcs

    funcs = make_compare_funcs({"atol": ("1e-9",), "rtol": ("0.5",)}, get_registry())
    result = localize(str(planted), ["onnxrt"], reference_model=str(mlp_model), isolate="all", stop_at_first=False, compare_func=funcs)
    lines = [line for line in result.lines() if "only PROPAGATES" in line]
    assert lines, result.lines()
    for line in lines:
        assert "within tolerance (max abs" in line
        assert "an element passes if |actual-ref| <= atol 1e-09 or |actual-ref| <= rtol 0.5 x |ref|" in line, line


def test_a_budget_above_the_baseline_is_not_called_below_it(tmp_path):
    """A budget above the model's baseline that leaves too little for its largest tensor on both sides makes the
    search compare one tensor at a time; the line said the budget was below the baseline ("2.00 GiB is below this
    model's baseline (1.73 GiB)" on VGG-19) and now says what it leaves and what the largest tensor takes."""
    import re

    import onnx
    from onnx import TensorProto, helper

    from parity.testing import invoke

    big = [1, 2_000_000]  # 7.6 MiB a tensor
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, big) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "big", io[:1], io[1:]), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(tmp_path / "big.onnx"))

    def line(budget: str) -> str:
        code, out, err = invoke("debug", "localize", str(tmp_path / "big.onnx"), "--onnxrt", "--onnxrt", "--memory-budget", budget)
        assert code == 0, out + err
        return next(text for text in (out + err).splitlines() if "comparing one tensor at a time" in text)

    below = line("1")
    assert "memory budget 0.0 MiB is below this model's baseline (" in below, below
    baseline = float(re.search(r"baseline \(([\d.]+) MiB\)", below).group(1))
    above = line(f"{baseline + 4:.1f}M")
    left = re.search(r"leaves ([\d.]+) MiB above this model's baseline", above)
    assert "is below" not in above and left and abs(float(left.group(1)) - 4) <= 0.1, above  # the baseline printed to 0.1 MiB
    assert "its largest tensor takes 15.3 MiB" in above and "(--memory-budget)" in above, above
