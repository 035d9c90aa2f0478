"""The live release gate in the running agent: the stored rows of the last days judged per app, for the metrics.

Every `live_gate.refresh_seconds` (and once at start) a background job reads
the stored day rows of the last `window_days` UTC days (today included, as
checkpointed) and, per app, compares the configured versions (or the pair
`pair_of` picks among the versions serving on the newest day with events:
the newest of them against the one with most events that day) with
`live_compare`, the function `ragdrift compare --live` calls, over the same
rows and the same judged items (`judged_in_window`); its report says which
pair and why (`versions.pair`). Apps are folded as every family's: the
`metrics.top_n` apps with most events in the window are judged each on its
own, the others' rows together as app `other`. Each app's query rows are read on their own, only
those of at most `max_queries` queries per version (chosen from the query
ids before any row is loaded), so memory follows the cap, not the traffic.
`LiveGateCollector` renders the last reports: a scrape never reads the store
nor computes. Every replica reads the one store, so the figures of
the served traffic are the same on every replica (aggregate with `max`); the
judged metrics come from the judged batches whose files a replica can read,
so they may differ where batch directories are not shared. Without
configured versions an app with fewer than two versions serving exports
nothing; with them every app with rows exports its verdict (`not
enough data` while a version has no events).

An app whose evaluation fails (a store error, a bad row) is logged with the
error's class and counted (`ragdrift_live_gate_evaluation_errors_total`,
RagdriftLiveGateErrors), keeps its last figures (a failing evaluation must
not resolve a firing canary alert), and the other apps are still judged; a reload that fails as a whole keeps
the last figures, and `ragdrift_live_gate_last_evaluation_timestamp_seconds`
stops moving (RagdriftLiveGateStale, against `ragdrift_live_gate_refresh_seconds`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from agent.core.compare import FAILED, NOT_ENOUGH, PASSED
from agent.core.compare.live_verdict import (
    JudgedQuery,
    LiveThresholds,
    Pair,
    Stored,
    judged_queries,
    live_compare,
    pair_of,
    versions_by_traffic,
)
from agent.core.judgments.judged import judged
from agent.core.labels import OTHER
from agent.core.snapshot import shown_values
from agent.core.tally import Tally, inc
from agent.core.zero_results import RETRIEVALS
from agent.io.background.periodic import Periodic
from agent.io.files import batch_files
from agent.io.files.batch_files import ExportError
from agent.io.store.live_gate import LiveGateStore, today
from agent.io.store.qrels import Qrels
from agent.io.store.queue import Queue

log = logging.getLogger("ragdrift.live_gate")
JUDGED_WEEKS = 8  # judged batches read, newest first: one a week
VERDICTS = {PASSED: "pass", FAILED: "fail", NOT_ENOUGH: "not_enough_data"}  # report's -> the label's
CONFIGURED = {"chosen": "configured", "reason": "live_gate.stable and live_gate.candidate"}


@dataclass(frozen=True, kw_only=True)
class AppComparison:
    """One app's comparison of its candidate version against its stable one, on the window's rows."""

    app: str
    stable: str
    candidate: str
    events: dict[str, int]  # version -> events in the window
    report: dict


def window_of(now: float, days: int) -> tuple[str, str]:
    """The first and last UTC day (ISO) of a window of `days` days ending today."""
    last = today(now)
    return (last - timedelta(days=days - 1)).isoformat(), last.isoformat()


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
               versions: tuple[str, str] | None, top_n: int, partial_from: str | None = None,
               failed: Callable[[str, Exception], None] | None = None) -> list[AppComparison]:
    """Each app's comparison over the stored rows from `first` to `last` (reads the store and the
    judged batches' files): the `top_n` apps with most events in the window each on its own, the
    others together as `other`, the fold of every family's app label (agent/core/snapshot.py). An app
    whose evaluation raises is handed to `failed` and left out; without `failed` the error propagates."""
    kept = (date.fromisoformat(last) - timedelta(days=store.retention_days)).isoformat()
    history = store.day_rows(group_id, min(kept, first), last)  # the first day each version served
    days = {k: v for k, v in history.items() if k[0] >= first}
    judged_rows, _ = judged_in_window(store.store, group_id, first, last)
    events: Tally = {}
    for (_, app, _), row in days.items():
        n = row.get("events")
        inc(events, (RETRIEVALS.name, app), n if isinstance(n, int) else 0)  # a bad row fails its app below
    shown = shown_values(events, {}, top_n, {RETRIEVALS.name: ("app",)})["app"]  # by the store: every replica alike
    groups: dict[str, set[str]] = {}
    for _, app, _ in days:
        groups.setdefault(app if app in shown else OTHER, set()).add(app)
    out = []
    for label, apps in sorted(groups.items()):
        try:
            app_days = {k: v for k, v in days.items() if k[1] in apps}
            pair = (Pair(*versions, CONFIGURED) if versions else
                    pair_of(app_days, {k: v for k, v in history.items() if k[1] in apps}))
            if pair is None:
                continue
            queries = store.query_rows(group_id, first, last, label if label in shown else None, pair[:2],
                                       gate.max_queries, () if label in shown else shown)
            stored = Stored(app_days, queries, [q for q in judged_rows if q.app in apps])
            report = live_compare(stored, pair.stable, pair.candidate, gate, {"from": first, "to": last},
                                  partial_from, pair.why)
            totals = dict(versions_by_traffic(app_days))
            out.append(AppComparison(app=label, stable=pair.stable, candidate=pair.candidate,
                                     events={v: totals.get(v, 0) for v in pair[:2]}, report=report))
        except Exception as exc:  # one app's bad rows must not silence the others
            if failed is None:
                raise
            failed(label, exc)
    return out


class LiveGateWatch(Periodic):
    """The refresh job and the last comparisons it made."""

    def __init__(self, store: LiveGateStore, group_id: str, gate: LiveThresholds, *, window_days: int,
                 versions: tuple[str, str] | None, refresh_seconds: float, clock: Callable[[], float] = time.time,
                 top_n: int, scheduler: BackgroundScheduler):
        super().__init__("live-gate-refresh", refresh_seconds, log, what="the live gate's rows", scheduler=scheduler)
        self.store, self.group_id, self.gate, self.top_n = store, group_id, gate, top_n
        self.window_days, self.versions, self.clock = window_days, versions, clock
        self.refresh_seconds = refresh_seconds
        self.comparisons: tuple[AppComparison, ...] = ()
        self.evaluated_at: float | None = None
        self.errors = 0  # apps whose evaluation failed, since start

    def reload(self) -> None:
        now = self.clock()
        first, last = window_of(now, self.window_days)
        failing: set[str] = set()

        def failed(app: str, exc: Exception) -> None:
            failing.add(app)
            self.errors += 1
            log.error("live gate evaluation of app %r failed: %s", app, exc.__class__.__name__)

        fresh = judge_apps(self.store, self.group_id, first, last, self.gate, self.versions, self.top_n,
                           partial_from=last, failed=failed)
        kept = [found for found in self.comparisons if found.app in failing]  # a failure resolves no alert
        self.comparisons = tuple(sorted([*fresh, *kept], key=lambda found: found.app))
        self.evaluated_at = now


class LiveGateCollector:
    """The last live gate verdicts and figures, per app and compared pair."""

    def __init__(self, watch: LiveGateWatch):
        self.watch = watch

    def describe(self) -> Iterator[Metric]:
        return self._render((), None)

    def collect(self) -> Iterator[Metric]:
        return self._render(self.watch.comparisons, self.watch.evaluated_at)

    def _render(self, comparisons: tuple[AppComparison, ...], evaluated_at: float | None) -> Iterator[Metric]:
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
        for found in comparisons:
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
        refresh = GaugeMetricFamily("ragdrift_live_gate_refresh_seconds",
                                    "How often the live gate evaluates the stored rows (live_gate.refresh_seconds).")
        refresh.add_metric([], self.watch.refresh_seconds)
        yield refresh
        errors = CounterMetricFamily("ragdrift_live_gate_evaluation_errors",
                                     "Apps whose live gate evaluation failed (the others are still judged).")
        errors.add_metric([], self.watch.errors)
        yield errors
