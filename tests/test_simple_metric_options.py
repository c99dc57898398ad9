"""The simple metric owns its options (issue 27): they are declared on its ComparatorSpec and parsed by its factory,
as a third party's metric does; the CLI builds them from the spec and the compare engine takes the registry it
resolves metric names in from its caller."""

from __future__ import annotations

import numpy as np
import pytest

from parity.compare.simple import SimpleCompare

FLAGS = ["--atol", "--rtol", "--tolerance-preset", "--check-error-stat", "--error-quantile", "--infinities-compare-equal", "--nans-compare-equal"]


def test_the_spec_declares_the_options_and_owns_them():
    from parity.plugins import get_registry
    from parity.registry import OWNER_ATTR

    registry = get_registry()
    options = registry.comparator("simple").options
    assert [o.opts[0] for o in options] == FLAGS
    assert {getattr(o, OWNER_ATTR) for o in options} == {(("metric", "simple"),)}
    assert {"--abs-tol", "--rel-tol"} <= {flag for o in options for flag in o.opts}  # Polygraphy's spellings


def test_per_output_names_come_from_the_specs():
    from parity.compare.names import OutputNames, per_output_params
    from parity.plugins import get_registry

    found = per_output_params(get_registry())
    assert {"atol": "--atol", "rtol": "--rtol", "check_error_stat": "--check-error-stat"}.items() <= found.items()
    assert "tolerance_preset" not in found and "error_quantile" not in found
    names = OutputNames.from_options({"atol": ("1e-5", "lgits:1e-3"), "check_error_stat": ("y:max",)}, get_registry())
    assert names.given == {"--atol": ["lgits"], "--check-error-stat": ["y"]}


def test_compare_options_lists_simple_first():
    from parity.cli.options import compare_options
    from parity.plugins import get_registry

    flags = [p.opts[0] for p in compare_options(get_registry())]
    assert flags[: len(FLAGS) + 1] == ["--compare-func", *FLAGS]
    assert flags.count("--atol") == 1


def test_one_parse_for_the_cli_and_python():
    """The CLI's strings and Python's values configure the same metric."""
    cli = SimpleCompare.from_options({"atol": ("1e-5", "y:1e-3"), "rtol": ("0",), "check_error_stat": ("max",), "tolerance_preset": "fp16"})
    py = SimpleCompare.from_options({"atol": {"": 1e-5, "y": 1e-3}, "rtol": 0.0, "check_error_stat": "max", "tolerance_preset": "fp16"})
    for metric in (cli, py):
        assert metric.atol.values == {"": 1e-5, "y": 1e-3} and metric.rtol.for_output("z") == 0.0
        assert metric.check_error_stat.for_output("z") == "max" and metric.error_quantile == 0.99
    assert SimpleCompare.from_options({"rtol": ()}).rtol.for_output("z") == 1e-5  # nothing given: the default
    assert SimpleCompare.from_options({"error_quantile": 0.0}).error_quantile == 0.0  # 0 is a quantile, not "unset"
    assert SimpleCompare.from_options({"atol": np.float32(0.5)}).atol.for_output("z") == 0.5


def test_compare_func_simple_builds_through_the_same_parse():
    from parity import CompareFunc
    from parity.errors import UsageError

    metric = CompareFunc.simple(atol={"y": 1e-3, "": 0.0}, check_error_stat="median", error_quantile=0.5, nans_compare_equal=True)
    assert metric.atol.values == {"": 0.0, "y": 1e-3} and metric.check_error_stat.for_output("y") == "median"
    assert metric.error_quantile == 0.5 and metric.nans_equal and not metric.infinities_equal
    with pytest.raises(UsageError, match="--atol: cannot read"):
        SimpleCompare.from_options({"atol": ("y:abc",)})


def test_the_engine_resolves_names_in_the_callers_registry(monkeypatch):
    from parity.compare import comparator
    from parity.registry import ComparatorSpec, Registry
    from parity.results.model import IterationResult, RunResults

    def refuse():
        raise AssertionError("the engine fetched the global registry")

    monkeypatch.setattr(comparator, "get_registry", refuse)
    registry = Registry()
    registry.add("comparators", ComparatorSpec("loose", lambda options: SimpleCompare.from_options({"atol": options.get("atol", 1.0)})), "test")
    funcs = comparator.resolve_compare_funcs(["loose", ("loose", {"atol": 0.0})], registry)
    assert [f.atol.for_output("y") for f in funcs] == [1.0, 0.0]
    results = RunResults([("a", [IterationResult({"y": np.zeros(3)})]), ("b", [IterationResult({"y": np.full(3, 0.5)})])])
    assert comparator.Comparator.compare_accuracy(results, compare_func="loose", registry=registry)
    assert not comparator.Comparator.compare_accuracy(results, compare_func=("loose", {"atol": 0.0}), registry=registry)
