"""Drift binning: the fine grids the agent stores, the quantile bins a
baseline derives from them (exact unions of fine cells), the categories of a
mix, and the default grids' documented resolution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.drift import (
    CONTENT_AGE,
    DEFAULT_GRIDS,
    FEATURES,
    LATENCY,
    OTHER,
    PARENT_DIVERSITY,
    RESULT_COUNT,
    TOP1_SCORE,
    Bins,
    Categories,
    Grid,
    Grids,
)
from tests.core.test_properties import FAST

LINEAR = Grid(0, 10, 10)  # interior cells [0, 1), [1, 2), ..., [9, 10)


# --------------------------------------------------------------------------- grids


def test_a_linear_grid_by_hand():
    assert LINEAR.size == 12 and LINEAR.edges[0] == 0.0 and LINEAR.edges[-1] == 10.0
    assert [LINEAR.index(x) for x in (-5, 0, 0.5, 1, 9.999, 10, 1e9, -math.inf, math.inf)] == [
        0, 1, 1, 2, 10, 11, 11, 0, 11,
    ]  # fmt: skip
    assert LINEAR.midpoints.tolist() == [0.0, *[i + 0.5 for i in range(10)], 10.0]
    with pytest.raises(ValueError):
        LINEAR.index(math.nan)


def test_histogram_agrees_with_index_and_sparse_with_dense():
    values = np.random.default_rng(3).normal(5, 4, 1000)
    hist = LINEAR.histogram(values)
    assert hist.sum() == 1000
    assert hist.tolist() == np.bincount([LINEAR.index(v) for v in values], minlength=12).tolist()
    sparse = {i: int(n) for i, n in enumerate(hist) if n}
    assert LINEAR.dense(sparse).tolist() == hist.tolist()
    with pytest.raises(ValueError):
        LINEAR.dense([1, 2, 3])
    with pytest.raises(ValueError):
        LINEAR.dense({12: 1})


def test_an_asinh_grid_is_linear_near_zero_and_logarithmic_far_out():
    g = Grid(-1000, 1000, 4000, scale=0.01)
    widths = np.diff(g.edges)
    assert np.all(widths > 0)
    near_zero = widths[np.searchsorted(g.edges, 0.0)]
    assert near_zero == pytest.approx(0.01 * 2 * math.asinh(1e5) / 4000, rel=1e-3)
    at = lambda x: widths[np.searchsorted(g.edges, x) - 1] / x  # noqa: E731 (relative width there)
    assert at(1.0) == pytest.approx(at(100.0), rel=0.01)


def test_grids_compare_by_value_and_refuse_nonsense():
    assert Grid(0, 1, 10) == Grid(0.0, 1.0, 10) and Grid.from_dict(Grid(0, 1, 10).to_dict()) == Grid(0, 1, 10)
    for lo, hi, cells, scale in ((1, 0, 10, None), (0, 1, 0, None), (0, math.inf, 10, None), (0, 1, 10, -1.0)):
        with pytest.raises(ValueError):
            Grid(lo, hi, cells, scale=scale)


@pytest.mark.parametrize(
    ("feature", "value", "relative"),
    [(TOP1_SCORE, 0.8, 0.0061), (TOP1_SCORE, 25.0, 0.0061), (CONTENT_AGE, 30.0, 0.014),
     (LATENCY, 0.25, 0.0099), (RESULT_COUNT, 500, 0.0104)],
)  # fmt: skip
def test_default_grids_have_the_documented_resolution(feature, value, relative):
    g = DEFAULT_GRIDS[feature]
    i = g.index(value)
    width = g.edges[i] - g.edges[i - 1]
    assert width / value == pytest.approx(relative, rel=0.05)


def test_every_integer_result_count_up_to_a_hundred_has_its_own_cell():
    g = DEFAULT_GRIDS[RESULT_COUNT]
    cells = [g.index(n) for n in range(101)]
    assert len(set(cells)) == 101
    assert g.index(1000) < g.size - 1  # the schema's maximum is inside the grid


def test_parent_diversity_of_one_is_its_own_overflow_cell():
    g = DEFAULT_GRIDS[PARENT_DIVERSITY]
    assert g.index(1.0) == g.size - 1 and g.index(0.99) == g.size - 2


def test_every_feature_has_a_default_grid_and_overrides_win():
    grids = Grids(by_feature={TOP1_SCORE: LINEAR}, by_app={"bm25": {TOP1_SCORE: Grid(0, 60, 600)}})
    assert set(DEFAULT_GRIDS) == set(FEATURES)
    assert grids.grid("bm25", TOP1_SCORE) == Grid(0, 60, 600)
    assert grids.grid("other-app", TOP1_SCORE) == LINEAR
    assert grids.grid("bm25", LATENCY) == DEFAULT_GRIDS[LATENCY]
    assert Grids.from_dict(grids.to_dict()) == grids
    with pytest.raises(ValueError, match="no grid"):
        grids.grid("bm25", "made_up")


# --------------------------------------------------------------------------- coarse bins


def test_quantile_bins_by_hand():
    fine = [0, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 0]  # ten equal cells
    bins = Bins.from_quantiles(LINEAR, fine, n_bins=5)
    assert bins.starts == (0, 3, 5, 7, 9)  # cuts after cells [0,1)+[1,2), [2,3)+[3,4), ...
    assert bins.edges == (2.0, 4.0, 6.0, 8.0)
    assert bins.centres == (1.0, 3.0, 5.0, 7.0, 9.0)  # the baseline's mean in each bin
    assert bins.rebin(fine).tolist() == [20, 20, 20, 20, 20]


def test_quantile_edges_are_the_baseline_quantiles_to_within_one_fine_cell():
    values = np.random.default_rng(7).lognormal(0, 1, 20000)
    grid = DEFAULT_GRIDS[LATENCY]
    bins = Bins.from_quantiles(grid, grid.histogram(values), 10)
    assert bins.n == 10
    for j, edge in enumerate(bins.edges, start=1):
        i = grid.index(edge)
        cell = (grid.edges[i - 2], grid.edges[i - 1])  # the fine cell whose upper edge is `edge`
        share = np.mean(values < cell[1])
        assert share >= j / 10 and np.mean(values < cell[0]) < j / 10
    shares = bins.rebin(grid.histogram(values)) / len(values)
    assert np.all(np.abs(shares - 0.1) < 0.01)


def test_a_point_mass_is_a_bin_of_its_own():
    grid = DEFAULT_GRIDS[RESULT_COUNT]
    counts = grid.histogram([10] * 95 + [3] * 5)
    bins = Bins.from_quantiles(grid, counts)
    assert bins.rebin(counts).tolist() == [5, 95, 0]  # below 10 (the 3s, 5 % alone), exactly 10, above
    assert bins.rebin(grid.histogram([3, 9, 10, 11])).tolist() == [2, 1, 1]
    assert bins.centres[:2] == (pytest.approx(3, rel=0.01), pytest.approx(10, rel=0.01))
    only = Bins.from_quantiles(grid, grid.histogram([10] * 100))
    assert only.rebin(grid.histogram([9, 10, 11])).tolist() == [1, 1, 1]  # empty bins either side


def test_no_data_gives_one_bin():
    bins = Bins.from_quantiles(LINEAR, [0] * 12)
    assert bins.starts == (0,) and bins.centres == (5.0,) and bins.edges == ()
    assert bins.rebin(LINEAR.histogram([1, 2, 3])).tolist() == [3]


@FAST
@given(st.lists(st.integers(0, 50), min_size=12, max_size=12), st.integers(1, 15),
       st.lists(st.integers(0, 50), min_size=12, max_size=12))  # fmt: skip
def test_bins_partition_the_fine_cells_and_rebinning_keeps_every_count(baseline, n_bins, window):
    bins = Bins.from_quantiles(LINEAR, baseline, n_bins)
    assert 1 <= bins.n <= 3 * n_bins  # quantile cuts, plus both sides of each point mass
    assert list(bins.centres) == sorted(set(bins.centres))
    assert bins.rebin(window).sum() == sum(window)
    assert bins.rebin({i: n for i, n in enumerate(window) if n}).tolist() == bins.rebin(window).tolist()
    assert Bins.from_dict(bins.to_dict()) == bins
    # quantile bins of the baseline hold about 1 / n_bins each: no bin but a point mass exceeds 2 / n_bins + a cell
    if sum(baseline):
        coarse = bins.rebin(baseline) / sum(baseline)
        fine_max = max(baseline) / sum(baseline)
        assert np.all(coarse <= 1 / n_bins + fine_max + 1e-12)


# --------------------------------------------------------------------------- categories


def test_categories_keep_the_most_frequent_and_fold_the_rest():
    counts = {"wiki": 50, "kb": 30, "forum": 30, "blog": 2, "empty": 0, OTHER: 9}
    cats = Categories.from_counts(counts, max_categories=3)
    assert cats.values == ("forum", "kb", "wiki")  # ties by name; stored sorted
    assert cats.labels == ("forum", "kb", "wiki", OTHER)
    assert cats.fold(counts) == (30, 30, 50, 11)  # blog 2 + other 9
    assert cats.fold({"new": 4}) == (0, 0, 0, 4)
    assert Categories.from_dict(cats.to_dict()) == cats
    with pytest.raises(ValueError):
        Categories(("b", "a"))
