"""Drift thresholds: the quantile rule, the ladder of window sizes, the
fallback, and the measured false-alarm rate of fresh undrifted windows against
thresholds calibrated on synthetic baselines (`pytest -s` prints the figures),
and the alarm on a shifted distribution."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy.stats import t as t_dist

from agent.core.drift import (
    DEFAULT_GRIDS,
    DEFAULT_THRESHOLDS,
    MIX_STATS,
    NUMERIC_STATS,
    SOURCE,
    TOP1_SCORE,
    Counts,
    Threshold,
    ThresholdSettings,
    alarm,
    derive_thresholds,
    evaluate,
    freeze,
    quantile,
)
from agent.core.drift.thresholds import spread

GRID = DEFAULT_GRIDS[TOP1_SCORE]
MIX = {"wiki": 0.5, "kb": 0.3, "forum": 0.15, "blog": 0.05}
RATE = 1 / 30


def day(rng, n: int, shift: float = 0.0, jitter: float = 0.0, mix=MIX) -> Counts:
    """One app's counts: top-1 scores ~ N(0.7 + shift, 0.1) and a source mix; `jitter` varies
    the score mean and the mix from one draw to the next (days that differ beyond sampling noise)."""
    mean = 0.7 + shift + rng.normal(0, jitter)
    shares = np.array(list(mix.values()))
    if jitter:
        shares = rng.dirichlet(shares / jitter * 20)  # concentration 2000 at jitter 0.01
    sources = rng.multinomial(n, shares / shares.sum())
    return Counts({TOP1_SCORE: GRID.histogram(rng.normal(mean, 0.1, n))}, {SOURCE: dict(zip(mix, sources.tolist()))})


def baseline_days(rng, d: int, n: int, **kw) -> dict:
    """d days of n events +- 25 %."""
    sizes = rng.integers(n * 3 // 4, n * 5 // 4, size=d)
    return {f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}": {"app": day(rng, int(sizes[i]), **kw)} for i in range(d)}


# --------------------------------------------------------------------------- the rule, by hand


def test_weibull_quantile_by_hand():
    values = np.arange(1.0, 60.0)  # m = 59: position (m + 1)(1 - 1/30) = 58
    assert quantile(values, "psi", RATE) == 58.0
    assert quantile(values, "chi2_p", RATE) == 2.0  # the low tail for a p-value
    # beyond the extreme (m + 1 < 30): the predictive log-normal tail of the values, by hand
    ten = np.arange(1.0, 11.0)
    logs = [math.log(v) for v in ten]
    mu, sd = statistics.fmean(logs), statistics.stdev(logs)
    z = t_dist.isf(RATE, 9) * math.sqrt(1 + 1 / 10)  # Student's t, 9 degrees of freedom, for a new value
    assert quantile(ten, "ks", RATE) == pytest.approx(math.exp(mu + z * sd)) and quantile(ten, "ks", RATE) > 10
    p_values = np.array([0.5, 0.2, 0.1, 0.05, 0.02, 0.01])  # for a p-value, the tail of -log p
    logs = [math.log(-math.log(p)) for p in p_values]
    z = t_dist.isf(RATE, 5) * math.sqrt(1 + 1 / 6)
    tail = math.exp(-math.exp(statistics.fmean(logs) + z * statistics.stdev(logs)))
    assert tail < 0.01 and quantile(p_values, "chi2_p", RATE) == pytest.approx(tail)
    assert quantile([1.0, 2.0, 3.0, 4.0], "ks", RATE) == 4.0  # too few values to fit: the largest
    # values below a tenth of the extreme enter the fit as a tenth: zeros too, by hand
    logs = [math.log(v) for v in (0.4, 0.4, 1.0, 2.0, 3.0, 4.0)]
    z = t_dist.isf(RATE, 5) * math.sqrt(1 + 1 / 6)
    by_hand = math.exp(statistics.fmean(logs) + z * statistics.stdev(logs))
    assert quantile([0.0, 0.0, 1.0, 2.0, 3.0, 4.0], "ks", RATE) == pytest.approx(by_hand)
    # so one benign value near 0 cannot put the threshold out of reach
    base = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]
    near_zero = {x: quantile([*base, x], "psi", RATE) for x in (0.0, 1e-4, 1e-8, 1e-12)}
    assert len(set(near_zero.values())) == 1 and near_zero[0.0] < 0.2
    p_near_one = {p: quantile([0.02, 0.05, 0.1, 0.2, 0.3, 0.5, p], "chi2_p", RATE) for p in (0.6, 0.99, 0.9999, 1.0)}
    assert len({p_near_one[p] for p in (0.99, 0.9999, 1.0)}) == 1  # a p near 1 is as harmless as 1
    assert min(p_near_one.values()) > 1e-5  # and never puts the threshold out of reach (it was 0.0 at 0.9999)
    assert 0 < quantile([0.0, 0.2, 0.3, 0.4, 0.5, 0.6], "chi2_p", RATE) < 1e-200  # a p of 0 can still alarm
    assert quantile([0.1, 0.3, 0.2, 0.4, 0.5, 0.7, 0.6], "psi", RATE) >= 0.7  # never inside the sample
    assert quantile([1.0, 2.0, 3.0, 4.0], "ks", 0.3) == pytest.approx(3.5)  # position 3.5: interpolated


def test_threshold_interpolates_in_log_size_and_refuses_small_windows():
    t = Threshold(sizes=(32, 128), values=(0.4, 0.2), samples=(100, 10), calibrated=True, reason="")
    assert t.at(16) is None
    assert t.at(32) == 0.4 and t.at(128) == 0.2 and t.at(10**6) == 0.2
    assert t.at(64) == pytest.approx(0.4 * 0.5**0.5)  # halfway in log n: the geometric mean
    assert Threshold(sizes=(32, 128), values=(0.0, 0.2), samples=(1, 1), calibrated=True, reason="").at(64) == pytest.approx(0.1)  # a zero: linear
    assert Threshold.from_dict(t.to_dict()) == t
    assert alarm("psi", 0.5, 0.4) and not alarm("psi", 0.4, 0.4) and not alarm("psi", 9.0, None)
    assert alarm("chi2_p", 0.001, 0.01) and not alarm("chi2_p", 0.02, 0.01)


def test_the_ladder_doubles_from_min_events_to_the_median_day():
    rows = np.random.default_rng(0).multinomial(1000, [0.2, 0.3, 0.5], size=12)
    thresholds = derive_thresholds(rows, ("psi", "chi2_p"), settings=ThresholdSettings(min_events=50, draws=4), key=(1,))
    t = thresholds["psi"]
    assert t.sizes == (50, 100, 200, 400, 800, 1000) and t.samples == (48, 48, 48, 48, 48, 12)
    assert t.calibrated and "12 days" in t.reason and "log-normal tail" in t.reason
    assert list(t.values[:-1]) == sorted(t.values[:-1], reverse=True)  # smaller windows, noisier, higher thresholds
    again = derive_thresholds(rows, ("psi", "chi2_p"), settings=ThresholdSettings(min_events=50, draws=4), key=(1,))
    other = derive_thresholds(rows, ("psi",), settings=ThresholdSettings(min_events=50, draws=4), key=(2,))
    assert again == thresholds  # seeded: the same days give the same thresholds
    assert other["psi"].values[:-1] != t.values[:-1]  # the thinning draws with the key


def test_too_few_days_fall_back_to_the_documented_defaults():
    rows = np.array([[10, 20, 30], [12, 18, 30], [0, 0, 0], [9, 21, 33]])
    centres = [1.0, 2.0, 4.0]
    out = derive_thresholds(rows, (*NUMERIC_STATS, "chi2_p"), centres)
    assert DEFAULT_THRESHOLDS == {"psi": 0.25, "js": 0.2, "ks": 0.2, "wasserstein": 0.5, "chi2_p": 0.001}
    for stat, t in out.items():
        assert not t.calibrated and t.reason == "3 days with data, 7 needed: default threshold"
        expected = DEFAULT_THRESHOLDS[stat] * (spread(rows.sum(axis=0), centres) if stat == "wasserstein" else 1)
        assert t.sizes == (32,) and t.values == (expected,)
    assert spread([1, 0, 1], centres) == pytest.approx(1.5)
    custom = derive_thresholds(rows, ("psi",), settings=ThresholdSettings(defaults={"psi": 0.1}))
    assert custom["psi"].values == (0.1,)


def test_fallback_findings_say_they_are_uncalibrated():
    rng = np.random.default_rng(5)
    base = freeze(baseline_days(rng, 3, 1000))
    findings = evaluate(base, {"app": day(rng, 1000)})
    assert findings and not any(f.calibrated for f in findings)
    assert {f.threshold for f in findings if f.stat == "ks"} == {0.2}


# --------------------------------------------------------------------------- false alarms, measured


def false_alarm_rates(jitter: float, baselines: int = 16, fresh: int = 150, d: int = 60, n: int = 2000) -> dict:
    """Share of fresh undrifted windows (day-sized and 1 h-sized) that alarm, per statistic."""
    alarms: dict[tuple[str, str], list[bool]] = {}
    for seed in range(baselines):
        rng = np.random.default_rng([seed, int(jitter * 1000)])
        base = freeze(baseline_days(rng, d, n, jitter=jitter), calibration=ThresholdSettings(seed=seed))
        for size, label in ((n, "day"), (n // 24, "1 h")):
            for _ in range(fresh):
                for f in evaluate(base, {"app": day(rng, size, jitter=jitter)}):
                    alarms.setdefault((label, f"{f.feature}/{f.stat}"), []).append(f.alarm)
    return {key: float(np.mean(v)) for key, v in sorted(alarms.items())}


@pytest.mark.parametrize("jitter", [0.0, 0.01], ids=["iid days", "days that differ"])
def test_fresh_undrifted_windows_alarm_at_about_the_target_rate(jitter):
    rates = false_alarm_rates(jitter)
    kind = "days that differ" if jitter else "iid days"
    print(f"\nfalse-alarm rate, target {RATE:.4f}, 60-day baselines x 16, 150 fresh windows each ({kind}):")
    for (label, name), rate in rates.items():
        print(f"  {label:>4} window  {name:<18} {rate:.4f}")
    assert len(rates) == 2 * (len(NUMERIC_STATS) + len(MIX_STATS))
    for key, rate in rates.items():
        assert 0.01 <= rate <= 0.07, (key, rate)
    assert 0.02 <= np.mean(list(rates.values())) <= 0.05


def test_a_shifted_distribution_raises_the_alarm():
    rng = np.random.default_rng(11)
    base = freeze(baseline_days(rng, 30, 2000))
    shifted_mix = {"wiki": 0.4, "kb": 0.3, "forum": 0.2, "blog": 0.1}
    day_window = {f.stat: f for f in evaluate(base, {"app": day(rng, 2000, shift=0.05)}) if f.feature == TOP1_SCORE}
    hour_window = {f.stat: f for f in evaluate(base, {"app": day(rng, 100, shift=0.1)}) if f.feature == TOP1_SCORE}
    mix = {f.stat: f for f in evaluate(base, {"app": day(rng, 2000, mix=shifted_mix)}) if f.feature == SOURCE}
    ratios = {s: round(f.value / f.threshold, 2) for s, f in day_window.items()}
    print("\nshift of half a standard deviation, day window, value / threshold:", ratios)
    assert all(f.alarm for f in day_window.values()), day_window
    assert all(f.alarm for f in hour_window.values()), hour_window  # one standard deviation, 100 events
    assert all(f.alarm for f in mix.values()), mix
    quiet = evaluate(base, {"app": day(rng, 2000)})
    assert quiet and not any(f.alarm for f in quiet if f.stat == "ks")
