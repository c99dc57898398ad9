"""TensorRT names used by the recorder/replayer exist in every release they run on (from shared/trt-api)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from parity_tactics import conformance, trt_tactics

MANIFESTS = Path(__file__).resolve().parents[3].parent / "shared" / "trt-api"
TEN = ("10.0.1", "10.7.0", "10.8.0.43", "10.16.1.11")
ELEVEN = ("11.0.0.114", "11.4.0.106")
RELEASES = {
    "algorithm-selector": TEN,  # IAlgorithmSelector: all of 10.x, gone in 11
    "timing-cache": ("10.8.0.43", "10.16.1.11", *ELEVEN),  # editable timing cache: 10.8 on
}

pytestmark = pytest.mark.skipif(not MANIFESTS.is_dir(), reason=f"TensorRT API manifests not found at {MANIFESTS}")


@pytest.fixture(scope="module")
def members():
    return {v: conformance.load_members(MANIFESTS, v) for v in (*TEN, *ELEVEN)}


@pytest.fixture(scope="module")
def uses():
    return conformance.trt_uses(inspect.getsource(trt_tactics), trt_tactics.VAR_TYPES)


def test_every_trt_name_exists_where_its_code_runs(members, uses):
    lines = {fn: RELEASES[line] for fn, line in trt_tactics.LINE_OF.items()}
    assert conformance.check_uses(uses, members, lines, default=(*TEN, *ELEVEN)) == []


def test_the_walk_sees_the_api_it_must_check(uses):
    names = {u.name for u in uses}
    for expected in (
        "ITimingCache.queryKeys", "ITimingCache.query", "ITimingCache.update", "TimingCacheKey.parse", "TimingCacheValue",
        "TimingCacheValue.tacticHash", "BuilderFlag.EDITABLE_TIMING_CACHE", "IBuilderConfig.set_timing_cache",
        "IAlgorithmSelector", "IBuilderConfig.algorithm_selector", "IAlgorithm.get_algorithm_io_info",
        "IAlgorithmVariant.tactic", "IAlgorithmIOInfo.vectorized_dim", "IAlgorithmContext.num_inputs",
    ):
        assert expected in names, expected
    by_fn = {u.function for u in uses if u.name == "TimingCacheKey.parse"}
    assert by_fn == {"_update_cache"}  # 10.8+-only names live only in functions marked for that line


def test_trt_plugin_checker_agrees_with_gates_for_one_line_names(uses):
    """The TensorRT plugin's checker (per-name version gates, argument names) on the same uses."""
    from parity_trt.api import Gate
    from parity_trt.api import conformance as trt_conformance

    gates = {name: Gate(until="11.0") for name in trt_tactics.SELECTOR_NAMES}
    gates.update({name: Gate(since="10.8") for name in trt_tactics.CACHE_NAMES})
    converted = [trt_conformance.Use(u.name, "trt_tactics.py", u.line) for u in uses]
    converted += trt_conformance.collect_source(inspect.getsource(trt_tactics), "trt_tactics.py")  # e.g. selector methods
    converted = [u for u in converted if not u.name.startswith("IExecutionContext.")]  # its 'context' is another class
    manifest = trt_conformance.Manifest.load(MANIFESTS)
    assert trt_conformance.check(converted, manifest, gates) == []


def test_probes_tell_the_lines_apart(members):
    """available_mechanisms() probes names that exist on exactly the releases of each mechanism."""
    for version, names in members.items():
        has_selector = trt_tactics.SELECTOR_PROBE in names
        has_cache = all(p in names for p in trt_tactics.CACHE_PROBES)
        assert has_selector == (version in RELEASES["algorithm-selector"]), version
        assert has_cache == (version in RELEASES["timing-cache"]), version


def test_checker_catches_a_name_missing_on_one_line(members):
    source = "def f(trt, config):\n    config.algorithm_selector = None\n    trt.TimingCacheKey.parse('0x0')\n"
    uses = conformance.trt_uses(source, {"config": "IBuilderConfig"})
    problems = conformance.check_uses(uses, members, {}, default=(*TEN, *ELEVEN))
    assert any("IBuilderConfig.algorithm_selector is not in TensorRT 11.0.0.114" in p for p in problems)
    assert any("TimingCacheKey.parse is not in TensorRT 10.7.0" in p for p in problems)
