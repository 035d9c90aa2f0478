"""Drift in the running agent: the DriftCollector's samples from a frozen baseline and stored days
in a SQLite store (agent/io/background/drift.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from agent.core.config import CoreConfig
from agent.core.drift import Grid, Grids, evaluate, freeze
from agent.core.drift.days import DriftConfig, by_version, recent_windows, window
from agent.core.drift.features import TOP1_SCORE
from agent.core.partitions import Outbox
from agent.core.state import PartitionState
from agent.io.background.drift import DriftCollector, DriftStatus, DriftWatch, windows_of
from agent.io.background.periodic import new_scheduler
from agent.io.store.database import Checkpoint, Store, StoreError
from agent.io.store.drift import TABLES, DriftStore
from agent.synth import ScheduledIncident, generate

GROUP = "ragdrift"
DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
PER_DAY = 400
NOW = (DAY0 + timedelta(days=8, hours=12)).timestamp()  # noon of day 8: today = day 8, yesterday = day 7
FAMILIES = ("ragdrift_drift_statistic", "ragdrift_drift_threshold", "ragdrift_drift_alarm",
            "ragdrift_drift_window_values")


@pytest.fixture(scope="module")
def drift(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("watch")
    store = DriftStore(Store(f"sqlite:///{tmp}/state.db", None, TABLES))
    state, box, offset = PartitionState(CoreConfig(), drift=DriftConfig()), Outbox(), 0
    for d in range(9):  # days 0-6 the baseline, 7 quiet, 8 (today) a score-drift incident
        incidents = [ScheduledIncident("score-drift", 0)] if d == 8 else []
        for line in generate(PER_DAY, seed=d, start=DAY0 + timedelta(days=d), rate=1.0, incidents=incidents):
            state.process(line)
            offset += 1
        box.take(state)
        store.store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=offset, state={"v": 1})],
                         [store.writes(GROUP, [box.held["drift"]])])
        box.clear()
    yield store
    store.store.close()


def samples(watch: DriftWatch) -> dict[str, dict[tuple, float]]:
    registry = CollectorRegistry()
    registry.register(DriftCollector(watch))
    out: dict[str, dict[tuple, float]] = {}
    for family in registry.collect():
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_no_baseline_exports_nothing(drift):
    watch = DriftWatch(drift, GROUP, clock=lambda: NOW, scheduler=new_scheduler())
    watch.refresh()
    assert samples(watch) == {}


def test_findings_of_today_and_yesterday_against_the_newest_baseline(drift):
    days = drift.stored_days(GROUP, "2026-03-01", "2026-03-07")
    baseline = freeze(days, "launch")
    assert drift.save_baseline(baseline, now=1.0)
    watch = DriftWatch(drift, GROUP, clock=lambda: NOW, scheduler=new_scheduler())
    watch.refresh()
    got = samples(watch)
    assert got["ragdrift_drift_baseline_info"] == {(("name", "launch"), ("version", baseline.version)): 1.0}
    stored = drift.stored_days(GROUP, "2026-03-08", "2026-03-09")
    expected: dict[str, dict[tuple, float]] = {f: {} for f in FAMILIES}
    for name, day in (("today", "2026-03-09"), ("yesterday", "2026-03-08")):
        for f in evaluate(baseline, window({day: stored[day]})):
            key = (("app", f.app), ("feature", f.feature), ("stat", f.stat), ("window", name))
            for family, value in zip(FAMILIES, (f.value, f.threshold, float(f.alarm), f.n)):
                expected[family][key] = value
    for family in FAMILIES:
        assert got[family] == expected[family], family
    alarms = got["ragdrift_drift_alarm"]
    assert {dict(k)["app"] for k in alarms} <= set(baseline.apps)
    assert {dict(k)["window"] for k in alarms} == {"today", "yesterday"}
    today_top1 = [v for k, v in alarms.items() if dict(k)["window"] == "today" and dict(k)["feature"] == "top1_score"]
    assert today_top1 and max(today_top1) == 1.0, "the score-drift incident of today alarms"


def test_sub_day_windows_of_the_replica_are_rendered_beside_the_daily_ones(drift):
    baseline = freeze(drift.stored_days(GROUP, "2026-03-01", "2026-03-07"), "hourly")
    watch = DriftWatch(drift, GROUP, clock=lambda: NOW, scheduler=new_scheduler())
    watch.judge_recent({"5m": {}}, None)
    assert watch.recent == ((), ()), "no baseline loaded yet: nothing judged"
    watch.status = DriftStatus(("hourly", baseline.version))  # as a refresh leaves it
    state = PartitionState(CoreConfig(), drift=DriftConfig())
    start = DAY0 + timedelta(days=9)
    for line in generate(2400, seed=9, start=start, rate=2400 / 3600, incidents=[ScheduledIncident("score-drift", 40)]):
        state.process(line)
    windows = recent_windows([state.feature("drift")], (start + timedelta(hours=1)).timestamp() - 1)
    watch.judge_recent(windows, baseline)  # the baseline the loop switched to, whatever the refresh loads now
    got = samples(watch)["ragdrift_drift_alarm"]
    for name in ("5m", "1h"):
        expected = {(("app", f.app), ("feature", f.feature), ("stat", f.stat), ("window", name)): float(f.alarm)
                    for f in evaluate(baseline, windows[name])}
        assert expected and {k: v for k, v in got.items() if dict(k)["window"] == name} == expected
    assert {dict(k)["window"] for k in got} == {"5m", "1h"}


def test_a_newer_baseline_replaces_the_old_and_a_store_error_keeps_the_last_figures(drift, monkeypatch):
    days = drift.stored_days(GROUP, "2026-03-02", "2026-03-08")
    newer = freeze(days, "later")
    drift.save_baseline(newer, now=2.0)
    watch = DriftWatch(drift, GROUP, clock=lambda: NOW, scheduler=new_scheduler())
    watch.refresh()
    before = samples(watch)
    assert list(before["ragdrift_drift_baseline_info"]) == [(("name", "later"), ("version", newer.version))]
    def down(*_):
        raise StoreError("the store is down")

    monkeypatch.setattr(drift, "load_baseline", down)
    watch.refresh()
    assert samples(watch) == before


def test_windows_are_utc_days():
    assert windows_of(DAY0.timestamp() - 1) == {"today": "2026-02-28", "yesterday": "2026-02-27"}
    assert windows_of(NOW) == {"today": "2026-03-09", "yesterday": "2026-03-08"}


def test_describe_names_every_family():
    names = {m.name for m in DriftCollector(DriftWatch.__new__(DriftWatch)).describe()}
    assert names == set(FAMILIES) | {"ragdrift_drift_baseline_info", "ragdrift_drift_expected_false_alarm_rate",
                                     "ragdrift_drift_grid_mismatch"}


def test_windows_counted_on_another_grid_are_not_compared_but_counted_and_logged_once(drift, tmp_path, caplog):
    baseline = freeze(drift.stored_days(GROUP, "2026-03-01", "2026-03-07"), "launch")  # the default grids
    other = DriftStore(Store(f"sqlite:///{tmp_path}/other.db", None, TABLES))
    other.save_baseline(baseline, now=1.0)
    narrow = DriftConfig(Grids(by_feature={TOP1_SCORE: Grid(0.0, 1.0, 100)}))  # the configured grid changed
    state, box = PartitionState(CoreConfig(), drift=narrow), Outbox()
    for line in generate(PER_DAY, seed=8, start=DAY0 + timedelta(days=8), rate=1.0):
        state.process(line)
    box.take(state)
    other.store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=PER_DAY, state={"v": 1})],
                     [other.writes(GROUP, [box.held["drift"]])])
    watch = DriftWatch(other, GROUP, clock=lambda: NOW, scheduler=new_scheduler())
    with caplog.at_level("WARNING", logger="ragdrift.drift"):
        watch.refresh()
        watch.refresh()
    lines = [r for r in caplog.records if "not compared" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0].getMessage()
    got = samples(watch)
    apps = {dict(k)["app"] for k in got["ragdrift_drift_statistic"]}
    assert apps and not any(dict(k)["feature"] == TOP1_SCORE for k in got["ragdrift_drift_statistic"])
    assert any(dict(k)["feature"] == "content_age_days" for k in got["ragdrift_drift_statistic"])
    mismatched = {dict(k)["window"]: v for k, v in got["ragdrift_drift_grid_mismatch"].items()}
    assert mismatched == {"5m": 0, "1h": 0, "today": len(apps), "yesterday": 0}
    with caplog.at_level("WARNING", logger="ragdrift.drift"):  # the replica's sub-day windows, on the same grid
        watch.judge_recent(recent_windows([state.feature("drift")], (DAY0 + timedelta(days=8, minutes=10)).timestamp()),
                           watch.baseline)
    assert len([r for r in caplog.records if "not compared" in r.getMessage()]) == 1  # the same features: no new line
    got = samples(watch)
    mismatched = {dict(k)["window"]: v for k, v in got["ragdrift_drift_grid_mismatch"].items()}
    assert mismatched == {"5m": len(apps), "1h": len(apps), "today": len(apps), "yesterday": 0}
    assert not any(dict(k)["feature"] == TOP1_SCORE for k in got["ragdrift_drift_statistic"])
    rates = got["ragdrift_drift_expected_false_alarm_rate"]
    assert rates and set(rates.values()) == {baseline.calibration.rate}
    other.store.close()


def test_split_by_pipeline_version_each_version_judges_against_its_apps_baseline(tmp_path):
    """Days counted per version: the gauges carry `pipeline_version`, each version's findings are its
    own counts against its app's baseline, and the canary of today's incident alarms alone."""
    store = DriftStore(Store(f"sqlite:///{tmp_path}/state.db", None, TABLES))
    state, box = PartitionState(CoreConfig(by_pipeline_version=True, max_pipeline_versions=8), drift=DriftConfig()), Outbox()
    for d in (0, 1, 2, 3, 4, 5, 6, 8):
        incidents = [ScheduledIncident("score-drift", 0)] if d == 8 else []
        for line in generate(PER_DAY, seed=d, start=DAY0 + timedelta(days=d), rate=1.0, incidents=incidents):
            state.process(line)
        box.take(state)
        store.store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=d, state={"v": 1})],
                         [store.writes(GROUP, [box.held["drift"]])])
        box.clear()
    baseline = freeze(store.stored_days(GROUP, "2026-03-01", "2026-03-07"), "launch")  # every version summed
    assert set(baseline.apps) == {"docs-search", "hr-assistant", "support-bot"}
    store.save_baseline(baseline, now=1.0)
    watch = DriftWatch(store, GROUP, clock=lambda: NOW, scheduler=new_scheduler(), split=True)
    watch.refresh()
    got = samples(watch)
    today = window(store.stored_days(GROUP, "2026-03-09", "2026-03-09", split=True), split=True)
    expected = {}
    for version, apps in by_version(today).items():
        for f in evaluate(baseline, apps):
            key = (("app", f.app), ("feature", f.feature), ("pipeline_version", version), ("stat", f.stat),
                   ("window", "today"))
            expected[key] = float(f.alarm)
    assert expected and got["ragdrift_drift_alarm"] == expected
    top1 = {dict(k)["pipeline_version"] for k, v in expected.items() if v and dict(k)["feature"] == TOP1_SCORE}
    assert top1 and all("canary" in version for version in top1)
    store.store.close()
