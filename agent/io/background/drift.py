"""Drift in the running agent: the stored daily counts against the newest baseline, for the metrics.

Every `REFRESH_SECONDS` (and once at start) a background job reads the newest
stored baseline and the stored counts of two windows, `today` (the current UTC
day so far, as checkpointed) and `yesterday` (the previous whole UTC day, the
same figures as `ragdrift drift --day` of that day), and evaluates them with
`agent.core.drift.evaluate`. `DriftCollector` renders the last findings: a
scrape never reads the store nor computes. Every replica reads the one store,
so every replica exports the same figures (aggregate with `max`).

The sub-day windows (`5m`, `1h`: agent/core/drift/days.py `RECENT`) are per
replica, like the other window gauges: the agent loop hands the counts its
partitions hold to `judge_recent` every `RECENT_SECONDS` (agent/io/features/drift.py),
which evaluates them against the baseline the last refresh loaded.

A numeric feature a window counted on another grid than the baseline's bins
(the configured grid changed since the baseline was frozen) is never compared:
it is left out of the findings, counted per window in
`ragdrift_drift_grid_mismatch`, and logged in one line when the set of such
features changes.

Label values are bounded: apps are the baseline's (frozen), features, stats
and windows are fixed sets. Without a stored baseline nothing is exported
(`absent(ragdrift_drift_baseline_info)` tells).

Split by pipeline version (`windows.by_pipeline_version`), every window is
judged per version, each version's counts against its app's baseline, and the
findings carry a `pipeline_version` label (the bounded version label the days
were counted under); counts stored before the split, without a version, are
left out of them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from agent.core.drift import Baseline, DayData, Finding, GridMismatch, evaluate, grid_mismatches
from agent.core.drift.days import app_version, by_version
from agent.core.drift.days import window as summed
from agent.io.background.periodic import Periodic
from agent.io.store.database import StoreError
from agent.io.store.drift import DriftStore

log = logging.getLogger("ragdrift.drift")
REFRESH_SECONDS = 60.0
RECENT_SECONDS = 15.0  # sub-day windows are evaluated this often: once per scrape at a 15 s interval
WINDOWS = ("5m", "1h", "today", "yesterday")


@dataclass(frozen=True)
class DriftStatus:
    baseline: tuple[str, str] | None = None  # (name, version) of the baseline in use
    findings: tuple[tuple[str, Finding], ...] = ()  # (window, finding)
    mismatches: tuple[tuple[str, GridMismatch], ...] = ()  # (window, a feature left out: counted on another grid)


def windows_of(now: float) -> dict[str, str]:
    """Window label -> its UTC day (ISO)."""
    today = datetime.fromtimestamp(now, UTC).date()
    return {"today": today.isoformat(), "yesterday": (today - timedelta(days=1)).isoformat()}


def judge(store: DriftStore, group_id: str, now: float, split: bool = False) -> tuple[Baseline | None, DriftStatus]:
    """The newest baseline and each daily window's findings against it (reads the store); with `split`,
    per pipeline version."""
    try:
        baseline = store.load_baseline()
    except ValueError as exc:  # a stored document that does not match its version
        raise StoreError(f"cannot read the newest baseline: {exc}") from exc
    if baseline is None:
        return None, DriftStatus()
    days = windows_of(now)
    stored = store.stored_days(group_id, min(days.values()), max(days.values()), split=split)
    windows = {name: summed({day: stored[day]}, split) for name, day in days.items() if day in stored}
    findings, mismatches = judge_windows(baseline, windows, split)
    return baseline, DriftStatus((baseline.name, baseline.version), findings, mismatches)


def judge_windows(baseline: Baseline | None, windows: Mapping[str, DayData], split: bool = False):
    """Findings of windows (window label -> app -> counts) against a baseline, and the features left out
    because a window counted them on another grid: ((window, Finding), ...), ((window, GridMismatch), ...).
    With `split` the windows are keyed `app|version` (days.py `counts_of`): each version is judged against
    its app's baseline, and its findings and mismatches keep the `app|version` key as their app."""
    if baseline is None:
        return (), ()
    parts = [(name, "", counts) for name, counts in windows.items()]
    if split:
        parts = [(name, f"|{v}", apps) for name, counts in windows.items() for v, apps in by_version(counts).items()]
    findings = tuple((name, replace(f, app=f.app + tag)) for name, tag, counts in parts for f in evaluate(baseline, counts))
    mismatches = tuple((name, replace(m, app=m.app + tag)) for name, tag, counts in parts
                       for m in grid_mismatches(baseline, counts))
    return findings, mismatches


class DriftWatch(Periodic):
    """The refresh job and the last status it computed."""

    split = False  # judged per pipeline version (set per watch)

    def __init__(self, store: DriftStore, group_id: str, clock: Callable[[], float] = time.time, *,
                 scheduler: BackgroundScheduler, split: bool = False):
        super().__init__("drift-refresh", REFRESH_SECONDS, log, what="the drift figures", scheduler=scheduler)
        self.store = store
        self.group_id = group_id
        self.split = split
        self.clock = clock
        self.status = DriftStatus()
        self.baseline: Baseline | None = None  # the one the last refresh loaded
        # The sub-day windows' findings and the features they left out (judge_recent): one tuple, replaced whole.
        self.recent: tuple[tuple[tuple[str, Finding], ...], tuple[tuple[str, GridMismatch], ...]] = ((), ())
        self._logged: frozenset = frozenset()  # the mismatches last logged, so a lasting one logs once
        self._logging = threading.Lock()  # the loop's and the refresh's findings are logged one at a time

    def judge_recent(self, windows: Mapping[str, DayData], baseline: Baseline | None) -> None:
        """Evaluate the replica's sub-day windows against `baseline`, the one the loop switched its partitions
        to (called by the agent loop)."""
        self.recent = judge_windows(baseline, windows, self.split)
        self._log_mismatches()

    def reload(self) -> None:
        self.baseline, self.status = judge(self.store, self.group_id, self.clock(), self.split)
        self._log_mismatches()

    def _log_mismatches(self) -> None:
        """One line when the features left out for their grid change (not on every refresh)."""
        with self._logging:
            found = self.recent[1] + self.status.mismatches
            now = frozenset((m.app, m.feature) for _, m in found)
            if now and now != self._logged:
                windows = sorted({w for w, _ in found})
                log.warning("drift: %d features not compared with baseline %s, counted on another grid in window %s "
                            "(first: %s); freeze a baseline from days counted on the configured grids", len(now),
                            self.baseline.version if self.baseline else "-", ", ".join(windows), found[0][1])
            self._logged = now


class DriftCollector:
    """The last drift findings, per app, feature, statistic and window."""

    def __init__(self, watch: DriftWatch):
        self.watch = watch
        self.split = watch.split  # a `pipeline_version` label on every finding

    def describe(self) -> Iterator[Metric]:
        return self._render(DriftStatus(("", "")))

    def collect(self) -> Iterator[Metric]:
        status, (recent, mismatches) = self.watch.status, self.watch.recent
        if status.baseline is not None:
            status = DriftStatus(status.baseline, recent + status.findings, mismatches + status.mismatches)
        return self._render(status)

    def _render(self, status: DriftStatus) -> Iterator[Metric]:
        labels = ["app", "feature", "stat", "window", *(["pipeline_version"] if self.split else [])]
        value = GaugeMetricFamily("ragdrift_drift_statistic",
                                  "Drift statistic of a window against the baseline (docs/drift.md).", labels=labels)
        limit = GaugeMetricFamily("ragdrift_drift_threshold",
                                  "The statistic's threshold for the window's size (chi2_p: alarm below).",
                                  labels=labels)
        fired = GaugeMetricFamily("ragdrift_drift_alarm", "1 when the statistic is beyond its threshold, else 0.",
                                  labels=labels)
        events = GaugeMetricFamily("ragdrift_drift_window_values",
                                   "Values the statistic was computed on (events, or results for per-result features).",
                                   labels=labels)
        rate = GaugeMetricFamily("ragdrift_drift_expected_false_alarm_rate",
                                 "Share of undrifted windows expected to alarm at the threshold (NaN: a default one).",
                                 labels=labels)
        for window, f in status.findings:
            app, version = app_version(f.app)
            key = [app, f.feature, f.stat, window, *([version or ""] if self.split else [])]
            value.add_metric(key, f.value)
            limit.add_metric(key, f.threshold)
            fired.add_metric(key, 1.0 if f.alarm else 0.0)
            events.add_metric(key, f.n)
            rate.add_metric(key, math.nan if f.rate is None else f.rate)
        mismatched = GaugeMetricFamily("ragdrift_drift_grid_mismatch",
                                       "Numeric features of the window not compared: counted on another grid "
                                       "than the baseline's.", labels=["window"])
        if status.baseline is not None:
            for window in WINDOWS:
                mismatched.add_metric([window], sum(w == window for w, _ in status.mismatches))
        yield from (value, limit, fired, events, rate, mismatched)
        info = GaugeMetricFamily("ragdrift_drift_baseline_info", "The baseline drift is evaluated against (1).",
                                 labels=["name", "version"])
        if status.baseline is not None:
            info.add_metric(list(status.baseline), 1)
        yield info
