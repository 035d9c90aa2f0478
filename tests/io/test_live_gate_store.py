"""The live gate's store and periodic evaluation: retention by the clock, the query cap applied before rows load,
the newest day of an app, one app's failure leaving the others judged; its settings' checks."""

from __future__ import annotations

import tracemalloc
import zlib
from datetime import UTC, datetime

import pytest

from agent.core.compare.live import HeldRows, empty_row
from agent.core.compare.live_verdict import LiveThresholds
from agent.io.background import live_gate as live_gate_watch
from agent.io.background.live_gate import LiveGateCollector, LiveGateWatch, judge_apps
from agent.io.background.periodic import new_scheduler
from agent.io.features import tables_of
from agent.io.store.database import Checkpoint, Store
from agent.io.store.live_gate import LiveGateStore
from agent.service import FEATURES
from tests.io.test_settings import error
from tests.test_cli import one_line_error, run
from tests.test_live_gate_cli import config, held, write

GROUP = "ragdrift"
NOON = datetime(2026, 11, 6, 12, tzinfo=UTC).timestamp()


def rows(days: dict, queries: dict) -> HeldRows:
    out = HeldRows()
    for key, events in days.items():
        out.days[key] = {**empty_row(), "events": events}
    for qkey in queries:
        out.queries[qkey] = {**empty_row(labels=True), "events": 1}
    return out


@pytest.fixture
def gate(url):
    with Store(url, None, tables_of(FEATURES)) as store:
        yield LiveGateStore(store, retention_days=2, clock=lambda: NOON)


def save(gate: LiveGateStore, found: HeldRows, offset: int = 1) -> None:
    gate.store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=offset, state={})],
                    [gate.writes(GROUP, [found])])


def test_a_day_written_ahead_of_the_clock_moves_no_retention_cutoff(gate):
    save(gate, rows({("2026-11-04", "shop", "a"): 1, ("2027-01-01", "shop", "a"): 1},
                    {("2026-11-04", "shop", "a", "q1"): 1, ("2026-11-05", "shop", "a", "q2"): 1}))
    queries = gate.stored(GROUP, "2026-01-01", "2027-12-31")[1]
    assert sorted(queries) == [("2026-11-04", "shop", "a", "q1"), ("2026-11-05", "shop", "a", "q2")]
    save(gate, rows({("2026-11-06", "shop", "a"): 1}, {}), 2)  # today: 11-04 is two days back, kept
    assert len(gate.stored(GROUP, "2026-01-01", "2027-12-31")[1]) == 2


def test_the_query_cap_keeps_the_lowest_hashes_of_each_version_at_its_own_cut(gate):
    # A large stable version and a small canary: the canary keeps all its queries, the stable its 20
    # lowest; under the lower cut (the stable's) both keep every query they share.
    ids = {"a": [f"q{i}" for i in range(200)], "b": [f"q{i}" for i in range(0, 200, 12)]}
    save(gate, rows({("2026-11-05", "shop", v): 50 for v in ids},
                    {("2026-11-05", "shop", v, q): 1 for v, found in ids.items() for q in found}))
    crc = {q: zlib.crc32(q.encode()) for found in ids.values() for q in found}
    queries = gate.stored(GROUP, "2026-11-05", "2026-11-05", "shop", ("a", "b"), max_queries=20)[1]
    kept = {v: {q for (_, _, ver, q) in queries if ver == v} for v in ids}
    assert kept["a"] == set(sorted(ids["a"], key=crc.get)[:20]) and kept["b"] == set(ids["b"])
    cut = max(crc[q] for q in kept["a"])
    assert {q for q in kept["b"] if crc[q] <= cut} <= kept["a"]
    assert len(gate.stored(GROUP, "2026-11-05", "2026-11-05", "shop", ("a", "b"), max_queries=300)[1]) == 217


def test_the_query_cap_streams_the_ids_past_a_bounded_heap(gate):
    # 30 000 distinct ids held at once take megabytes; the ids streamed past a heap of 10 per version
    # take a fraction of that (the stream's buffer), whatever the window holds.
    save(gate, rows({("2026-11-05", "shop", "a"): 1},
                    {("2026-11-05", "shop", "a", f"query-{i:08d}"): 1 for i in range(30_000)}))
    tracemalloc.start()
    try:
        queries = gate.query_rows(GROUP, "2026-11-05", "2026-11-05", "shop", ("a", "b"), max_queries=10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(queries) == 10 and peak < 2_000_000


def test_day_rows_past_the_retention_are_deleted_as_query_rows_are(gate):
    save(gate, rows({("2026-11-03", "shop", "a"): 1, ("2026-11-04", "shop", "a"): 1, ("2026-11-06", "shop", "a"): 1},
                    {("2026-11-03", "shop", "a", "q1"): 1}))
    days, queries = gate.stored(GROUP, "2026-01-01", "2027-12-31")
    assert sorted(day for day, _, _ in days) == ["2026-11-04", "2026-11-06"] and not queries


def test_the_newest_day_is_of_the_app_and_not_after_until(gate):
    save(gate, rows({("2026-11-04", "shop", "a"): 1, ("2026-11-05", "docs", "a"): 1,
                     ("2027-01-01", "shop", "a"): 1}, {}))
    assert gate.last_day(GROUP) == "2027-01-01"
    assert gate.last_day(GROUP, "shop", until="2026-11-06") == "2026-11-04"
    assert gate.last_day(GROUP, "docs") == "2026-11-05"


def failing(monkeypatch, app: str) -> None:
    """The evaluation of `app` raises (a bug): a damaged row no longer does, it is skipped."""
    compare = live_gate_watch.live_compare

    def evaluate(stored, *args, **kwargs):
        if any(key[1] == app for key in stored.days):
            raise ValueError("an evaluation that fails")
        return compare(stored, *args, **kwargs)

    monkeypatch.setattr(live_gate_watch, "live_compare", evaluate)


def test_one_apps_failure_leaves_the_others_judged_and_is_counted(gate, monkeypatch):
    found = rows({(d, app, v): 40 for d in ("2026-11-04", "2026-11-05") for app in ("docs", "shop")
                  for v in ("a", "b")}, {})
    save(gate, found)
    failing(monkeypatch, "docs")
    failed = []
    judged = judge_apps(gate, GROUP, "2026-11-01", "2026-11-06", LiveThresholds(resamples=100), ("a", "b"), 50,
                        failed=lambda app, exc: failed.append((app, type(exc))))
    assert [j.app for j in judged] == ["shop"] and failed == [("docs", ValueError)]
    watch = LiveGateWatch(gate, GROUP, LiveThresholds(resamples=100), window_days=7, versions=("a", "b"),
                          refresh_seconds=60.0, clock=lambda: NOON,
                          top_n=50, scheduler=new_scheduler())
    watch.reload()
    metrics = {m.name: m for m in LiveGateCollector(watch).collect()}
    assert [s.value for s in metrics["ragdrift_live_gate_evaluation_errors"].samples if s.name.endswith("_total")] == [1]
    assert metrics["ragdrift_live_gate_refresh_seconds"].samples[0].value == 60.0
    assert metrics["ragdrift_live_gate_last_evaluation_timestamp_seconds"].samples[0].value == NOON


def test_an_app_whose_evaluation_fails_keeps_its_last_figures(gate, monkeypatch):
    save(gate, rows({(d, app, v): 40 for d in ("2026-11-04", "2026-11-05") for app in ("docs", "shop")
                     for v in ("a", "b")}, {}))
    watch = LiveGateWatch(gate, GROUP, LiveThresholds(resamples=100), window_days=7, versions=("a", "b"),
                          refresh_seconds=60.0, clock=lambda: NOON,
                          top_n=50, scheduler=new_scheduler())
    watch.reload()
    before = {j.app: j for j in watch.comparisons}
    failing(monkeypatch, "docs")
    watch.reload()
    assert [j.app for j in watch.comparisons] == ["docs", "shop"] and watch.comparisons[0] is before["docs"]
    assert watch.errors == 1
    verdicts = [s for m in LiveGateCollector(watch).collect() if m.name == "ragdrift_live_gate_verdict"
                for s in m.samples if s.value == 1]
    assert {s.labels["app"] for s in verdicts} == {"docs", "shop"}


def test_a_window_longer_than_the_retention_is_refused(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/w.db"
    write(url, held("equivalent"))
    path = config(tmp_path, url, retention_days=3, window_days=3)
    status, _, err = run(capsys, "compare", "--live", "--pipeline", "stable", "--pipeline", "canary",
                         "--from", "2026-11-01", "--to", "2026-11-06", "--config", path)
    assert status == 2 and "is 6 days, longer than live_gate.retention_days 3" in one_line_error(err)


@pytest.mark.parametrize("value", ["other", "none", "v\x01"])
def test_a_configured_version_must_be_one_events_can_name(tmp_path, value):
    message = error(tmp_path, f"live_gate: {{stable: {value!r}, candidate: v2}}\n".replace("'", '"'))
    assert message.startswith("live_gate.stable: "), message


def test_the_stable_version_is_the_first_seen_in_the_days_kept_after_the_window_moves(gate):
    save(gate, rows({**{(d, "shop", "v1"): 40 for d in ("2026-11-04", "2026-11-05", "2026-11-06")},
                     **{(d, "shop", "v2"): 400 for d in ("2026-11-05", "2026-11-06")}}, {}))
    [found] = judge_apps(gate, GROUP, "2026-11-06", "2026-11-06", LiveThresholds(resamples=100), None, 50)
    assert (found.stable, found.candidate) == ("v1", "v2")


def test_apps_beyond_top_n_are_judged_together_as_other_on_every_family(gate):
    # Seven apps, top_n 3: the three with most events keep their own series, the four others' rows are
    # judged as one app `other`, and every live gate family carries those four app values, no more.
    sizes = {f"app{i}": 100 - 10 * i for i in range(7)}
    save(gate, rows({(d, app, v): n for d in ("2026-11-04", "2026-11-05") for app, n in sizes.items()
                     for v in ("a", "b")}, {("2026-11-05", app, v, "q1"): 1 for app in sizes for v in ("a", "b")}))
    watch = LiveGateWatch(gate, GROUP, LiveThresholds(resamples=100), window_days=7, versions=("a", "b"),
                          refresh_seconds=60.0, clock=lambda: NOON,
                          top_n=3, scheduler=new_scheduler())
    watch.reload()
    apps = {m.name: {s.labels["app"] for s in m.samples} for m in LiveGateCollector(watch).collect()
            if m.name in ("ragdrift_live_gate_verdict", "ragdrift_live_gate_hard_failures", "ragdrift_live_gate_events")}
    assert len(apps) == 3 and all(found == {"app0", "app1", "app2", "other"} for found in apps.values())
    events = {(s.labels["app"], s.labels["pipeline_version"]): s.value for m in LiveGateCollector(watch).collect()
              if m.name == "ragdrift_live_gate_events" for s in m.samples}
    assert events[("other", "a")] == 2 * sum(n for app, n in sizes.items() if app >= "app3")
    other = next(j for j in watch.comparisons if j.app == "other")
    assert other.report["queries"]["onlyInBaseline"]["count"] == 0 and other.report["versions"]["a"]["events"] == 2 * 220


def test_without_configured_versions_the_versions_serving_are_paired_and_the_report_says_why(gate):
    # v0 and v1 had most events but stopped the day before; v5 and the canary v6 serve today.
    save(gate, rows({**{(d, "shop", v): 900 for d in ("2026-11-04", "2026-11-05") for v in ("v0", "v1")},
                     **{(d, "shop", "v5"): 100 for d in ("2026-11-04", "2026-11-05", "2026-11-06")},
                     ("2026-11-06", "shop", "v6"): 10}, {}))
    [found] = judge_apps(gate, GROUP, "2026-11-01", "2026-11-06", LiveThresholds(resamples=100), None, 50)
    assert (found.stable, found.candidate) == ("v5", "v6")
    assert found.report["versions"]["pair"]["chosen"] == "serving"
    assert found.report["versions"]["pair"]["serving"] == ["v5", "v6"]
    [configured] = judge_apps(gate, GROUP, "2026-11-01", "2026-11-06", LiveThresholds(resamples=100), ("v0", "v1"), 50)
    assert configured.report["versions"]["pair"]["chosen"] == "configured"
