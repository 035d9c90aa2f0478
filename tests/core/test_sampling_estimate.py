"""Judgment sampling, part 3: Horvitz-Thompson weights, totals, their variance,
and unbiasedness measured over 200 salts (`pytest -s` prints the figures)."""

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
    f = lambda c: values[c.event_id]
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
    f = lambda c: values[c.event_id]
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
