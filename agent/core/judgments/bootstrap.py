"""Percentile bootstrap interval for a (weighted) mean over queries.

Queries are resampled with replacement, each resample's weighted mean taken, and
the interval read from the resampled means' percentiles. A stratified sample
(one priority sample per stratum) is resampled within each stratum. A stratum
of n items gives n - 1 draws whose weights count n / (n - 1) times (Rao and
Wu's rescaled bootstrap): drawing n would shrink the stratum's variance by
(n - 1) / n, which matters in strata of a handful of items; the scaling keeps
each stratum's share of the weight. A stratum of one item stays as it is.
The generator is passed in so the interval is reproducible and the core stays
free of hidden state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass

import numpy as np
import numpy.typing as npt

_BLOCK = 1 << 20  # draws held at once by an unstratified resampling


@dataclass(frozen=True)
class Interval:
    """The point estimate and the interval's bounds."""

    estimate: float
    low: float
    high: float
    _: KW_ONLY
    level: float


def weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    return float(np.sum(values * weights) / np.sum(weights))


def bootstrap_interval(
    values: npt.ArrayLike,
    rng: np.random.Generator,
    weights: npt.ArrayLike | None = None,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    strata: Sequence[str] | None = None,
) -> Interval:
    """Percentile bootstrap interval for sum(w * x) / sum(w) (plain mean without weights),
    resampling within each stratum when `strata` (one per value) are given."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    estimate, means = resampled_means(values, rng, weights, resamples=resamples, strata=strata)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(estimate, float(low), float(high), level=level)


def resampled_means(
    values: npt.ArrayLike,
    rng: np.random.Generator,
    weights: npt.ArrayLike | None = None,
    *,
    resamples: int = 2000,
    strata: Sequence[str] | None = None,
) -> tuple[float, np.ndarray]:
    """The weighted mean and its rescaled resamples' means (see the module docstring)."""
    x = np.asarray(values, dtype=float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("values must be a non-empty 1-d sequence")
    if w.shape != x.shape:
        raise ValueError("weights must match values")
    if np.any(w < 0) or not np.any(w > 0):
        raise ValueError("weights must be non-negative with a positive sum")
    if strata is not None and len(strata) != x.size:
        raise ValueError("strata must match values")
    if strata is None:
        return weighted_mean(x, w), _blocked_means(x, w, rng, resamples)
    groups = [np.flatnonzero(np.asarray(strata) == s) for s in dict.fromkeys(strata)]
    draws = [max(g.size - 1, 1) for g in groups]
    index = np.hstack([g[rng.integers(0, g.size, size=(resamples, m))] for g, m in zip(groups, draws)])
    scale = np.hstack([np.full(m, g.size / m) for g, m in zip(groups, draws)])
    drawn = w[index] * scale
    sums = drawn.sum(axis=1)
    keep = sums > 0  # a resample of zero-weight queries only has no mean
    return weighted_mean(x, w), (x[index] * drawn).sum(axis=1)[keep] / sums[keep]


def _blocked_means(x: np.ndarray, w: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The unstratified resamples' means drawn a block of resamples at a time, so memory stays near
    `_BLOCK` draws however many values there are; the generator yields the same draws as one
    resamples x (n - 1) array would, and each row's sum is taken alike, so the means are the same."""
    m = max(x.size - 1, 1)
    scale = x.size / m
    means = np.empty(resamples)
    keep = np.ones(resamples, dtype=bool)
    step = max(1, _BLOCK // m)
    for start in range(0, resamples, step):
        rows = slice(start, min(start + step, resamples))
        index = rng.integers(0, x.size, size=(rows.stop - start, m))
        drawn = w[index] * scale
        sums = drawn.sum(axis=1)
        keep[rows] = sums > 0  # a resample of zero-weight queries only has no mean
        means[rows] = (x[index] * drawn).sum(axis=1) / np.where(sums > 0, sums, 1.0)
    return means[keep]
