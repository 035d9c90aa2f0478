"""Estimates of traffic totals from a priority sample, with their variance.

An event sampled with weight w under threshold tau was in with probability
min(1, w / tau') given the others (tau' = tau when it is in), so its
Horvitz-Thompson weight is max(w, tau) / w and sum(f * max(w, tau) / w) over
the sample is an unbiased estimate of sum(f) over the stratum's traffic
(Duffield, Lund, Thorup, JACM 2007).

Variance: the paper's unbiased estimate of Var(w_hat_i) for a sampled item is
tau * max(0, tau - w_i), and the estimates of distinct items have zero
covariance, so variances add. Scaling by f_i / w_i gives, for the total of f,

    Var_hat = sum over sampled i with w_i < tau of f_i^2 * (tau / w_i) * (tau / w_i - 1)

(items with w_i >= tau were certain to be in and add nothing). The interval is
the normal one, total +- z * sqrt(Var_hat).

A mean over the traffic, such as judged precision, is a ratio: with each
sampled item's weight a_i = max(w_i, tau) / w_i (the batch key's `weight`),
R = sum(a_i f_i) / sum(a_i). Its variance is the same estimator applied to the
linearised values z_i = f_i - R (the delta method), over X = sum(a_i)^2:

    Var_hat(R) = sum(a_i (a_i - 1) z_i^2) / X^2 / r,

since (tau / w)(tau / w - 1) = a (a - 1) below tau and 0 above it. Strata are
independent samples, so a ratio over several of them (all traffic) takes the
same sum over all their items, and a ratio over a subset of the items (a
slice, or a metric defined for some items only) over that subset: an item
outside it has z = 0. R is estimated from the same items, which shrinks the
z_i; r = 1 - 2 sum(h_i c_i) / sum(c_i) + sum(h_i^2), with c_i = a_i (a_i - 1)
and h_i = a_i / X, undoes that shrinkage on average (n / (n - 1) with equal
weights). A stratum taken whole (tau = 0) adds no variance.

`Ratio.interval` turns it into an interval for a figure between 0 and 1:
the Wilson score interval at the effective size n = R (1 - R) / Var_hat (the
simple random sample of 0/1 outcomes with that variance), with Student's t
quantile at Satterthwaite's degrees of freedom for a sum of independent
terms, (sum t_i)^2 / sum(t_i^2) with t_i = c_i z_i^2 (few items carrying most
of the variance give few degrees of freedom; the estimate errs low, so small
samples get somewhat wide intervals). Wilson's form stays inside [0, 1] and
leans away from the bound next to an estimate near it. When every sampled
value is the same (Var_hat = 0 though items were left out) the effective
size is that of 0/1 outcomes under the design, X^2 / sum(c), rather than
infinite, at (sum c)^2 / sum(c^2) - 1 degrees of freedom. A figure outside
[0, 1] gets the t interval R +- t * sqrt(Var_hat).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import stdtrit

from agent.core.sampling.candidate import Candidate, Selection


def ht_weight(w: float, tau: float) -> float:
    """How many events of the traffic one sampled event stands for: max(w, tau) / w."""
    return max(w, tau) / w


def estimate_total(selection: Selection, f: Callable[[Candidate], float]) -> float:
    """Unbiased estimate of sum(f) over the stratum's traffic."""
    tau = selection.tau
    return math.fsum(f(c) * max(c.w, tau) / c.w for c in selection.items)


def variance(selection: Selection, f: Callable[[Candidate], float]) -> float:
    """Unbiased estimate of the variance of `estimate_total` (see the module docstring)."""
    tau = selection.tau
    terms = []
    for c in selection.items:
        if c.w < tau:
            ratio = tau / c.w
            terms.append(f(c) ** 2 * ratio * (ratio - 1))
    return math.fsum(terms)


@dataclass(frozen=True, slots=True)
class Estimate:
    total: float
    variance: float

    @property
    def stderr(self) -> float:
        return math.sqrt(self.variance)

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """Normal interval total +- z standard errors (z = 1.96: 95 %)."""
        half = z * self.stderr
        return self.total - half, self.total + half


def estimate(selection: Selection, f: Callable[[Candidate], float]) -> Estimate:
    return Estimate(estimate_total(selection, f), variance(selection, f))


TINY = 1e-12  # below this (relative) a residual or a leverage is rounding


@dataclass(frozen=True, slots=True, kw_only=True)
class Ratio:
    """A ratio sum(a f) / sum(a) over priority-sampled items, and its variance (module docstring)."""

    estimate: float
    variance: float  # linearised, the shrinkage of the residuals undone
    unit: float  # the variance for 0/1 outcomes with p (1 - p) = 1: sum(c) / X^2; 0 when nothing was left out
    df: float  # Satterthwaite's degrees of freedom of `variance`
    bounded: bool  # every value lies in [0, 1]

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Wilson's interval at the effective size, Student's t quantile (module docstring)."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        r = self.estimate
        if self.unit == 0:
            return r, r
        q = float(stdtrit(self.df, (1 + level) / 2))  # Student's t quantile
        if not self.bounded:
            half = q * math.sqrt(self.variance)
            return r - half, r + half
        n = r * (1 - r) / self.variance if self.variance > 0 else 1 / self.unit
        shrink = 1 + q * q / n
        centre = (r + q * q / (2 * n)) / shrink
        half = q * math.sqrt(r * (1 - r) / n + q * q / (4 * n * n)) / shrink
        return max(0.0, centre - half), min(1.0, centre + half)


def ratio(values: npt.ArrayLike, weights: npt.ArrayLike) -> Ratio:
    """The ratio estimate of sampled values with their weights max(w, tau) / w, and its variance."""
    f = np.asarray(values, dtype=float)
    a = np.asarray(weights, dtype=float)
    if f.ndim != 1 or f.size == 0 or a.shape != f.shape:
        raise ValueError("values and weights must be non-empty 1-d sequences of one length")
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(a))) or np.any(a < 0) or not np.any(a > 0):
        raise ValueError("values must be finite, weights finite and non-negative with a positive sum")
    total = float(a.sum())
    estimate = float(a @ f) / total
    c = a * np.maximum(a - 1, 0)  # a weight below 1 (never the batch's) counts as certain
    spread = float(c.sum())
    bounded = bool(np.all((f >= 0) & (f <= 1)))
    if spread == 0:
        return Ratio(estimate=estimate, variance=0.0, unit=0.0, df=math.inf, bounded=bounded)
    h = a / total
    shrinkage = 1 - 2 * float(h @ c) / spread + float(h @ h)
    z = f - estimate
    unit = spread / total**2
    terms = c * z * z / total**2 / max(shrinkage, TINY)
    variance = float(terms.sum())
    if shrinkage < TINY or variance < TINY * unit:  # one item carries all the weight, or every value is the same
        return Ratio(estimate=estimate, variance=0.0, unit=unit, df=max(spread**2 / float(c @ c) - 1, 1.0), bounded=bounded)
    return Ratio(estimate=estimate, variance=variance, unit=unit, df=max(variance**2 / float(terms @ terms), 1.0), bounded=bounded)
