"""Event-time windows: minute buckets, rolling windows, lateness, eviction, bounds."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import orjson
import pytest

from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.labels import OTHER
from agent.core.state import PartitionState, sums

T0 = 1710158400  # 2024-03-11T12:00:00Z, a whole minute
APP = "app"


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


_ids = iter(range(10**9))


def ev(t: float, results=None, **extra) -> dict:
    doc = {
        "schema": "retrieval.v1",
        "event_id": f"w-{next(_ids)}",
        "ts": iso(t),
        "app": APP,
        "query": {"id": "q0000000"},
        "principal": {"tenant": "t1", "groups": []},
        "cutoff_k": 3,
        "results": [{"chunk_id": "c", "parent_id": "p", "source": "s", "rank": 1, "score": 0.5}]
        if results is None
        else results,
    }
    doc.update(extra)
    return doc


def feed(state: PartitionState, *docs: dict) -> PartitionState:
    for doc in docs:
        state.process(orjson.dumps(doc))
    return state


def retrievals(tally: dict) -> float:
    return sum(v for k, v in tally.items() if k[0] == "retrievals")


def assert_tallies_equal(a: dict, b: dict) -> None:
    """Same keys; counts exactly equal, float sums equal up to summation order."""
    assert set(a) == set(b)
    for key in a:
        if key[0].endswith("_sum"):
            assert math.isclose(a[key], b[key], rel_tol=1e-9, abs_tol=1e-9), key
        else:
            assert a[key] == b[key], key


# --------------------------------------------------------------------------- buckets


def test_minute_buckets():
    state = feed(
        PartitionState(CoreConfig()),
        ev(T0 + 5),
        ev(T0 + 59.999),
        ev(T0 + 60),
        ev(T0 + 210),
        ev(T0 + 30),  # back in the first minute, within lateness
    )
    m = T0 // 60
    buckets = state.windows.buckets
    assert sorted(buckets) == [m, m + 1, m + 3]
    assert retrievals(buckets[m]) == 3
    assert retrievals(buckets[m + 1]) == 1
    assert retrievals(buckets[m + 3]) == 1
    assert state.windows.watermark == T0 + 210
    assert state.windows.head == m + 3


def test_bucket_of_an_offset_timestamp_is_its_utc_minute():
    state = PartitionState(CoreConfig())
    doc = ev(0)
    doc["ts"] = "2024-03-11T17:31:30+05:30"  # 12:01:30Z
    feed(state, doc)
    assert list(state.windows.buckets) == [T0 // 60 + 1]


# --------------------------------------------------------------------------- rolling windows


def test_rolling_windows_at_now():
    config = CoreConfig()
    state = PartitionState(config)
    # one event per minute, 30 s into each, for 70 minutes
    feed(state, *(ev(T0 + 60 * i + 30) for i in range(70)))
    last = T0 + 60 * 69 + 30
    assert retrievals(state.windows.window(300, last)) == 5
    assert retrievals(state.windows.window(3600, last)) == 60
    assert retrievals(state.windows.window(86400, last)) == 70
    assert retrievals(state.totals()) == 70
    # three minutes later, the 5 m window holds only the last two minutes
    assert retrievals(state.windows.window(300, last + 180)) == 2
    # a window ending in the past leaves out what came after `now`
    assert retrievals(state.windows.window(300, T0 + 60 * 9 + 59)) == 5  # minutes 5..9
    assert retrievals(state.windows.window(3600, T0 + 60 * 9)) == 10  # minutes 0..9
    assert retrievals(state.windows.window(300, T0 - 1)) == 0
    snap = sums(config, [state], last)
    assert set(snap) == {"totals", "5m", "1h", "24h"}
    assert [retrievals(snap[n]) for n in ("totals", "5m", "1h", "24h")] == [70, 5, 60, 70]


def test_window_carries_every_family_of_its_events():
    state = PartitionState(CoreConfig())
    feed(state, ev(T0, results=[]), ev(T0 + 600, latency_ms=100))
    recent = state.windows.window(300, T0 + 600)
    assert recent[("retrievals", APP)] == 1
    assert ("zero_result_retrievals", APP) not in recent
    assert recent[("retrieval_latency_seconds_count", APP)] == 1
    assert state.totals()[("zero_result_retrievals", APP)] == 1


# --------------------------------------------------------------------------- lateness


def test_allowed_lateness_boundary():
    config = CoreConfig(lateness_seconds=300)
    state = PartitionState(config)
    feed(
        state,
        ev(T0 + 1000),
        ev(T0 + 700),  # exactly watermark - lateness: on time
        ev(T0 + 699, results=[]),  # older: late
    )
    t = state.totals()
    assert retrievals(t) == 3
    assert t[("late_events",)] == 1
    assert t[("zero_result_retrievals", APP)] == 1  # the late event's metrics are in the totals
    window = state.windows.window(86400, T0 + 1000)
    assert retrievals(window) == 2
    assert ("zero_result_retrievals", APP) not in window
    assert ("late_events",) not in window


def test_watermark_is_the_newest_event_time():
    state = PartitionState(CoreConfig(lateness_seconds=300))
    feed(state, ev(T0 + 1000), ev(T0 + 900), ev(T0 + 2000), ev(T0 + 1700), ev(T0 + 1699), ev(T0 + 900))
    assert state.windows.watermark == T0 + 2000
    assert state.totals()[("late_events",)] == 2
    assert retrievals(state.windows.window(86400, T0 + 2000)) == 4


def test_zero_lateness():
    state = PartitionState(CoreConfig(lateness_seconds=0))
    feed(state, ev(T0 + 100), ev(T0 + 100), ev(T0 + 99.5))
    assert state.totals()[("late_events",)] == 1
    assert retrievals(state.windows.window(3600, T0 + 100)) == 2


# --------------------------------------------------------------------------- eviction and memory


def _stream(n: int, seed: int, jitter: float) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        t = T0 + 60 * i + rng.uniform(-jitter, jitter)
        results = [
            {
                "chunk_id": f"c{r}",
                "parent_id": f"p{rng.randrange(3)}",
                "source": f"s{rng.randrange(4)}",
                "rank": r,
                "score": rng.random(),
                "effective_date": "2024-01-01",
            }
            for r in range(1, rng.randrange(0, 5) + 1)
        ]
        docs.append(ev(t, results=results, latency_ms=rng.uniform(0, 2000)))
    return docs


def test_eviction_keeps_totals_exact_and_buckets_bounded():
    config = CoreConfig(windows=(("5m", 300),), lateness_seconds=60)
    assert config.horizon_buckets == 7
    # The same stream into a state whose horizon is longer than the stream: nothing is evicted.
    wide = CoreConfig(windows=(("5m", 300), ("1d", 86400)), lateness_seconds=60)
    docs = _stream(600, seed=1, jitter=150)  # jitter beyond the lateness makes some late
    state, reference = PartitionState(config), PartitionState(wide)
    for doc in docs:
        raw = orjson.dumps(doc)
        state.process(raw)
        reference.process(raw)
        assert len(state.windows.buckets) <= config.horizon_buckets
    assert state.windows.retired  # something was evicted
    assert retrievals(state.totals()) == len(docs)
    assert state.totals()[("late_events",)] == reference.totals()[("late_events",)] > 0
    assert_tallies_equal(state.totals(), reference.totals())
    # windows inside the horizon are unaffected by eviction
    now = state.windows.watermark
    assert state.windows.window(300, now) == reference.windows.window(300, now)


@pytest.mark.parametrize("lateness", [0, 59, 61, 300, 1000])
def test_bucket_count_never_exceeds_horizon(lateness):
    config = CoreConfig(windows=(("5m", 300), ("15m", 900)), lateness_seconds=lateness)
    state = PartitionState(config)
    rng = random.Random(lateness)
    t = T0
    for _ in range(3000):
        t += rng.expovariate(1 / 20)  # about three events a minute, with gaps
        ts = t - rng.uniform(0, lateness * 1.2)  # many near the lateness edge
        feed(state, ev(ts))
        assert len(state.windows.buckets) <= config.horizon_buckets
    assert retrievals(state.totals()) == 3000


def test_gap_in_time_retires_everything_old():
    config = CoreConfig(windows=(("5m", 300),), lateness_seconds=0)
    state = feed(PartitionState(config), *(ev(T0 + 60 * i) for i in range(5)), ev(T0 + 86400))
    assert list(state.windows.buckets) == [(T0 + 86400) // 60]
    assert retrievals(state.totals()) == 6


def test_what_a_round_added_counts_each_event_once():
    """`take_added` returns what the events since the last call added, late
    events and a gap that retires the round's own buckets included: the rounds
    sum to the totals."""
    config = CoreConfig(windows=(("5m", 300),), lateness_seconds=60)
    state = feed(PartitionState(config), *(ev(T0 + 30 * i) for i in range(6)))
    rounds = [state.take_added()]
    assert retrievals(rounds[0]) == 6
    # One round: a late event (into the retired tally), then a day's gap that
    # retires every bucket written so far, this round's included.
    feed(state, ev(T0 + 200), ev(T0 + 10), ev(T0 + 86400), ev(T0 + 86400 + 5))
    rounds.append(state.take_added())
    assert retrievals(rounds[1]) == 4 and rounds[1][("late_events",)] == 1
    assert state.take_added() == {}  # nothing since
    summed: dict = {}
    for added in rounds:
        for key, value in added.items():
            summed[key] = summed.get(key, 0) + value
    assert_tallies_equal(summed, state.totals())


# --------------------------------------------------------------------------- label bounds


def test_first_n_label_values_then_other():
    config = CoreConfig(max_label_values=3)
    state = PartitionState(config)
    docs = [
        ev(
            T0,
            results=[{"chunk_id": "c", "parent_id": "p", "source": f"s{i}", "rank": 1, "score": 0.5}],
            filters=[{"name": f"f{i}", "status": "applied", "removed": 1}],
            query={"id": "q0000000", "type": f"type{i}", "language": "l" + "abcdefghij"[i]},
        )
        for i in range(10)
    ]
    feed(state, *docs, *docs)  # the second pass sees only admitted or folded values
    t = state.totals()
    assert {k[2]: v for k, v in t.items() if k[0] == "admitted_results"} == {"s0": 2, "s1": 2, "s2": 2, OTHER: 14}
    assert {k[1] for k in t if k[0] == "filter_outcomes"} == {"f0", "f1", "f2", OTHER}
    assert {k[2] for k in t if k[0] == "query_type_retrievals"} == {"type0", "type1", "type2", OTHER}
    assert {k[1] for k in t if k[0] == "query_language_retrievals"} == {"la", "lb", "lc", OTHER}
    assert all(len(labels.seen) <= 3 for labels in state.labels.values())


def test_fixed_label_lists_fold_the_rest_into_other():
    config = CoreConfig(label_values={"query_type": ("lexical", "paraphrase"), "app": ("app",)})
    state = PartitionState(config)
    feed(
        state,
        ev(T0, query={"id": "q0000000", "type": "lexical"}),
        ev(T0, query={"id": "q0000000", "type": "multi_hop"}),
        ev(T0, query={"id": "q0000000"}),  # "unknown" is not in the fixed list either
        ev(T0, app="other-app"),
    )
    t = state.totals()
    assert {k[1:]: v for k, v in t.items() if k[0] == "query_type_retrievals"} == {
        ("app", "lexical"): 1,
        ("app", OTHER): 2,
        (OTHER, OTHER): 1,
    }
    assert t[("retrievals", OTHER)] == 1
    assert not state.labels["query_type"].seen  # a fixed list learns nothing


def test_label_values_stay_bounded_on_a_long_stream():
    config = CoreConfig(max_label_values=5)
    state = PartitionState(config)
    rng = random.Random(7)
    for i in range(2000):
        feed(
            state,
            ev(
                T0 + i,
                app=f"app{rng.randrange(50)}",
                results=[
                    {"chunk_id": "c", "parent_id": "p", "source": f"src{rng.randrange(500)}", "rank": 1, "score": 0.1}
                ],
            ),
        )
    t = state.totals()
    positions = {"retrievals": 1, "admitted_results": 2}
    for name, pos in positions.items():
        values = {k[pos] for k in t if k[0] == name}
        assert len(values) <= config.max_label_values + 1
        assert OTHER in values
    assert retrievals(t) == 2000


def _naive(windows, first: int, last: int) -> dict:
    out: dict = {}
    for index in sorted(windows.buckets):
        if first <= index <= last:
            for key, value in windows.buckets[index].items():
                out[key] = out.get(key, 0) + value
    return out


def _close(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in a)


def test_sealed_hour_sums_equal_minute_by_minute_sums():
    """Hours summed once and remembered give the same windows and totals."""
    config = CoreConfig(windows=(("5m", 300), ("1h", 3600), ("3h", 10800)), lateness_seconds=120)
    state = PartitionState(config)
    rng = random.Random(3)
    t = T0 + 17  # not aligned to an hour
    for _ in range(2500):
        t += rng.uniform(0, 9)
        jitter = rng.choice([0, 0, 0, -60, -200])  # some late, some within lateness
        state.ingest(decode(orjson.dumps(ev(t + jitter))).event)
        if rng.random() < 0.02:
            windows = state.windows
            naive_total = dict(windows.retired)
            for key, value in _naive(windows, min(windows.buckets), windows.head).items():
                naive_total[key] = naive_total.get(key, 0) + value
            assert _close(state.totals(), naive_total)
            for _, seconds in config.windows:
                last = int(t // 60)
                assert _close(windows.window(seconds, t), _naive(windows, last - seconds // 60 + 1, last))
    assert state.windows._blocks, "long streams use remembered hour sums"
    restored = PartitionState.from_dict(config, orjson.loads(orjson.dumps(state.to_dict())))
    assert restored.totals() == state.totals()


def test_an_event_far_ahead_of_its_write_time_stays_out_of_the_windows():
    """One producer with a wrong clock must not make every later event late."""
    state = PartitionState(CoreConfig(max_future_seconds=600))
    state.ingest(decode(orjson.dumps(ev(T0))).event, now=T0)
    state.ingest(decode(orjson.dumps(ev(T0 + 10**8))).event, now=T0 + 1)  # years ahead
    state.ingest(decode(orjson.dumps(ev(T0 + 30))).event, now=T0 + 30)
    totals = state.totals()
    assert totals[("future_events",)] == 1 and totals[("retrievals", APP)] == 3
    assert "late_events" not in {k[0] for k in totals}
    assert state.windows.watermark == T0 + 30
    assert state.windows.window(300, T0 + 30)[("retrievals", APP)] == 2
    # Without a write time (replay of a file) the event time is taken as it is.
    replayed = PartitionState(CoreConfig(max_future_seconds=600))
    replayed.ingest(decode(orjson.dumps(ev(T0 + 10**8))).event)
    assert replayed.windows.watermark == T0 + 10**8


def test_an_event_a_little_ahead_does_not_make_later_events_late():
    """Within the allowed skew the event counts, but the watermark stops at its write time."""
    state = PartitionState(CoreConfig(lateness_seconds=300, max_future_seconds=3600))
    state.ingest(decode(orjson.dumps(ev(T0 + 600))).event, now=T0)  # ten minutes ahead
    for i in range(1, 31):
        state.ingest(decode(orjson.dumps(ev(T0 + i))).event, now=T0 + i)
    totals = state.totals()
    assert totals[("retrievals", APP)] == 31 and ("late_events",) not in totals
    assert state.windows.watermark == T0 + 30
    assert state.windows.window(300, T0 + 30)[("retrievals", APP)] == 30
    assert state.windows.window(900, T0 + 600)[("retrievals", APP)] == 31
