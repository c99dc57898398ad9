"""Comparison semantics: tolerances, error statistics, NaN/Inf, chunked statistics, top-k."""

from __future__ import annotations

import math

import numpy as np
import pytest

from parity.compare import stats
from parity.compare.indices import IndicesCompare
from parity.compare.simple import SimpleCompare


def test_element_passes_if_either_tolerance_holds():
    ref = np.array([100.0, 0.001], np.float32)
    out = np.array([100.5, 0.0015], np.float32)
    # element 0: abs 0.5 > atol but rel 0.005 <= rtol; element 1: abs 0.0005 <= atol
    assert SimpleCompare(atol=0.001, rtol=0.01)("y", out, ref).passed
    check = SimpleCompare(atol=0.001, rtol=0.001)("y", out, ref)
    assert not check.passed and check.values["mismatches"] == 1


def test_smallest_passing_tolerances_are_exact():
    ref = np.array([1.0, 2.0, 4.0], np.float32)
    out = np.array([1.1, 2.0, 3.9], np.float32)
    values = SimpleCompare()("y", out, ref).values
    assert values["min_atol"] == pytest.approx(0.1, rel=1e-5)
    assert values["min_rtol"] == pytest.approx(0.1, rel=1e-5)  # 0.1 / 1.0 is the largest relative error
    assert SimpleCompare(atol=values["min_atol"], rtol=0)("y", out, ref).passed


def test_nan_is_a_mismatch_unless_both_nan_and_allowed():
    ref = np.array([1.0, np.nan], np.float32)
    out = np.array([1.0, np.nan], np.float32)
    check = SimpleCompare()("y", out, ref)
    assert not check.passed and check.values["nan_actual"] == 1 and check.values["nan_reference"] == 1
    assert SimpleCompare(nans_equal=True)("y", out, ref).passed
    assert not SimpleCompare(nans_equal=True)("y", np.array([np.nan, 1.0], np.float32), np.array([1.0, np.nan], np.float32)).passed


def test_infinities():
    ref = np.array([np.inf, -np.inf, 1.0], np.float32)
    assert not SimpleCompare()("y", ref.copy(), ref).passed
    assert SimpleCompare(infinities_equal=True)("y", ref.copy(), ref).passed
    assert not SimpleCompare(infinities_equal=True)("y", np.array([np.inf, np.inf, 1.0], np.float32), ref).passed


def test_statistic_checks():
    ref = np.zeros(100, np.float32)
    out = np.zeros(100, np.float32)
    out[0] = 1.0  # one outlier: max fails, median passes
    assert not SimpleCompare(atol=0.5, rtol=0, check_error_stat="max")("y", out, ref).passed
    assert SimpleCompare(atol=0.5, rtol=0, check_error_stat="median")("y", out, ref).passed
    assert SimpleCompare(atol=0.5, rtol=0, check_error_stat="mean")("y", out, ref).passed
    assert not SimpleCompare(atol=0.5, rtol=0, check_error_stat="quantile", error_quantile=0.995)("y", out, ref).passed


def test_shape_mismatch_fails_cleanly():
    check = SimpleCompare()("y", np.zeros((2, 3)), np.zeros((3, 2)))
    assert not check.passed and "shape" in check.message


def test_fp16_and_int_outputs_are_upcast():
    ref = np.array([1, 2, 3], np.int8)
    out = np.array([1, 2, -3], np.int8)
    assert SimpleCompare(atol=6.5)("y", out, ref).values["max_abs"] == 6.0
    half = np.array([60000, 1], np.float16)
    assert SimpleCompare()("y", half, half).passed


def test_chunked_summary_matches_numpy(monkeypatch):
    monkeypatch.setattr(stats, "CHUNK", 1000)
    data = np.random.default_rng(3).standard_normal(12345).astype(np.float32)
    data[17] = np.nan
    s = stats.summarize(data, np.empty(data.size, np.float32))
    finite = data[np.isfinite(data)].astype(np.float64)
    assert s.nan == 1 and s.finite == finite.size
    assert s.mean == pytest.approx(finite.mean()) and s.std == pytest.approx(finite.std())
    assert s.max == finite.max() and data[s.argmax] == finite.max()
    assert s.median == pytest.approx(np.median(finite))
    assert s.percentiles["99"] == pytest.approx(np.percentile(finite, 99))


def test_cosine_similarity():
    a = np.array([1.0, 0.0])
    assert stats.cosine_similarity(a, a) == pytest.approx(1.0)
    assert stats.cosine_similarity(a, np.array([0.0, 1.0])) == pytest.approx(0.0)
    assert stats.cosine_similarity(np.zeros(2), np.zeros(2)) == 1.0
    assert math.isnan(stats.cosine_similarity(np.array([np.nan]), np.array([1.0])))


def test_decade_histogram_counts_everything():
    values = np.array([0, 1e-9, 5e-6, 0.3, 7, 2e4, np.nan])
    hist = dict(stats.decade_histogram(values))
    assert sum(hist.values()) == values.size
    assert hist["0"] == 1 and hist["NaN/Inf"] == 1 and hist["[1e-06,1e-05)"] == 1


def test_indices_top_k():
    ref = np.array([[0.1, 0.7, 0.2], [0.5, 0.3, 0.2]])
    swapped = np.array([[0.1, 0.2, 0.7], [0.5, 0.3, 0.2]])
    assert IndicesCompare(k=1)("p", ref, ref).passed
    check = IndicesCompare(k=1)("p", swapped, ref)
    assert not check.passed and check.values["agreement"] == 0.5
    assert IndicesCompare(k=1, index_tolerance=1)("p", swapped, ref).passed
