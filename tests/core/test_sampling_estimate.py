"""Judgment sampling, part 3: Horvitz-Thompson weights, totals, their variance,
ratios (a mean over the traffic) with their interval, and unbiasedness measured
over 200 salts (`pytest -s` prints the figures)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from agent.core.sampling import (
    DEFAULT_WEIGHTS,
    UNIFORM,
    Candidate,
    Selection,
    estimate,
    estimate_total,
    ht_weight,
    ratio,
    select,
    uniform,
    variance,
)  # fmt: skip

WEEK = "2026-W48"


def item(event_id: str, w: float, u: float = 0.5, stratum: str = "app|lexical") -> Candidate:
    return Candidate(
        event_id=event_id, ts=0.0, week=WEEK, stratum=stratum, app="app", query_id="q0000000",
        query_type="lexical", language="en", cutoff_k=3, pipeline_version=None, results=(),
        w=w, u=u, priority=w / u,
    )  # fmt: skip


def one(_: Candidate) -> float:
    return 1.0


def test_ht_weight_by_hand():
    assert ht_weight(2.0, 5.0) == 2.5  # below tau: stands for tau / w events
    assert ht_weight(5.0, 2.0) == 1.0  # above tau: certain to be in, stands for itself
    assert ht_weight(3.0, 0.0) == 1.0  # tau 0: everything was taken


def test_total_and_variance_by_hand():
    selection = Selection((item("a", 4.0), item("b", 1.0)), tau=2.0)
    values = {"a": 10.0, "b": 3.0}

    def f(c):
        return values[c.event_id]

    # a: w 4 >= tau, weight 1; b: w 1 < tau, weight 2.
    assert estimate_total(selection, f) == 10.0 + 6.0
    # Only b adds variance: f^2 (tau / w)(tau / w - 1) = 9 * 2 * 1; DLT form: (f / w)^2 tau (tau - w) = 18.
    assert variance(selection, f) == 18.0
    e = estimate(selection, f)
    assert (e.total, e.variance, e.stderr) == (16.0, 18.0, math.sqrt(18.0))
    assert e.interval(2.0) == pytest.approx((16.0 - 2 * math.sqrt(18.0), 16.0 + 2 * math.sqrt(18.0)))


def test_a_stratum_with_at_most_k_events_is_counted_exactly():
    population = [item(f"e{i}", w=1.0 + i, u=uniform(f"e{i}", WEEK)) for i in range(7)]
    selection = select(population, 10)
    assert selection.tau == 0.0
    assert estimate_total(selection, lambda c: c.w) == sum(c.w for c in population)
    assert variance(selection, lambda c: c.w) == 0.0


# --------------------------------------------------------------------------- unbiasedness

N, K, SALTS = 2000, 100, 200


def population(seed: int = 20261125) -> list[tuple[str, float, float]]:
    """(event_id, risk weight, value f): weights from independent signals with
    skewed rates (most events weigh 1, a few weigh 10+); risky events score
    worse, so f and w are correlated as they would be with judged precision."""
    rnd = random.Random(seed)
    rates = dict(zip(DEFAULT_WEIGHTS, (0.05, 0.15, 0.2, 0.1, 0.25, 0.05, 0.03, 0.03, 0.05, 0.01, 0.02, 0.1)))
    out = []
    for i in range(N):
        w = 1.0 + sum(weight for signal, weight in DEFAULT_WEIGHTS.items() if rnd.random() < rates[signal])
        f = min(1.0, max(0.0, 0.9 - 0.08 * (w - 1) + rnd.gauss(0, 0.15)))
        out.append((f"ev-{i:05d}", w, f))
    return out


def repeated(events, stratum: str) -> tuple[list[float], list[float], list[float]]:
    """Estimates of sum(f), of their variance and of the event count, one per salt."""
    values = {event_id: f for event_id, _, f in events}

    def f(c):
        return values[c.event_id]

    totals, variances, counts = [], [], []
    for salt in range(SALTS):
        candidates = []
        for event_id, w, _ in events:
            u = uniform(event_id, WEEK, str(salt))
            candidates.append(item(event_id, 1.0 if stratum == UNIFORM else w, u, stratum))
        selection = select(candidates, K)
        e = estimate(selection, f)
        totals.append(e.total)
        variances.append(e.variance)
        counts.append(estimate_total(selection, one))
    return totals, variances, counts


@pytest.mark.parametrize("stratum", ["app|lexical", UNIFORM])
def test_the_estimate_is_unbiased_over_salts(stratum):
    events = population()
    true = math.fsum(f for _, _, f in events)
    totals, variances, counts = repeated(events, stratum)
    mean, sd = statistics.fmean(totals), statistics.stdev(totals)
    se = sd / math.sqrt(SALTS)
    z = (mean - true) / se
    ratio = statistics.fmean(variances) / sd**2
    count_z = (statistics.fmean(counts) - N) / (statistics.stdev(counts) / math.sqrt(SALTS))
    weights = [w for _, w, _ in events] if stratum != UNIFORM else [1.0] * N
    print(
        f"\n[{stratum}] N={N} K={K} salts={SALTS} w: mean {statistics.fmean(weights):.2f} max {max(weights):.1f}"
        f"\n  true total {true:.2f}  mean estimate {mean:.2f}  sd {sd:.2f}  standard error {se:.2f}  z {z:+.2f}"
        f"\n  mean variance estimate / variance over salts = {ratio:.3f}"
        f"\n  event count: true {N}  mean estimate {statistics.fmean(counts):.1f}  z {count_z:+.2f}"
    )
    assert abs(z) < 3 and abs(count_z) < 3
    assert 0.7 < ratio < 1.4  # the variance estimate is unbiased too, up to the noise of 200 draws


def test_ratio_by_hand():
    found = ratio([1 / 3, 1 / 2], [2.0, 1.0])
    # c = a (a - 1) = (2, 0), X = 3, residual -1/18, shrinkage 1 - 2 (2/3 * 2) / 2 + 5/9 = 2/9.
    assert found.estimate == pytest.approx(7 / 18)
    assert found.variance == pytest.approx(2 * (1 / 18) ** 2 / 9 / (2 / 9))
    assert (found.unit, found.df, found.bounded) == (pytest.approx(2 / 9), 1.0, True)
    # equal weights: the shrinkage is (n - 1) / n, the variance s^2 / n (1 - 1 / a), s^2 over n - 1;
    # Satterthwaite's degrees of freedom count the items that carry it: two equal terms, 2
    equal = ratio([0.0, 0.5, 1.0], [3.0] * 3)
    assert equal.variance == pytest.approx(statistics.variance([0.0, 0.5, 1.0]) / 3 * (1 - 1 / 3))
    assert equal.df == pytest.approx(2.0)
    assert ratio([0.0, 0.1, 0.2, 1.0], [3.0] * 4).df < 2  # one item carries most of it


def test_ratio_interval_edges():
    # a stratum taken whole (every weight 1): no sampling variance, a point
    assert ratio([0.2, 0.9], [1.0, 1.0]).interval() == (pytest.approx(0.55), pytest.approx(0.55))
    # every sampled value 1 with items left out: Wilson at the design's size for 0/1 outcomes, not a point
    n, q = 40.0**2 / (10 * 4 * 3), statistics.NormalDist().inv_cdf(0.975)
    low, high = ratio([1.0] * 10, [4.0] * 10).interval()
    assert high == pytest.approx(1.0) and low < n / (n + q * q)  # Student's t (9 degrees of freedom) is wider than the normal
    # one sampled item left to chance says little
    low, high = ratio([0.6], [5.0]).interval()
    assert low < 0.1 and high > 0.9
    # bounded figures stay in [0, 1]; others get the symmetric t interval
    assert all(0.0 <= b <= 1.0 for b in ratio([0.0, 0.0, 0.1], [9.0, 9.0, 9.0]).interval())
    low, high = ratio([0.0, 2.0, 4.0], [3.0] * 3).interval()
    assert low < 0 and (low + high) / 2 == pytest.approx(2.0)
    for values, weights in (([], []), ([0.5], [1.0, 2.0]), ([0.5], [0.0]), ([0.5], [-1.0]), ([math.nan], [1.0])):
        with pytest.raises(ValueError):
            ratio(values, weights)
    with pytest.raises(ValueError):
        ratio([0.5, 0.2], [2.0, 2.0]).interval(1.0)


@pytest.mark.parametrize("stratum", ["app|lexical", UNIFORM])
def test_the_ratio_variance_is_its_spread_over_salts(stratum):
    """The mean of f over the stratum (f and w correlated, weights up to 10+): the variance
    estimate against the estimates' spread over 200 salts, and the 95 % interval's coverage."""
    events = population()
    true = statistics.fmean(f for _, _, f in events)
    values = {event_id: f for event_id, _, f in events}
    estimates, variances, covered = [], [], 0
    for salt in range(SALTS):
        selection = select([item(event_id, 1.0 if stratum == UNIFORM else w, uniform(event_id, WEEK, str(salt)),
                                 stratum) for event_id, w, _ in events], K)
        found = ratio([values[c.event_id] for c in selection.items],
                      [ht_weight(c.w, selection.tau) for c in selection.items])
        low, high = found.interval()
        estimates.append(found.estimate)
        variances.append(found.variance)
        covered += low <= true <= high
    spread = statistics.variance(estimates)
    print(f"\n[{stratum}] ratio: true {true:.4f} mean estimate {statistics.fmean(estimates):.4f}; "
          f"mean variance estimate / variance over salts = {statistics.fmean(variances) / spread:.3f}; "
          f"95% interval coverage {covered}/{SALTS}")
    assert 0.8 < statistics.fmean(variances) / spread < 1.25
    assert covered >= 0.92 * SALTS
