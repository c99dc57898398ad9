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
