"""Daily drift counts per partition: additive deltas, by UTC day of the event time."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.drift import DEFAULT_GRIDS, FEATURES, Counts
from agent.core.drift.days import RECENT, RECENT_SLOTS, SLOT, DriftConfig, DriftDays, counts_of, merge, window
from agent.core.facts import facts_of
from agent.core.feature import alone
from agent.core.partitions import Outbox
from agent.core.state import PartitionState
from agent.synth import generate
from tests.core.test_properties import FAST

# 30 minutes either side of midnight UTC: the stream crosses a day.
START = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
LINES = list(generate(300, seed=3, start=START, rate=300 / 3600))
FACTS = [facts_of(decode(line).event) for line in LINES]


def whole(facts) -> dict:
    days = DriftDays()
    for f in facts:
        days.observe(f, alone(f))
    return days.take()


@FAST
@given(st.lists(st.integers(min_value=1, max_value=len(FACTS) - 1), max_size=8), st.integers(1, 64))
def test_deltas_add_up_to_the_whole_stream_however_it_is_cut(cuts, fold_every):
    days = DriftDays(fold_every=fold_every)  # folding early changes nothing
    total: dict = {}
    for i, f in enumerate(FACTS):
        days.observe(f, alone(f))
        if i in cuts:
            merge(total, days.take())
    merge(total, days.take())
    assert total == whole(FACTS)
    assert days.take() == {}


def test_counts_are_by_utc_day_of_the_event_and_app():
    rows = whole(FACTS)
    expected = {(f.event.ts.astimezone(UTC).date().isoformat(), f.event.app) for f in FACTS}
    assert {(day, app) for day, app, _ in rows} == expected
    assert {day for day, _ in expected} == {"2026-03-01", "2026-03-02"}
    for day, app in expected:
        mine = [f for f in FACTS if (f.event.ts.astimezone(UTC).date().isoformat(), f.event.app) == (day, app)]
        counts = rows[(day, app, "result_count")]
        assert sum(counts.values()) == len(mine)
        assert sum(rows[(day, app, "query_type")].values()) == len(mine)
        top1 = [f.top1 for f in mine if f.top1 is not None]
        assert counts_of(rows)[day][app].numeric["top1_score"] == {
            int(i): int(n) for i, n in enumerate(DEFAULT_GRIDS["top1_score"].histogram(top1)) if n}
        ages = [a for f in mine for a in f.ages]
        assert sum(rows[(day, app, "content_age_days")].values()) == len(ages)
        sources = sum(sum(f.sources.values()) for f in mine)
        assert sum(rows[(day, app, "source")].values()) == sources


def test_cells_match_the_grid_index_and_mixes_name_their_categories():
    f = FACTS[0]
    rows = whole([f])
    day = f.event.ts.astimezone(UTC).date().isoformat()
    app = f.event.app
    assert rows[(day, app, "latency_seconds")] == {DEFAULT_GRIDS["latency_seconds"].index(f.event.latency_ms / 1000): 1}
    assert rows[(day, app, "result_count")] == {DEFAULT_GRIDS["result_count"].index(len(f.event.results)): 1}
    assert rows[(day, app, "query_type")] == {f.event.query.type or "unknown": 1}
    assert rows[(day, app, "filter_outcome")] == dict(
        _tally(f"{x.name}:{x.status}" for x in f.event.filters))


def test_window_sums_days_per_app():
    rows = whole(FACTS)
    summed = window(counts_of(rows))
    for app, counts in summed.items():
        assert sum(counts.numeric["result_count"].values()) == sum(f.event.app == app for f in FACTS)
        assert set(counts.numeric) <= set(FEATURES)


def test_partition_state_feeds_the_outbox_and_a_failed_checkpoint_keeps_it():
    state = PartitionState(CoreConfig(), drift=DriftConfig())
    box = Outbox()
    for line in LINES[:100]:
        state.process(line)
    box.take(state)  # a checkpoint that fails: the outbox is not cleared
    for line in LINES[100:]:
        state.process(line)
    box.take(state)
    assert box.held["drift"] == whole(FACTS)
    box.clear()
    assert box.held["drift"] == {}
    assert "drift" not in PartitionState(CoreConfig()).features


def _tally(keys) -> dict:
    out: dict = {}
    for k in keys:
        out[k] = out.get(k, 0) + 1
    return out


@FAST
@given(st.lists(st.integers(min_value=1, max_value=len(FACTS) - 1), max_size=8), st.integers(0, len(FACTS) - 1))
def test_recent_windows_sum_the_slots_they_cover_taken_or_not(cuts, at):
    days = DriftDays(fold_every=7)
    for i, f in enumerate(FACTS):
        days.observe(f, alone(f))
        if i in cuts:
            days.take()
    now = FACTS[at].ts
    found = days.recent(now)
    assert set(found) == {name for name, _ in RECENT}
    for name, seconds in RECENT:
        last = int(now // SLOT) - 1  # whole slots only
        inside = [f for f in FACTS if last - seconds // SLOT < int(f.ts // SLOT) <= last]
        expected = window(counts_of(whole(inside)))  # the sub-day windows hold no query sample
        assert found[name] == {app: Counts(c.numeric, c.mixes, grids=c.grids) for app, c in expected.items()}, name


def test_the_ring_keeps_only_the_newest_hour_of_slots():
    days = DriftDays()
    for f in FACTS:
        days.observe(f, alone(f))
        days.take()
    assert {slot for slot, _ in days._ring} == set(range(int(FACTS[-1].ts // SLOT) - RECENT_SLOTS + 1,
                                                        int(FACTS[-1].ts // SLOT) + 1)) & {int(f.ts // SLOT) for f in FACTS}
