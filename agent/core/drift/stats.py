"""Distances between two count vectors over the same bins (or categories).

Every function takes counts, not shares, as arrays of shape (..., k): the last
axis is the bins, leading axes broadcast (calibration passes many rows at
once). Counts are normalized to shares where the statistic is about shapes, so
scaling either side leaves PSI, JS, KS and Wasserstein unchanged; the
chi-square p-value is about counts and does depend on them. Every statistic is
symmetric in its two arguments. A side with no counts at all is a ValueError:
a distance to nothing is undefined, and the caller skips empty windows.

Conventions (each matches the scipy function named, to 1e-9, in the tests):
- psi: sum (q - p) ln(q / p) over shares, natural log; a share below
  `PSI_EPSILON` (1e-4) counts as 1e-4 on both sides, without renormalizing, so
  an empty bin adds a large but finite term and every term stays >= 0.
- js: Jensen-Shannon distance, the square root of the JS divergence, in base 2
  by default (so it lies in [0, 1]); scipy.spatial.distance.jensenshannon with
  `base=2` (scipy's own default is base e).
- ks: the largest gap between the two binned CDFs, read at the bins' upper
  edges; equals scipy.stats.ks_2samp on samples that put each count at its bin.
- wasserstein: W1 between the two distributions placed on the bin `centres`:
  scipy.stats.wasserstein_distance(centres, centres, p, q). Units: the
  feature's. The centres convention is in bins.py (the count-weighted mean of
  the bin's fine-cell midpoints).
- chi2_p: p-value of Pearson's chi-square test of homogeneity on the 2 x k table
  [p; q], columns empty on both sides dropped, dof = k' - 1, without Yates'
  continuity correction whatever k' is (scipy's `correction=True` applies it
  only when dof == 1, which would make a 2-category mix alone conservative);
  scipy.stats.chi2_contingency(table, correction=False). One column left: 1.0.

Calibrated thresholds are these statistics, and they feed a baseline's
version, so every sum is exactly rounded (`fsum_rows`) and every logarithm
libm's (`log_each`): numpy's own sums and logarithms pick SIMD kernels by CPU,
whose last bits differ from one machine to the next.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import chdtrc  # the chi-square survival function scipy.stats.chi2.sf calls

PSI_EPSILON = 1e-4
log_each = np.vectorize(math.log, otypes=[float])  # elementwise, the same last bits on every CPU


def fsum_rows(x: np.ndarray) -> np.ndarray:
    """Exactly rounded sums over the last axis (`math.fsum`), whatever the CPU."""
    rows = np.asarray(x, dtype=float)
    flat = rows.reshape(math.prod(rows.shape[:-1]), rows.shape[-1]).tolist()
    return np.array([math.fsum(row) for row in flat], dtype=float).reshape(rows.shape[:-1])


def _pair(p: npt.ArrayLike, q: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    p, q = np.broadcast_arrays(p, q)
    if p.shape[-1:] == (0,) or p.ndim == 0:
        raise ValueError("need at least one bin")
    if (p < 0).any() or (q < 0).any() or not (np.isfinite(p).all() and np.isfinite(q).all()):
        raise ValueError("counts must be finite and >= 0")
    if (p.sum(axis=-1) <= 0).any() or (q.sum(axis=-1) <= 0).any():
        raise ValueError("each side needs a positive total")
    return p, q


def _shares(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return p / fsum_rows(p)[..., None], q / fsum_rows(q)[..., None]


def psi(p: npt.ArrayLike, q: npt.ArrayLike, epsilon: float = PSI_EPSILON) -> np.ndarray | float:
    """Population stability index, sum (q - p) ln(q / p) over shares floored at `epsilon`."""
    a, b = _shares(*_pair(p, q))
    a, b = np.maximum(a, epsilon), np.maximum(b, epsilon)
    return _out(fsum_rows((b - a) * log_each(b / a)))


def js(p: npt.ArrayLike, q: npt.ArrayLike, base: float = 2.0) -> np.ndarray | float:
    """Jensen-Shannon distance (square root of the divergence), in `base` (2: within [0, 1])."""
    a, b = _shares(*_pair(p, q))
    m = (a + b) / 2
    with np.errstate(divide="ignore", invalid="ignore"):  # m is 0 only where a and b are
        ka = np.where(a > 0, a * log_each(np.where(a > 0, a / m, 1.0)), 0.0)
        kb = np.where(b > 0, b * log_each(np.where(b > 0, b / m, 1.0)), 0.0)
    divergence = fsum_rows(ka + kb) / 2 / math.log(base)
    return _out(np.sqrt(np.maximum(divergence, 0.0)))


def ks(p: npt.ArrayLike, q: npt.ArrayLike) -> np.ndarray | float:
    """Kolmogorov-Smirnov statistic on the binned CDFs: max |F_p - F_q|."""
    a, b = _shares(*_pair(p, q))
    return _out(np.max(np.abs(np.cumsum(a, axis=-1) - np.cumsum(b, axis=-1)), axis=-1))


def wasserstein(p: npt.ArrayLike, q: npt.ArrayLike, centres: npt.ArrayLike | None) -> np.ndarray | float:
    """Wasserstein-1 distance with each bin's mass at its centre (centres increasing)."""
    a, b = _shares(*_pair(p, q))
    c = np.asarray(centres, dtype=float)
    if c.shape != a.shape[-1:] or (np.diff(c) <= 0).any():
        raise ValueError("need one strictly increasing centre per bin")
    gap = np.abs(np.cumsum(a, axis=-1) - np.cumsum(b, axis=-1))[..., :-1]
    return _out(fsum_rows(gap * np.diff(c)))


def chi2_test(p: npt.ArrayLike, q: npt.ArrayLike) -> tuple[np.ndarray | float, np.ndarray | float, np.ndarray | float]:
    """(statistic, p-value, dof) of Pearson's chi-square on the 2 x k table [p; q], empty columns dropped."""
    p, q = _pair(p, q)
    column = p + q
    kept = column > 0
    n_p, n_q = fsum_rows(p)[..., None], fsum_rows(q)[..., None]
    total = n_p + n_q
    with np.errstate(divide="ignore", invalid="ignore"):
        ep, eq = column * n_p / total, column * n_q / total
        terms = np.where(kept, (p - ep) ** 2 / ep + (q - eq) ** 2 / eq, 0.0)
    statistic = fsum_rows(terms)
    dof = np.sum(kept, axis=-1) - 1
    pvalue = np.where(dof > 0, chdtrc(np.maximum(dof, 1), statistic), 1.0)
    return _out(statistic), _out(pvalue), _out(dof)


def chi2_p(p: npt.ArrayLike, q: npt.ArrayLike) -> np.ndarray | float:
    """p-value of the chi-square test of homogeneity (see `chi2_test`); small means different."""
    return chi2_test(p, q)[1]


def _out(x: np.ndarray) -> np.ndarray | float:
    """A plain Python number for one pair, the array for many."""
    if np.ndim(x) == 0:
        number: float = x.item()  # an int for the degrees of freedom
        return number
    return x


# The statistics by name: which apply to numeric features and which to mixes.
NUMERIC_STATS = ("psi", "js", "ks", "wasserstein")
MIX_STATS = ("psi", "chi2_p")
LOWER_IS_WORSE = frozenset({"chi2_p"})  # a p-value alarms when small; every other statistic when large


def statistic(
    name: str, p: npt.ArrayLike, q: npt.ArrayLike, centres: npt.ArrayLike | None = None
) -> np.ndarray | float:
    """The statistic `name` of (baseline, window) counts; `centres` only for wasserstein."""
    match name:
        case "psi":
            return psi(p, q)
        case "js":
            return js(p, q)
        case "ks":
            return ks(p, q)
        case "wasserstein":
            return wasserstein(p, q, centres)
        case "chi2_p":
            return chi2_p(p, q)
    raise ValueError(f"unknown drift statistic {name!r}")
