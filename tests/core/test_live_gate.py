"""The live release gate's core: what each event adds to the day and query rows, and the verdict on
hand-computed stored rows."""

from __future__ import annotations

import math
import zlib
from functools import cache

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.compare.live import MEASURES, OTHER, HeldRows, LiveConfig, VersionCounts, empty_row
from agent.core.compare.live_verdict import (
    SERVING_RULE,
    LiveThresholds,
    Stored,
    filter_zero_p,
    judged_queries,
    live_compare,
    pair_of,
    versions_by_traffic,
)
from agent.core.compare.paired import PairedSettings, two_sample_interval
from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.core.feature import alone
from agent.core.judgments import bootstrap
from agent.core.judgments.judged import JudgedChunk, JudgedItem
from agent.core.state import PartitionState
from tests import gate_traffic as traffic
from tests.core.test_properties import FAST

TS = "2026-11-02T10:00:00Z"  # day 2026-11-02


def event(i: int, version: str | None = "v1", query: str = "query-aaaa", results=None, **extra) -> bytes:
    if results is None:
        results = [{"chunk_id": "c1", "parent_id": "p1", "source": "wiki", "rank": 1, "score": 0.8,
                    "effective_date": "2026-10-31T10:00:00Z"},
                   {"chunk_id": "c2", "parent_id": "p2", "source": "kb", "rank": 2, "score": 0.5}]
    doc = {"schema": "retrieval.v1", "event_id": f"e-{i:03d}", "ts": TS, "app": "shop",
           "query": {"id": query, "type": "lexical", "language": "en"},
           "principal": {"tenant": "t1", "groups": []}, "cutoff_k": 5, "results": results, "latency_ms": 200.0,
           **extra}
    if version is not None:
        doc["pipeline"] = {"version": version}
    return orjson.dumps(doc)


def fold(lines, config: LiveConfig | None = None) -> HeldRows:
    counts = (config or LiveConfig()).partition()
    for line in lines:
        counts.observe(facts := facts_of(decode(line).event), alone(facts))
    held = counts.outbox()
    held.absorb(counts.take())
    return held


def test_a_day_row_counts_each_gate_and_sums_each_measure():
    leak = [{"chunk_id": "x", "parent_id": "px", "source": "wiki", "rank": 1, "score": 0.9, "tenant": "t2"}]
    held = fold([event(1), event(2, results=[]), event(3, results=leak)])
    row = held.days[("2026-11-02", "shop", "v1")]
    assert (row["events"], row["zero"], row["unauthorized"], row["stale_conflict"], row["filter_zero"]) == (3, 1, 1, 0, 0)
    assert row["top1_score"] == [0.8 + 0.9, 2]
    assert row["content_age_days"] == [2.0, 1]  # one event with an aged result: 2 days
    assert row["source_concentration"] == [0.5 + 1.0, 2]  # wiki and kb halves: 0.25 + 0.25; one source: 1
    assert row["latency_seconds"] == [pytest.approx(0.6), 3]
    assert row["examples"] == {"unauthorized": ["e-003"]}
    query = held.queries[("2026-11-02", "shop", "v1", "query-aaaa")]
    assert (query["events"], query["zero"], query["query_type"], query["language"]) == (3, 1, "lexical", "en")


def test_examples_keep_the_smallest_ids_however_merged():
    leak = [{"chunk_id": "x", "parent_id": "px", "source": "wiki", "rank": 1, "score": 0.9, "tenant": "t2"}]
    config = LiveConfig(examples=2)
    ids = [7, 3, 9, 1, 5]
    whole = fold([event(i, results=leak) for i in ids], config)
    held = HeldRows(2)
    for i in ids:  # one checkpoint per event
        counts = config.partition()
        counts.observe(facts := facts_of(decode(event(i, results=leak)).event), alone(facts))
        held.absorb(counts.take())
    key = ("2026-11-02", "shop", "v1")
    assert whole.days[key]["examples"]["unauthorized"] == ["e-001", "e-003"]
    assert held.days[key]["examples"]["unauthorized"] == ["e-001", "e-003"]
    assert held.days[key]["unauthorized"] == 5


def test_versions_are_bounded_or_only_the_configured_ones():
    lines = [event(i, version=f"v{i}") for i in range(4)] + [event(9, version=None)]
    held = fold(lines, LiveConfig(max_versions=2))
    assert sorted(v for _, _, v in held.days) == [OTHER, "v0", "v1"]
    held = fold(lines, LiveConfig(versions=("v2", "v3")))
    assert sorted(v for _, _, v in held.days) == ["v2", "v3"]


@given(st.text(alphabet="abcdefghij0123456789", min_size=8, max_size=20), st.floats(0.01, 1.0))
@FAST
def test_sampling_keeps_a_query_for_every_version_or_for_none(query, rate):
    held = fold([event(1, "a", query), event(2, "b", query)], LiveConfig(sample_rate=rate))
    kept = {v for _, _, v, _ in held.queries}
    expected = rate >= 1 or zlib.crc32(query.encode()) < rate * 2 ** 32
    assert kept == ({"a", "b"} if expected else set())


def test_a_partition_asks_for_a_checkpoint_when_its_queries_reach_the_bound():
    counts = VersionCounts(LiveConfig(max_held_queries=2))
    counts.observe(facts := facts_of(decode(event(1, query="query-0001")).event), alone(facts))
    assert not counts.flush_due(counts.outbox())
    counts.observe(facts := facts_of(decode(event(2, query="query-0002")).event), alone(facts))
    assert counts.flush_due(counts.outbox())


def day_row(events: int, top1: float, unauthorized: int = 0, filter_zero: int = 0, examples=()) -> dict:
    row = empty_row()
    row.update(events=events, unauthorized=unauthorized, filter_zero=filter_zero)
    row["top1_score"] = [top1 * events, events]
    row["examples"]["unauthorized"] = list(examples)
    return row


def query_row(top1: float, kind: str = "lexical") -> dict:
    row = empty_row(labels=True)
    row.update(events=1, query_type=kind, language="en")
    row["top1_score"] = [top1, 1]
    return row


DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")


def stored(candidate_shift: float, n: int = 40, **candidate_day) -> Stored:
    """Stable daily top-1 means 0.5, 0.6, 0.7 (leave-one-out deviations 0.15, 0, 0.15); n paired queries a day."""
    days, queries = {}, {}
    for d, (day, mean) in enumerate(zip(DAYS, (0.5, 0.6, 0.7))):
        days[(day, "shop", "a")] = day_row(n, mean)
        days[(day, "shop", "b")] = day_row(n, mean + candidate_shift, **candidate_day)
        for q in range(n):
            queries[(day, "shop", "a", f"q{d}-{q}")] = query_row(mean)
            queries[(day, "shop", "b", f"q{d}-{q}")] = query_row(mean + candidate_shift)
    return Stored(days, queries)


def metric(report: dict, name: str) -> dict:
    return next(row for row in report["metrics"] if row["metric"] == name)


def test_material_is_the_stable_day_to_day_quantile_and_a_larger_fall_fails():
    # three leave-one-out deviations, fewer than the log-normal tail needs: the largest, 0.15
    report = live_compare(stored(-0.2), "a", "b", LiveThresholds(resamples=200))
    row = metric(report, "top1_score")
    assert row["margin"] == pytest.approx(0.15)
    assert (row["delta"], row["low"], row["high"]) == pytest.approx((-0.2, -0.2, -0.2))
    assert row["outcome"] == "fail" and row["interval"] == "paired" and row["n"] == 120
    assert report["verdict"] == "fail"
    assert report["reasons"][0].startswith("top1_score fell by 0.2000")
    material = next(m for m in report["material"] if m["metric"] == "top1_score")
    assert material["days"] == 3 and material["day_sd"] == pytest.approx(0.1)


def test_a_smaller_change_passes_and_twice_the_factor_doubles_the_threshold():
    report = live_compare(stored(-0.1), "a", "b", LiveThresholds(resamples=200))
    assert metric(report, "top1_score")["outcome"] == "pass"
    assert report["verdict"] == "pass", report["reasons"]
    doubled = live_compare(stored(-0.1), "a", "b", LiveThresholds(resamples=200, material_factor=2))
    assert metric(doubled, "top1_score")["margin"] == pytest.approx(0.3)


def test_hard_gates_fail_with_example_event_ids():
    report = live_compare(stored(0.0, unauthorized=1, examples=("e-9", "e-1")), "a", "b",
                          LiveThresholds(resamples=200))
    gate = next(row for row in report["hardGates"] if row["gate"] == "unauthorized")
    assert (gate["candidate"], gate["outcome"]) == (3, "fail")
    assert gate["examples"] == [{"event": "e-1"}, {"event": "e-9"}]
    assert report["verdict"] == "fail" and "e-1, e-9" in report["reasons"][0]


def test_a_filter_caused_zero_rise_is_judged_by_a_binomial_test():
    base = stored(0.0)
    days = dict(base.days)
    for day in DAYS:  # stable 1 in 40 a day; candidate 1 a day: the same rate, no rise
        days[(day, "shop", "a")] = day_row(40, 0.6, filter_zero=1)
        days[(day, "shop", "b")] = day_row(40, 0.6, filter_zero=1)
    same = live_compare(Stored(days, base.queries), "a", "b", LiveThresholds(resamples=200))
    gate = next(row for row in same["hardGates"] if row["gate"] == "filter_zero_rise")
    assert (gate["outcome"], gate["counted"]) == ("pass", 0.0)
    for day in DAYS:  # candidate 10 in 40: 27 in excess of 3 expected; P(X >= 30 | 120, 1/40) is tiny
        days[(day, "shop", "b")] = day_row(40, 0.6, filter_zero=10)
    rise = live_compare(Stored(days, base.queries), "a", "b", LiveThresholds(resamples=200))
    gate = next(row for row in rise["hardGates"] if row["gate"] == "filter_zero_rise")
    # given the 33 seen, equal rates over equal events give Binomial(33, 1/2): P(X >= 30) = 6018 / 2^33
    assert (gate["outcome"], gate["counted"]) == ("fail", 27.0) and gate["p"] == pytest.approx(6018 / 2 ** 33)


def test_too_few_days_or_a_missing_version_is_not_enough_data():
    base = stored(0.0)
    two = {k: v for k, v in base.days.items() if k[0] != DAYS[2]}
    two_q = {k: v for k, v in base.queries.items() if k[0] != DAYS[2]}
    report = live_compare(Stored(two, two_q), "a", "b", LiveThresholds(resamples=200))
    assert metric(report, "top1_score")["outcome"] == "too few days"
    assert report["verdict"] == "not enough data"
    absent = live_compare(base, "a", "zz", LiveThresholds(resamples=200))
    assert absent["verdict"] == "not enough data"
    assert "pipeline version zz has no events in the window" in absent["reasons"]


def test_unpaired_queries_get_a_two_sample_interval():
    base = stored(-0.2)
    queries = {(d, app, v, f"{v}-{q}"): row for (d, app, v, q), row in base.queries.items()}
    report = live_compare(Stored(base.days, queries), "a", "b", LiveThresholds(resamples=200))
    row = metric(report, "top1_score")
    assert row["interval"] == "unpaired" and report["queries"]["pairing"] == "unpaired"
    assert row["delta"] == pytest.approx(-0.2) and row["low"] < -0.2 < row["high"]


def test_two_sample_interval_of_constants_is_the_difference():
    found = two_sample_interval(np.full(5, 1.0), np.full(7, 3.0), PairedSettings(resamples=100))
    assert (found.estimate, found.low, found.high) == pytest.approx((2.0, 2.0, 2.0))
    spread = two_sample_interval(np.array([0.0, 1.0] * 50), np.array([0.0, 1.0] * 50), PairedSettings(resamples=500))
    assert spread.estimate == 0 and spread.low < 0 < spread.high and math.isclose(spread.high, -spread.low, abs_tol=0.05)


def test_versions_by_traffic_orders_by_events():
    assert versions_by_traffic(stored(0.0, n=5).days) == [("a", 15), ("b", 15)]


@cache
def _stream() -> tuple:
    return tuple(facts_of(decode(line).event) for line in traffic.day_lines(0, "leak")[:300])


@given(st.lists(st.integers(0, 300), max_size=6))
@FAST
def test_taken_rows_add_up_to_the_whole_stream_however_it_is_cut(cuts):
    facts = _stream()
    whole = VersionCounts()
    for f in facts:
        whole.observe(f, alone(f))
    want = whole.outbox()
    want.absorb(whole.take())
    counts, got = VersionCounts(), HeldRows()
    for i, f in enumerate(facts):
        if i in cuts:
            got.absorb(counts.take())
        counts.observe(f, alone(f))
    got.absorb(counts.take())
    assert got.days.keys() == want.days.keys() and got.queries.keys() == want.queries.keys()
    for key, row in want.days.items():
        assert {k: v for k, v in got.days[key].items() if k not in MEASURES} == \
               {k: v for k, v in row.items() if k not in MEASURES}
        for name in MEASURES:
            assert got.days[key][name][1] == row[name][1]
            assert got.days[key][name][0] == pytest.approx(row[name][0])


@pytest.mark.parametrize("n_a, n_b", [(500, 5000), (5000, 5000)])
def test_equal_filter_zero_rates_fail_no_more_often_than_alpha(n_a, n_b):
    # 1 % in both: taking the stable rate as exact failed 28 % of such healthy candidates with 5000
    # events against a stable version's 500, 6 % at 5000 against 5000, at alpha 0.01
    rng = np.random.default_rng(7)
    runs, alpha = 4000, 0.01
    ka, kb = rng.binomial(n_a, 0.01, runs), rng.binomial(n_b, 0.01, runs)
    fails = sum(p is not None and p < alpha for p in (filter_zero_p(int(a), n_a, int(b), n_b) for a, b in zip(ka, kb)))
    assert fails / runs <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


def test_one_filter_zero_against_none_in_the_stable_version_is_no_rise():
    base = stored(0.0)
    days = dict(base.days)
    days[(DAYS[0], "shop", "a")] = day_row(1000, 0.5)
    days[(DAYS[0], "shop", "b")] = day_row(1000, 0.5, filter_zero=1)
    report = live_compare(Stored(days, base.queries), "a", "b", LiveThresholds(resamples=200))
    gate = next(row for row in report["hardGates"] if row["gate"] == "filter_zero_rise")
    assert gate["outcome"] == "pass" and gate["p"] == pytest.approx(0.5)  # 1 of 1 seen, even odds


def test_a_stable_version_without_events_is_not_enough_data_not_a_fail():
    base = stored(0.0, filter_zero=2)  # the candidate alone, after full promotion, with filter-caused zeros
    days = {k: v for k, v in base.days.items() if k[2] == "b"}
    queries = {k: v for k, v in base.queries.items() if k[2] == "b"}
    report = live_compare(Stored(days, queries), "a", "b", LiveThresholds(resamples=200))
    gate = next(row for row in report["hardGates"] if row["gate"] == "filter_zero_rise")
    assert gate["outcome"] == "not measured"
    assert report["verdict"] == "not enough data"
    assert "pipeline version a has no events in the window" in report["reasons"]


def days_of(**first_and_events) -> dict:
    """Day rows: version -> (first ISO day with events, events a day[, last ISO day with events]), over DAYS."""
    return {(day, "shop", v): day_row(n, 0.5) for v, (first, n, *last) in first_and_events.items() for day in DAYS
            if first <= day <= (last or [DAYS[-1]])[0]}


def paired(days: dict, history: dict | None = None) -> tuple[str, str] | None:
    found = pair_of(days, history)
    return None if found is None else (found.stable, found.candidate)


def test_automatic_pairing_keeps_the_earlier_version_stable_past_half_the_traffic():
    assert paired(days_of(v1=(DAYS[0], 40), v2=(DAYS[1], 400))) == ("v1", "v2")
    assert paired(days_of(v1=(DAYS[0], 40), v2=(DAYS[0], 400))) == ("v2", "v1")  # same day: more traffic
    # other is many versions and none is no version: neither is paired beside two named ones
    assert paired(days_of(other=(DAYS[0], 900), none=(DAYS[0], 800), v1=(DAYS[0], 40), v2=(DAYS[1], 30))) \
        == ("v1", "v2")
    assert paired(days_of(none=(DAYS[0], 800), v1=(DAYS[1], 40))) == ("none", "v1")
    assert paired(days_of(other=(DAYS[0], 800), v1=(DAYS[1], 40))) is None


def test_the_first_day_is_looked_up_in_the_days_kept_not_only_the_window():
    # v1 launched on DAYS[0], v2 on DAYS[1], both before the window (DAYS[2]); v2 has more traffic.
    history = days_of(v1=(DAYS[0], 40), v2=(DAYS[0], 400))
    history = {k: v for k, v in history.items() if k[0] > DAYS[0] or k[2] == "v1"}
    window = {k: v for k, v in history.items() if k[0] > DAYS[1]}
    assert paired(window) == ("v2", "v1")  # the window alone: a tie broken by traffic
    assert paired(window, history) == ("v1", "v2")
    assert paired(window, {}) == ("v2", "v1")


def test_the_pair_is_of_the_versions_serving_on_the_newest_day_however_many_events_the_others_have():
    # v0 and v1 served the first two days with most of the window's events and stopped; v5 serves,
    # v6 (a canary) launched the last day and v7, older than v6, still serves a little.
    days = days_of(v0=(DAYS[0], 5000, DAYS[1]), v1=(DAYS[0], 4000, DAYS[1]), v5=(DAYS[0], 300),
                   v7=(DAYS[0], 20), v6=(DAYS[2], 30))
    found = pair_of(days)
    assert found is not None and (found.stable, found.candidate) == ("v5", "v6")
    assert found.why == {"chosen": "serving", "day": DAYS[2], "serving": ["v5", "v6", "v7"], "reason": SERVING_RULE}
    # a canary ramped past the stable version that day is still the candidate
    assert paired(days_of(v1=(DAYS[0], 40), v2=(DAYS[2], 400))) == ("v1", "v2")
    # one version serving, however many served before: no pair
    assert paired(days_of(v0=(DAYS[0], 5000, DAYS[1]), v1=(DAYS[0], 40))) is None


def test_the_report_says_which_pair_and_why():
    why = {"chosen": "serving", "day": DAYS[2], "serving": ["a", "b"], "reason": SERVING_RULE}
    report = live_compare(stored(0.0), "a", "b", LiveThresholds(resamples=200), why=why)
    assert report["versions"]["pair"] == why


def test_judged_items_without_a_version_count_as_none():
    key = {"pipeline_version": None, "app": "shop", "query_id": "q1", "cutoff_k": 1, "ts": 1793613600.0}
    chunk = JudgedChunk(chunk="x", chunk_id="c1", parent_id="p1", source="wiki", rank=1, score=0.9, grades={"j": 2}, tags=frozenset(),
                        evidence_groups=frozenset())
    [found] = judged_queries([JudgedItem(key, (chunk,))])
    assert (found.version, found.day) == ("none", "2026-11-02")


def test_material_is_from_daily_means_over_queries_without_the_partial_day_with_a_floor():
    days, queries = {}, {}
    day4 = "2026-11-04"
    for day, busy in zip((*DAYS, day4), (0.5, 0.6, 0.7, 0.0)):
        for v in ("a", "b"):
            days[(day, "shop", v)] = day_row(40, 0.5)
        for q in range(40):
            for v in ("a", "b"):
                queries[(day, "shop", v, f"q{q}")] = query_row(0.5)
        # one busy query a day with 100 events at `busy`: event-weighted daily means would vary,
        # the mean over queries moves by (busy - 0.5) / 41
        row = query_row(busy)
        row.update(events=100, top1_score=[100 * busy, 100])
        queries[(day, "shop", "a", "busy")] = row
    gate = LiveThresholds(resamples=200, min_margin=0.001)
    report = live_compare(Stored(days, queries), "a", "b", gate, partial_from=day4)
    material = next(m for m in report["material"] if m["metric"] == "top1_score")
    means = [(40 * 0.5 + x) / 41 for x in (0.5, 0.6, 0.7)]  # day 4, today, left out
    assert material["days"] == 3 and material["threshold"] == pytest.approx(abs(means[0] - (means[1] + means[2]) / 2))
    flat = next(m for m in report["material"] if m["metric"] == "latency_seconds")
    assert flat["threshold"] is None  # no latency counted
    zero = next(m for m in report["material"] if m["metric"] == "zero_result_rate")
    assert zero["threshold"] == 0.001  # never a zero result: the floor, not 0


def test_a_few_shared_queries_among_many_are_compared_unpaired():
    base = stored(-0.2)  # 120 queries each, all shared
    queries = dict(base.queries)
    for (d, app, v, q), row in base.queries.items():  # 150 more each, served by one version only
        for i in range(2):
            queries[(d, app, v, f"{v}-{q}-{i}")] = row
    report = live_compare(Stored(base.days, queries), "a", "b", LiveThresholds(resamples=200))
    assert report["queries"]["pairing"] == "unpaired"  # 120 shared of 360 each: below half
    report = live_compare(Stored(base.days, queries), "a", "b", LiveThresholds(resamples=200, min_paired_share=0.3))
    assert report["queries"]["pairing"] == "paired"


def test_blocked_resampling_draws_the_same_means(monkeypatch):
    x = np.random.default_rng(3).random(50)
    whole = bootstrap.resampled_means(x, np.random.default_rng(0), resamples=300)[1]
    monkeypatch.setattr(bootstrap, "_BLOCK", 7 * 49)  # seven resamples a block
    blocked = bootstrap.resampled_means(x, np.random.default_rng(0), resamples=300)[1]
    assert np.array_equal(whole, blocked)
    index = np.random.default_rng(0).integers(0, 50, size=(300, 49))  # the draws one array held before
    assert np.allclose(whole, x[index].mean(axis=1))


def test_an_event_dated_beyond_max_future_seconds_is_not_counted():
    state = PartitionState(CoreConfig(max_future_seconds=3600), live_gate=LiveConfig())
    written = facts_of(decode(event(1)).event).ts  # 2026-11-02T10:00
    state.ingest(decode(event(1)).event, now=written)
    state.ingest(decode(event(2)).event, now=written - 3600)  # an hour ahead: allowed
    state.ingest(decode(event(3)).event, now=written - 3601)  # beyond: a wrong clock
    days, queries = state.feature("live_gate").take()
    assert days[("2026-11-02", "shop", "v1")]["events"] == 2
    assert queries[("2026-11-02", "shop", "v1", "query-aaaa")]["events"] == 2


def test_versions_learned_on_one_day_are_forgotten_on_the_next():
    day2 = "2026-11-03T10:00:00Z"
    lines = [event(i, version=f"v{i}") for i in range(3)]
    lines += [orjson.dumps({**orjson.loads(event(9, version="canary")), "ts": day2})]
    held = fold(lines, LiveConfig(max_versions=2))
    assert sorted((d, v) for d, _, v in held.days) == [
        ("2026-11-02", OTHER), ("2026-11-02", "v0"), ("2026-11-02", "v1"), ("2026-11-03", "canary")]


def test_events_dated_before_the_days_held_learn_no_names():
    # Nine days, each new day dated earlier than the last: from the ninth the oldest held day is
    # later than the event's, so its versions are `other` and the names stay within 8 days x 2.
    lines = []
    for d in range(12):
        ts = f"2026-11-{20 - d:02d}T10:00:00Z"
        lines += [orjson.dumps({**orjson.loads(event(10 * d + i, version=f"d{d}v{i}")), "ts": ts})
                  for i in range(3)]
    held = fold(lines, LiveConfig(max_versions=2))
    named = {v for _, _, v in held.days if v != OTHER}
    assert len(named) == 16 and {d for d, _, _ in held.days} == {f"2026-11-{20 - d:02d}" for d in range(12)}
    assert {v for d, _, v in held.days if d < "2026-11-13"} == {OTHER}


def at(i: int, version: str, ts: str, app: str = "shop") -> bytes:
    return orjson.dumps({**orjson.loads(event(i, version=version)), "ts": ts, "app": app})


def counted(lines, config: LiveConfig) -> tuple[dict, dict]:
    """The rows of the lines through a partition's state: its windows' watermark is the partition's time."""
    state = PartitionState(CoreConfig(), live_gate=config)
    for line in lines:
        state.ingest(decode(line).event)
    return state.feature("live_gate").take()


def test_each_app_has_its_own_places_for_versions():
    lines = [at(0, "v0", TS), at(1, "v1", TS), at(2, "docs-1", TS, app="docs"), at(3, "v2", TS)]
    held = fold(lines, LiveConfig(max_versions=2))
    assert sorted((app, v) for _, app, v in held.days) == [("docs", "docs-1"), ("shop", OTHER), ("shop", "v0"),
                                                           ("shop", "v1")]


def test_a_version_without_an_event_for_an_hour_gives_its_place_to_a_new_one_and_keeps_its_rows():
    # v0 and v1 take the app's two places at 09:00; v1 stops. The canary launched at 09:30 waits in
    # `other`; at 10:00 v1 has had no event for an hour (by the partition's newest event time), so the
    # canary takes its place. v1 coming back finds no place free (v0 and the canary serve); at 11:31 the
    # canary has had none for an hour, and v1 takes its place: its rows under its name add up.
    lines = [at(0, "v0", "2026-11-02T09:00:00Z"), at(1, "v1", "2026-11-02T09:00:00Z"),
             at(2, "canary", "2026-11-02T09:30:00Z"), at(3, "v0", "2026-11-02T09:59:59Z"),
             at(4, "canary", "2026-11-02T09:59:59Z"), at(5, "v0", "2026-11-02T10:00:00Z"),
             at(6, "canary", "2026-11-02T10:00:00Z"), at(7, "canary", "2026-11-02T08:00:00Z"),
             at(8, "v1", "2026-11-02T10:30:00Z"), at(9, "v0", "2026-11-02T11:31:00Z"),
             at(10, "v1", "2026-11-02T11:31:00Z")]
    days, queries = counted(lines, LiveConfig(max_versions=2))
    events = {v: row["events"] for (_, _, v), row in days.items()}
    assert events == {"v0": 4, "v1": 2, OTHER: 3, "canary": 2}  # every event counted once, each under one name
    assert sum(row["events"] for row in queries.values()) == len(lines)


def test_a_place_is_freed_on_the_partitions_current_day_only():
    # The partition's time is on 11-03: late events of 11-02 find its places as they were.
    lines = [at(0, "v0", "2026-11-02T09:00:00Z"), at(1, "v1", "2026-11-02T09:00:00Z"),
             at(2, "v2", "2026-11-03T12:00:00Z"), at(3, "canary", "2026-11-02T23:00:00Z")]
    days, _ = counted(lines, LiveConfig(max_versions=2))
    assert sorted((d, v) for d, _, v in days) == [
        ("2026-11-02", OTHER), ("2026-11-02", "v0"), ("2026-11-02", "v1"), ("2026-11-03", "v2")]
