"""Drift days split by pipeline version (agent/core/drift/days.py): each event counts under
`app|version`, readers sum an app's versions unless asked for them apart, and each version judges
against its app's baseline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.core.config import CoreConfig
from agent.core.drift import evaluate, freeze
from agent.core.drift.baseline import Counts
from agent.core.drift.days import DriftConfig, app_version, by_version, counts_of, merge, recent_windows, window
from agent.core.drift.features import TOP1_SCORE
from agent.core.state import PartitionState
from agent.synth import ScheduledIncident, generate
from tests.core.test_pipelines import DAY, T0, doc

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
STABLE, CANARY = "support-3.14.0", "support-3.15.0-canary"


def days(split: bool, n: int = 8, per_day: int = 400, drifted: int = 7):
    """n days of generated traffic (a score-drift canary on day `drifted`) as taken rows."""
    state = PartitionState(CoreConfig(by_pipeline_version=split, max_pipeline_versions=8), drift=DriftConfig())
    rows: dict = {}
    for d in range(n):
        incidents = [ScheduledIncident("score-drift", 0)] if d == drifted else []
        for line in generate(per_day, seed=d, start=DAY0 + timedelta(days=d), rate=1.0, incidents=incidents):
            state.process(line)
        merge(rows, state.feature("drift").take())
    return rows


def test_a_key_tells_its_app_and_version():
    assert app_version("hr-assistant") == ("hr-assistant", None)
    assert app_version("hr-assistant|v1") == ("hr-assistant", "v1")
    assert app_version("hr-assistant|v|1") == ("hr-assistant", "v|1")  # a version may hold "|"; an app may not
    assert app_version("other|none") == ("other", "none")


def test_split_rows_carry_the_version_and_sum_to_the_unsplit_ones():
    split, whole = days(True, n=2, drifted=1), days(False, n=2, drifted=1)
    assert all("|" not in app for _, app, _ in whole)
    keys = {app for _, app, _ in split}
    assert all(app_version(k)[1] is not None for k in keys)
    assert f"support-bot|{CANARY}" in keys and f"support-bot|{STABLE}" in keys
    assert counts_of(split) == counts_of(whole)  # each app's versions summed: what it counts unsplit
    assert {a for apps in counts_of(split, split=True).values() for a in apps} == keys


def test_counts_of_sums_versions_by_hand():
    rows = {("2026-03-01", "app|v1", TOP1_SCORE): {3: 2}, ("2026-03-01", "app|v2", TOP1_SCORE): {3: 1, 4: 5},
            ("2026-03-01", "app|v1", "source"): {"wiki": 2}}
    assert counts_of(rows)["2026-03-01"]["app"] == Counts({TOP1_SCORE: {3: 3, 4: 5}}, {"source": {"wiki": 2}}, {}, grids={})
    split = window(counts_of(rows, split=True), split=True)
    assert by_version(split) == {"v1": {"app": Counts({TOP1_SCORE: {3: 2}}, {"source": {"wiki": 2}}, {}, grids={})},
                                 "v2": {"app": Counts({TOP1_SCORE: {3: 1, 4: 5}}, {}, {}, grids={})}}
    assert by_version({"app": Counts({}, {}, {}, grids={})}) == {}  # counted unsplit: no version to judge


def test_a_canary_drifts_against_its_apps_baseline_and_the_stable_version_does_not():
    rows = days(True)
    stored = counts_of(rows, split=True)
    baseline = freeze({d: counts_of(rows)[d] for d in sorted(stored)[:7]}, "launch")
    assert baseline == freeze({d: counts_of(days(False))[d] for d in sorted(stored)[:7]}, "launch")
    versions = by_version(window({"2026-03-08": stored["2026-03-08"]}, split=True))
    alarms = {v: {f.feature for f in evaluate(baseline, apps) if f.alarm and f.app == "support-bot"}
              for v, apps in versions.items()}
    assert TOP1_SCORE in alarms[CANARY]
    assert TOP1_SCORE not in alarms[STABLE]


def test_the_sub_day_windows_split_by_version_too():
    state = PartitionState(CoreConfig(by_pipeline_version=True, max_pipeline_versions=8), drift=DriftConfig())
    start = DAY0 + timedelta(days=9)
    for line in generate(1200, seed=9, start=start, rate=1200 / 3600, incidents=[ScheduledIncident("score-drift", 10)]):
        state.process(line)
    now = (start + timedelta(hours=1)).timestamp() - 1
    split, whole = recent_windows([state.feature("drift")], now, split=True), recent_windows([state.feature("drift")], now)
    assert whole["1h"] and set(whole["1h"]) == {app_version(k)[0] for k in split["1h"]}
    assert CANARY in by_version(split["1h"])


def test_a_version_forgotten_and_learned_again_counts_under_its_own_key_each_day():
    # One version per app at a time: v1, then v2 once v1 has stopped (no event for the idle time,
    # read as the event before left the watermark), then v1 again once v2 has.
    state = PartitionState(CoreConfig(by_pipeline_version=True, max_pipeline_versions=1), drift=DriftConfig())
    for i, (version, t) in enumerate([("v1", T0), ("v2", T0 + 60), ("v2", T0 + DAY + 360), ("v2", T0 + DAY + 420),
                                      ("v1", T0 + DAY + 480), ("v1", T0 + 3 * DAY + 480), ("v1", T0 + 3 * DAY + 540)]):
        state.process(doc(i, version, t=t))
    rows = state.feature("drift").take()
    keys = {(day, key): cells for (day, key, feature), cells in rows.items() if feature == "result_count"}
    assert sorted(keys) == [("2024-03-11", "alpha|other"), ("2024-03-11", "alpha|v1"),
                            ("2024-03-12", "alpha|other"), ("2024-03-12", "alpha|v2"),
                            ("2024-03-14", "alpha|other"), ("2024-03-14", "alpha|v1")]
    assert sum(sum(cells.values()) for cells in keys.values()) == 7
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1"]}
