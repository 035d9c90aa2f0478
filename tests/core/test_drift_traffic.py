"""Drift on generated traffic, through the core's own paths (PartitionState, DriftDays, freeze, evaluate).

A 7-day baseline; 14 clean days judged as daily windows raise no more false
alarms than the baseline's thresholds are calibrated for; each of the
generator's drift incidents raises its alarm in a sub-day window (5m or 1h)
within the hour after it starts. Kafka and the store would add nothing here:
the agent hands the same counts to the same functions. Run with `-s` to see
the counts and delays.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from scipy.stats import betabinom

from agent.core.config import CoreConfig
from agent.core.drift import evaluate, freeze
from agent.core.drift.days import DriftConfig, merge, recent_windows
from agent.core.drift.thresholds import ThresholdSettings
from agent.core.state import ActiveBaseline, PartitionState
from agent.synth import ScheduledIncident, generate
from tests.generated_days import DAY0, generated_days

BASELINE_DAYS = 7
CLEAN_DAYS = 14
PER_DAY = 1500  # events per day, over the generator's three apps
RATE = 1.0  # events per second in the incident stream: ~100 per app and 5 minutes
LEAD, GAP = 60, 90  # minutes of clean traffic before the first incident, and between incident starts
EXPECTED = {  # the features whose alarm each incident must raise
    "score-drift": {"top1_score", "mean_admitted_score", "score_gap"},
    "source-dominance": {"source", "parent_diversity"},
    "stale": {"content_age_days", "parent_diversity"},  # a superseded version beside its current one: one parent twice
    "new-terms": {"query_cluster"},
}
SURPRISE = 1e-4  # the chance that one series of clean days exceeds its allowed count


SEED = 1000  # day d is the generator's stream SEED + d


@pytest.fixture(scope="module")
def days():
    """The baseline's days, then the clean days: day d from the generator's stream SEED + d."""
    return generated_days(BASELINE_DAYS + CLEAN_DAYS, PER_DAY, SEED)


@pytest.fixture(scope="module")
def baseline(days):
    return freeze({d: days[d] for d in sorted(days)[:BASELINE_DAYS]}, "traffic")


RATE_CONFIGURED = ThresholdSettings().rate


def test_clean_days_raise_no_more_false_alarms_than_calibrated(baseline, days):
    alarms: dict[tuple[str, str, str], int] = {}  # (app, feature, stat) -> clean days it alarmed on
    for day in sorted(days)[BASELINE_DAYS:]:
        for f in evaluate(baseline, days[day]):
            alarms[(f.app, f.feature, f.stat)] = alarms.get((f.app, f.feature, f.stat), 0) + f.alarm
    # With D baseline days the day-size threshold lies beyond the extreme of D
    # leave-one-out values: a predictive log-normal tail for the configured rate
    # (thresholds.py). The total is held to at most the configured count (43 of
    # 53.2: 0.81; the thresholds are conservative, not tight).
    # A series is also held to the extreme's law, which holds whatever the tail
    # model: a new day exceeds the extreme with probability p ~ Beta(1, D), so one
    # series' count is at most beta-binomial (exceeded with chance SURPRISE).
    d, n = BASELINE_DAYS, CLEAN_DAYS
    each = int(betabinom(n, 1, d).isf(SURPRISE))
    configured = len(alarms) * n * RATE_CONFIGURED
    total = sum(alarms.values())
    print(f"\nfalse alarms on {n} clean days x {len(baseline.apps)} apps against a {d}-day baseline "
          f"(configured: {RATE_CONFIGURED:.3f} per statistic and day):")
    for feature in sorted({f for _, f, _ in alarms}):
        mine = {k: v for k, v in alarms.items() if k[1] == feature}
        stats = sorted({s for _, _, s in mine})
        print(f"  {feature:<22} {sum(mine.values()):3d}  configured {len(mine) * n * RATE_CONFIGURED:5.1f}  ("
              + ", ".join(f"{s} {sum(v for k, v in mine.items() if k[2] == s)}" for s in stats) + ")")
    print(f"  {'total':<22} {total:3d}  configured {configured:5.1f} over {len(alarms)} series; "
          f"per series at most {each} of {n}")
    assert total <= configured
    assert max(alarms.values()) <= each, max(alarms.items(), key=lambda kv: kv[1])


@pytest.mark.parametrize("length", [BASELINE_DAYS, 10, 14])
def test_longer_baselines_raise_no_more_false_alarms_than_calibrated(days, length):
    """Baselines of the last `length` of the same days, the days before them clean: at most the configured count
    (measured: 26 of 53.2 for 7 days, 23 of 41.8 for 10, 13 of 26.6 for 14)."""
    order = sorted(days)
    baseline = freeze({d: days[d] for d in order[-length:]}, "later")
    findings = [f for day in order[:-length] for f in evaluate(baseline, days[day])]
    series = {(f.app, f.feature, f.stat) for f in findings}
    configured = len(series) * (len(order) - length) * RATE_CONFIGURED
    total = sum(f.alarm for f in findings)
    print(f"\n{length}-day baseline, {len(order) - length} clean days: {total} false alarms, "
          f"{configured:.1f} configured")
    assert total <= configured


def test_each_incident_raises_its_alarm_within_the_hour(baseline):
    kinds = sorted(EXPECTED)
    incidents = [ScheduledIncident(kind, LEAD + i * GAP) for i, kind in enumerate(kinds)]
    minutes = LEAD + len(kinds) * GAP
    start = DAY0 + timedelta(days=BASELINE_DAYS + CLEAN_DAYS)
    t0 = start.timestamp()
    state = PartitionState(CoreConfig(), ActiveBaseline(baseline.version, baseline.queries.vocabulary), drift=DriftConfig())
    state.feature("drift").queries = baseline.queries  # as the agent does once the baseline is active (the drift feature's `attach`)
    fired: dict[int, set] = {}  # minute -> the (app, feature, stat, window) series alarming then
    minute = 0
    delta: dict = {}
    for line in generate(int(minutes * 60 * RATE), seed=77, start=start, rate=RATE, incidents=incidents):
        facts = state.process(line)
        while facts.ts >= t0 + (minute + 1) * 60:
            minute += 1
            merge(delta, state.feature("drift").take())  # a checkpoint each minute: the windows must survive it
            if minute % 5:
                continue  # windows are whole 5-minute slots: they change when a slot ends
            fired[minute] = {(f.app, f.feature, f.stat, w)
                             for w, found in recent_windows([state.feature("drift")], t0 + minute * 60).items()
                             for f in evaluate(baseline, found) if f.alarm}
    # A clean 5-minute series (app, feature, statistic, window) alarms about once in
    # 30 slots, so about a third of them alarm somewhere in an hour. So an incident
    # is detected when one of its features' series that was quiet through the hour
    # before the incident alarms in the hour after it starts.
    print("\nfirst alarm after each incident's start, on a series quiet in the hour before (judged as each 5-minute slot ends):")
    delays = {}
    for inc in incidents:
        start_minute = int(inc.minute)
        noisy = set().union(*(fired.get(m, set()) for m in range(start_minute - 60, start_minute)))
        for m in range(start_minute + 1, start_minute + 61):  # windows holding incident traffic
            new = {s for s in fired.get(m, set()) - noisy if s[1] in EXPECTED[inc.kind]}
            if new:
                delays[inc.kind] = (m - start_minute) * 60
                break
        expected = {s for s in noisy if s[1] in EXPECTED[inc.kind]}
        print(f"  {inc.kind:<18} {delays.get(inc.kind, math.inf) / 60:4.0f} min: {sorted(new)[:3]}"
              f" ({len(expected)} of its series alarmed in the hour before)")
    assert all(delays.get(kind, math.inf) <= 3600 for kind in kinds), delays
