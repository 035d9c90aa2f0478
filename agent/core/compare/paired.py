"""Paired differences between two runs over the same queries, their interval, and what counts as material.

The paired bootstrap of a mean difference is the bootstrap of the per-query
differences: each resample draws queries, and both runs' values of a drawn
query travel together (agent/core/judgments/bootstrap.py does the drawing,
n - 1 draws of n rescaled). Each interval gets its own generator from the
fixed seed, so a figure does not depend on which figures came before it.

Material: a difference is material when it is larger than the baseline's own
sampling spread over the same queries, m = max(min_margin, margin_factor x the
half-width of the baseline mean's bootstrap interval). A slice of 40 queries
thus needs a larger drop than all 400 before it counts, and a metric every
query agrees on gets the floor instead of zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agent.core.judgments.bootstrap import Interval, bootstrap_interval

PASS, FAIL, INCONCLUSIVE, TOO_FEW, NOT_MEASURED = "pass", "fail", "inconclusive", "too few queries", "not measured"


@dataclass(frozen=True)
class PairedSettings:
    resamples: int = 2000
    level: float = 0.95
    seed: int = 0
    margin_factor: float = 1.0
    min_margin: float = 0.01


@dataclass(frozen=True)
class Paired:
    """One metric over the paired queries where it is defined for both runs."""

    n: int
    mean_a: float
    mean_b: float
    delta: Interval  # of mean(b - a)
    margin: float  # m: a regression beyond -m is material

    def outcome(self, direction: int, min_queries: int) -> str:
        """fail when the whole interval lies beyond -m in the worse direction (`direction`
        -1: lower is better), pass when none of it does, otherwise inconclusive."""
        if self.n < min_queries:
            return TOO_FEW
        low, high = sorted((direction * self.delta.low, direction * self.delta.high))
        if high < -self.margin:
            return FAIL
        if low >= -self.margin:
            return PASS
        return INCONCLUSIVE


def paired(a: np.ndarray, b: np.ndarray, settings: PairedSettings) -> Paired | None:
    """The paired figures of values `a` and `b` (one per query, NaN where undefined); None when none is defined."""
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if a.size == 0:
        return None
    delta = paired_interval(a, b, settings)
    return Paired(int(a.size), float(a.mean()), float(b.mean()), delta, margin(a, settings))


def paired_interval(a: np.ndarray, b: np.ndarray, settings: PairedSettings) -> Interval:
    """Percentile bootstrap interval of mean(b - a), queries resampled in pairs."""
    rng = np.random.default_rng(settings.seed)
    return bootstrap_interval(b - a, rng, resamples=settings.resamples, level=settings.level)


def two_sample_interval(a: np.ndarray, b: np.ndarray, settings: PairedSettings) -> Interval:
    """Percentile bootstrap interval of mean(b) - mean(a) for unpaired values: each resample draws
    each side on its own (rescaled as bootstrap.py does), for queries only one version served."""
    rng = np.random.default_rng(settings.seed)
    means = []
    for x in (a, b):
        m = max(x.size - 1, 1)
        drawn = x[rng.integers(0, x.size, size=(settings.resamples, m))]
        means.append(drawn.mean(axis=1))
    tail = (1 - settings.level) / 2 * 100
    low, high = np.percentile(means[1] - means[0], [tail, 100 - tail])
    return Interval(float(b.mean() - a.mean()), float(low), float(high), settings.level)


def margin(a: np.ndarray, settings: PairedSettings) -> float:
    """m from the baseline's bootstrap spread over these queries (see the module docstring)."""
    rng = np.random.default_rng(settings.seed)
    spread = bootstrap_interval(a, rng, resamples=settings.resamples, level=settings.level)
    return max(settings.min_margin, settings.margin_factor * (spread.high - spread.low) / 2)
