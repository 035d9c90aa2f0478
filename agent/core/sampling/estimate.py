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
the normal one, total +- z * sqrt(Var_hat); with few sampled items, prefer the
bootstrap the judgment reports use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
