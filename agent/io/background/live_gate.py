"""The live release gate in the running agent: the stored rows of the last days judged per app, for the metrics.

Every `live_gate.refresh_seconds` (and once at start) a background job reads
the stored day and query rows of the last `window_days` UTC days (today
included, as checkpointed) and, per app, compares the configured versions
(or the app's two with most traffic in the window, the larger one stable)
with `live_compare`, the function `ragdrift compare --live` calls, over the
same rows and the same judged items (`judged_in_window`).
`LiveGateCollector` renders the last reports: a scrape never reads the store
nor computes. Every replica reads the one store, so every replica exports the
same figures (aggregate with `max`). An app with a single version in the
window exports nothing.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from agent.core.compare import FAILED, NOT_ENOUGH, PASSED
from agent.core.compare.live_verdict import (
    JudgedQuery,
    LiveThresholds,
    Stored,
    judged_queries,
    live_compare,
    versions_by_traffic,
)
from agent.core.judgments.judged import judged
from agent.io.background.periodic import Periodic
from agent.io.files import batch_files
from agent.io.files.batch_files import ExportError
from agent.io.store.live_gate import LiveGateStore
from agent.io.store.qrels import Qrels
from agent.io.store.queue import Queue

log = logging.getLogger("ragdrift.live_gate")
JUDGED_WEEKS = 8  # judged batches read, newest first: one a week
VERDICTS = {PASSED: "pass", FAILED: "fail", NOT_ENOUGH: "not_enough_data"}  # report's -> the label's


@dataclass(frozen=True)
class Judged:
    """One app's comparison."""

    app: str
    stable: str
    candidate: str
    events: dict[str, int]  # version -> events in the window
    report: dict


def window_of(now: float, days: int) -> tuple[str, str]:
    """The first and last UTC day (ISO) of a window of `days` days ending today."""
    today = datetime.fromtimestamp(now, UTC).date()
    return (today - timedelta(days=days - 1)).isoformat(), today.isoformat()


def judged_in_window(store, group_id: str, first: str, last: str, app: str | None = None
                     ) -> tuple[list[JudgedQuery], list[str]]:
    """The judged items of the newest `JUDGED_WEEKS` batches whose events fall from `first` to `last`
    (of one app or all), and the batches left out because their files cannot be read here (a batch
    another replica wrote, or one archived). `store` holds the judgment queue's and the qrels' tables."""
    queue, qrels = Queue(store), Qrels(store)
    found: list[JudgedQuery] = []
    skipped = []
    for row in queue.recent_batches(group_id, JUDGED_WEEKS):
        try:
            items = judged(batch_files.read_key(row["directory"]), qrels.latest(row["batch_id"]))
        except (ExportError, OSError, ValueError):
            skipped.append(row["batch_id"])
            continue
        found += [q for q in judged_queries(items) if first <= q.day <= last and app in (None, q.app)]
    return found, skipped


def judge_apps(store: LiveGateStore, group_id: str, first: str, last: str, gate: LiveThresholds,
               versions: tuple[str, str] | None) -> list[Judged]:
    """Each app's comparison over the stored rows from `first` to `last` (reads the store and the
    judged batches' files)."""
    days, queries = store.stored(group_id, first, last)
    judged_rows, _ = judged_in_window(store.store, group_id, first, last)
    out = []
    for app in sorted({key[1] for key in days}):
        app_days = {k: v for k, v in days.items() if k[1] == app}
        seen = versions_by_traffic(app_days)
        if versions is not None:
            stable, candidate = versions
        elif len(seen) >= 2:
            stable, candidate = seen[0][0], seen[1][0]
        else:
            continue
        stored = Stored(app_days, {k: v for k, v in queries.items() if k[1] == app},
                        [q for q in judged_rows if q.app == app])
        report = live_compare(stored, stable, candidate, gate, {"from": first, "to": last})
        totals = dict(seen)
        out.append(Judged(app, stable, candidate, {v: totals.get(v, 0) for v in (stable, candidate)}, report))
    return out


class LiveGateWatch(Periodic):
    """The refresh job and the last comparisons it made."""

    def __init__(self, store: LiveGateStore, group_id: str, gate: LiveThresholds, window_days: int,
                 versions: tuple[str, str] | None, refresh_seconds: float, clock: Callable[[], float] = time.time, *,
                 scheduler: BackgroundScheduler):
        super().__init__("live-gate-refresh", refresh_seconds, log, "the live gate's rows", scheduler)
        self.store, self.group_id, self.gate = store, group_id, gate
        self.window_days, self.versions, self.clock = window_days, versions, clock
        self.judged: tuple[Judged, ...] = ()
        self.evaluated_at: float | None = None

    def reload(self) -> None:
        now = self.clock()
        first, last = window_of(now, self.window_days)
        self.judged = tuple(judge_apps(self.store, self.group_id, first, last, self.gate, self.versions))
        self.evaluated_at = now


class LiveGateCollector:
    """The last live gate verdicts and figures, per app and compared pair."""

    def __init__(self, watch: LiveGateWatch):
        self.watch = watch

    def describe(self) -> Iterator[Metric]:
        return self._render((), None)

    def collect(self) -> Iterator[Metric]:
        return self._render(self.watch.judged, self.watch.evaluated_at)

    def _render(self, judged: tuple[Judged, ...], evaluated_at: float | None) -> Iterator[Metric]:
        pair = ["app", "stable", "candidate"]
        verdict = GaugeMetricFamily("ragdrift_live_gate_verdict",
                                    "1 for the live gate's current verdict of the candidate against the stable "
                                    "version, 0 for the others.", labels=[*pair, "verdict"])
        hard = GaugeMetricFamily("ragdrift_live_gate_hard_failures",
                                 "Candidate events in the window failing a hard gate (filter_zero_rise: those in "
                                 "excess of the stable rate, 0 when not a rise).", labels=[*pair, "gate"])
        figures = {name: GaugeMetricFamily(f"ragdrift_live_gate_{name}", text, labels=[*pair, "metric"])
                   for name, text in (("difference", "Candidate minus stable, point estimate."),
                                      ("difference_low", "Lower bound of the difference's interval."),
                                      ("difference_high", "Upper bound of the difference's interval."),
                                      ("material", "The material threshold, from the stable version's "
                                                   "day-to-day variation."))}
        events = GaugeMetricFamily("ragdrift_live_gate_events", "Events in the window per compared version.",
                                   labels=["app", "pipeline_version"])
        for found in judged:
            key = [found.app, found.stable, found.candidate]
            report = found.report
            for name in VERDICTS.values():
                verdict.add_metric([*key, name], 1.0 if VERDICTS[report["verdict"]] == name else 0.0)
            for row in report["hardGates"]:
                failed = row["outcome"] == "fail"
                counted = row["counted"] if row["gate"] != "filter_zero_rise" or failed else 0
                hard.add_metric([*key, row["gate"]], float(counted))
            for row in report["metrics"]:
                if row.get("delta") is None:
                    continue
                values = {"difference": row["delta"], "difference_low": row["low"], "difference_high": row["high"],
                          "material": math.nan if row["margin"] is None else row["margin"]}
                for name, value in values.items():
                    figures[name].add_metric([*key, row["metric"]], value)
            for version, n in found.events.items():
                events.add_metric([found.app, version], n)
        yield from (verdict, hard, *figures.values(), events)
        last = GaugeMetricFamily("ragdrift_live_gate_last_evaluation_timestamp_seconds",
                                 "When the live gate last evaluated the stored rows.")
        if evaluated_at is not None:
            last.add_metric([], evaluated_at)
        yield last
