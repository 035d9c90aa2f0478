"""Drift statistics on binned data: each agrees with scipy (or a direct
computation) to 1e-9 on the same counts, and the properties that make them
distances hold on any counts (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from scipy.special import rel_entr
from scipy.stats import chi2_contingency, ks_2samp, wasserstein_distance

from agent.core.drift import PSI_EPSILON, chi2_p, chi2_test, js, ks, psi, statistic, wasserstein
from tests.core.test_properties import FAST

TOL = 1e-9


@st.composite
def pairs(draw, min_bins: int = 1, max_bins: int = 12, max_count: int = 500):
    """Two count vectors over the same bins, each with a positive total, and increasing centres."""
    k = draw(st.integers(min_bins, max_bins))
    counts = st.lists(st.integers(0, max_count), min_size=k, max_size=k).filter(lambda c: sum(c) > 0)
    steps = draw(st.lists(st.floats(0.01, 100.0), min_size=k, max_size=k))
    start = draw(st.floats(-1000.0, 1000.0))
    return np.array(draw(counts)), np.array(draw(counts)), start + np.cumsum(steps)


CASES = [
    ([10, 20, 30, 40], [40, 30, 20, 10]),
    ([5, 0, 7, 100, 3], [1, 9, 0, 80, 0]),
    ([1000, 1], [999, 3]),
    ([0, 0, 12, 0], [3, 0, 9, 1]),
    ([250, 250, 250, 250, 0, 0], [0, 0, 0, 0, 10, 990]),
]  # fmt: skip


# --------------------------------------------------------------------------- against scipy, exact


@pytest.mark.parametrize(("p", "q"), CASES)
def test_wasserstein_matches_scipy_with_weights_on_the_centres(p, q):
    centres = np.array([0.1, 0.35, 0.4, 2.0, 7.5, 40.0])[: len(p)]
    assert wasserstein(p, q, centres) == pytest.approx(wasserstein_distance(centres, centres, p, q), abs=TOL)


@pytest.mark.parametrize(("p", "q"), CASES)
def test_js_matches_scipy_in_base_2_and_base_e(p, q):
    assert js(p, q) == pytest.approx(jensenshannon(p, q, base=2), abs=TOL)
    assert js(p, q, base=np.e) == pytest.approx(jensenshannon(p, q), abs=TOL)


@pytest.mark.parametrize(("p", "q"), CASES)
def test_ks_is_the_two_sample_ks_of_samples_placed_in_their_bins(p, q):
    centres = np.arange(len(p), dtype=float)
    direct = ks_2samp(np.repeat(centres, p), np.repeat(centres, q)).statistic
    assert ks(p, q) == pytest.approx(direct, abs=TOL)
    cdf = lambda c: np.cumsum(c) / np.sum(c)  # noqa: E731
    assert ks(p, q) == pytest.approx(np.max(np.abs(cdf(p) - cdf(q))), abs=TOL)


@pytest.mark.parametrize(("p", "q"), CASES)
def test_chi2_matches_chi2_contingency_without_yates_on_nonempty_columns(p, q):
    table = np.array([p, q])
    table = table[:, table.sum(axis=0) > 0]
    expected = chi2_contingency(table, correction=False)
    stat, pvalue, dof = chi2_test(p, q)
    assert (stat, dof) == (pytest.approx(expected.statistic, abs=TOL), expected.dof)
    assert pvalue == pytest.approx(expected.pvalue, abs=TOL)
    assert chi2_p(p, q) == pvalue


def test_two_categories_get_no_yates_correction_either():
    p, q = [30, 10], [20, 20]
    assert chi2_p(p, q) == pytest.approx(chi2_contingency([p, q], correction=False).pvalue, abs=TOL)
    assert chi2_p(p, q) < chi2_contingency([p, q], correction=True).pvalue  # Yates would be more lenient


def test_one_nonempty_column_leaves_nothing_to_test():
    assert chi2_test([0, 5, 0], [0, 9, 0]) == (0.0, 1.0, 0)


@pytest.mark.parametrize(("p", "q"), CASES)
def test_psi_is_the_symmetric_kl_of_floored_shares(p, q):
    a = np.maximum(np.array(p) / np.sum(p), PSI_EPSILON)
    b = np.maximum(np.array(q) / np.sum(q), PSI_EPSILON)
    assert psi(p, q) == pytest.approx(np.sum(rel_entr(a, b) + rel_entr(b, a)), abs=TOL)


def test_psi_by_hand():
    # shares (0.5, 0.5) vs (0.25, 0.75): 0.25 ln 2 + 0.25 ln 1.5
    assert psi([2, 2], [1, 3]) == pytest.approx(0.25 * np.log(2) + 0.25 * np.log(1.5), abs=1e-12)
    # an empty bin counts as a share of 1e-4, unrenormalized: shares (0.5, 0.5) vs (1, 1e-4)
    expected = 0.5 * np.log(1 / 0.5) + (0.5 - 1e-4) * np.log(0.5 / 1e-4)
    assert psi([1, 1], [1, 0]) == pytest.approx(expected, abs=1e-12)


def test_rows_are_computed_independently():
    p = np.array([[10, 20, 30], [5, 5, 5], [0, 1, 9]])
    q = np.array([[30, 20, 10], [1, 2, 3], [9, 1, 0]])
    centres = [1.0, 2.0, 4.0]
    for name in ("psi", "js", "ks", "wasserstein", "chi2_p"):
        rows = statistic(name, p, q, centres)
        assert np.allclose(rows, [statistic(name, a, b, centres) for a, b in zip(p, q)], rtol=0, atol=1e-12)
    assert np.allclose(psi(p[0], q), [psi(p[0], row) for row in q])  # a baseline row broadcasts


def test_refuses_empty_or_negative_counts_and_unknown_names():
    for bad in (([0, 0], [1, 1]), ([1, 1], [0, 0]), ([1, -1], [1, 1]), ([], [])):
        with pytest.raises(ValueError):
            psi(*bad)
    with pytest.raises(ValueError):
        wasserstein([1, 1], [1, 1], [2.0, 1.0])
    with pytest.raises(ValueError):
        statistic("kl", [1], [1])


# --------------------------------------------------------------------------- properties


@FAST
@given(pairs())
def test_psi_is_nonnegative_symmetric_and_zero_on_identical_inputs(pq):
    p, q, _ = pq
    assert psi(p, q) >= 0
    assert psi(p, q) == pytest.approx(psi(q, p), abs=1e-12)
    assert psi(p, p) == 0.0


@FAST
@given(pairs())
def test_js_lies_in_the_unit_interval_in_base_2(pq):
    p, q, _ = pq
    assert 0.0 <= js(p, q) <= 1.0
    assert js(p, q) == pytest.approx(js(q, p), abs=1e-12)
    assert js(p, p) == pytest.approx(0.0, abs=1e-7)
    assert js(p, q) == pytest.approx(jensenshannon(p, q, base=2), abs=TOL)


@FAST
@given(pairs())
def test_ks_and_wasserstein_are_symmetric_and_bounded(pq):
    p, q, centres = pq
    assert 0.0 <= ks(p, q) <= 1.0 and ks(p, q) == ks(q, p) and ks(p, p) == 0.0
    w = wasserstein(p, q, centres)
    assert 0.0 <= w <= centres[-1] - centres[0] + 1e-9
    assert w == pytest.approx(wasserstein(q, p, centres), abs=1e-9)
    assert w == pytest.approx(wasserstein_distance(centres, centres, p, q), abs=1e-9 * max(1.0, w))


@FAST
@given(pairs(min_bins=2), st.integers(2, 50))
def test_shape_statistics_ignore_the_scale_of_counts(pq, factor):
    p, q, centres = pq
    for name in ("psi", "js", "ks", "wasserstein"):
        a = statistic(name, p, q, centres)
        assert statistic(name, p * factor, q, centres) == pytest.approx(a, rel=1e-9, abs=1e-12)
        assert statistic(name, p, q * factor, centres) == pytest.approx(a, rel=1e-9, abs=1e-12)


@FAST
@given(pairs())
def test_chi2_p_is_a_probability_symmetric_and_one_on_identical_inputs(pq):
    p, q, _ = pq
    assert 0.0 <= chi2_p(p, q) <= 1.0
    assert chi2_p(p, q) == pytest.approx(chi2_p(q, p), abs=1e-12)
    assert chi2_p(p, p) == pytest.approx(1.0)
    table = np.array([p, q])[:, (p + q) > 0]
    assume(table.shape[1] > 1)
    assert chi2_p(p, q) == pytest.approx(chi2_contingency(table, correction=False).pvalue, abs=TOL)
