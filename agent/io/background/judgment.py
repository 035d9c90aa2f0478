"""The weekly judgment batch inside `ragdrift run`, on an APScheduler 3 cron trigger.

Every replica schedules the job; the job itself makes sure one batch is built
per week (agent/jobs/batch.py, handed in as `weekly`: a job is above io). Misfires (the agent was down at 06:00) are
coalesced into one run as soon as it is back, within a day's grace. A second
job reads the queues' figures from the store every minute, for the metrics
(`JudgmentCollector`): they are the same on every replica, since every
replica reads the one store. The same job exports the figures of the newest
batch with labels (docs/judgments.md, "Gauges"): its report is computed again
only when the batch or its labels change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from agent.core.judgments.gauges import GAUGED, JudgedFigures, gauges
from agent.core.judgments.report import Options, report
from agent.core.labels import OTHER
from agent.core.sampling import iso_week
from agent.io.background.periodic import Periodic
from agent.io.files import batch_files
from agent.io.files.batch_files import ExportError
from agent.io.settings.agent import Settings
from agent.io.store.database import StoreError
from agent.io.store.qrels import Qrels
from agent.io.store.queue import Queue

log = logging.getLogger("ragdrift.batch")
REFRESH_SECONDS = 60.0
GRACE_SECONDS = 24 * 3600
JUDGED_BATCHES = 12  # the newest batches searched for labels: a quarter of weekly batches
# The report command's defaults: the gauges show the figures `ragdrift judgments
# report` prints, and the fixed seed keeps the challenge bounds steady for the same labels.
GAUGE_OPTIONS = Options()


@dataclass(frozen=True, kw_only=True)
class JudgmentStatus:
    candidates: dict[str, int] = field(default_factory=dict)  # this week's, per stratum, all replicas
    security_queue: int | None = None
    last_batch: float | None = None
    last_batch_items: int | None = None
    failures: int = 0
    judged: JudgedFigures | None = None  # the newest batch with labels; None before any is judged


Weekly = Callable[[Settings, Queue], str | None]  # runs the batch job: None, or its failure in one line
WEEKLY = "weekly-batch"  # its job id on the scheduler, and its name among the jobs handed in (`Wiring.jobs`)


class JudgmentJobs(Periodic):
    """The jobs (the weekly batch when `weekly` is given) and the latest figures they read."""

    def __init__(self, settings: Settings, queue: Queue, qrels: Qrels, *, top_n: int,
                 scheduler: BackgroundScheduler, weekly: Weekly | None = None):
        super().__init__("judgment-status", REFRESH_SECONDS, log, what="the judgment queue's figures", scheduler=scheduler,
                         misfire_grace_time=GRACE_SECONDS)
        self.settings = settings
        self.queue = queue
        self.qrels = qrels
        self.top_n = top_n
        self.run_weekly = weekly
        self.status = JudgmentStatus()
        self.failures = 0
        self.judged: tuple[tuple[str, int], JudgedFigures] | None = None  # (batch id, label versions), figures
        if weekly is not None:
            self.scheduler.add_job(self.weekly, CronTrigger.from_crontab(settings.judgment.schedule, timezone="UTC"),
                                   id=WEEKLY, misfire_grace_time=GRACE_SECONDS)

    def weekly(self) -> None:
        assert self.run_weekly is not None  # scheduled only with one
        failed = self.run_weekly(self.settings, self.queue)
        if failed is not None:  # the agent keeps running; the alert on a missing batch tells
            self.failures += 1
            log.error("weekly judgment batch failed", extra={"error": failed})  # one line, no traceback
        self.refresh()

    def reload(self) -> None:
        group = self.settings.kafka.group_id
        counts = self.queue.candidate_counts(group, iso_week(time.time()))
        last = self.queue.last_batch(group)
        security = self.queue.security_size(group)
        self.status = JudgmentStatus(
            candidates=_top(counts, self.top_n), security_queue=security,
            last_batch=None if last is None else last["built_at"],
            last_batch_items=None if last is None else last["items"], failures=self.failures,
            judged=self._judged(group),
        )

    def _judged(self, group: str) -> JudgedFigures | None:
        """The newest labelled batch's figures, computed again only when its labels changed;
        the previous figures while the store or the batch's files cannot be read."""
        previous = None if self.judged is None else self.judged[1]
        try:
            batches = self.queue.recent_batches(group, JUDGED_BATCHES)
            versions = self.qrels.versions(b["batch_id"] for b in batches)
            labelled = [b for b in batches if b["batch_id"] in versions]
            if not labelled:
                return previous
            newest = labelled[-1]
            stamp = (newest["batch_id"], versions[newest["batch_id"]])
            if self.judged is not None and self.judged[0] == stamp:
                return previous
            manifest, key = batch_files.read_batch(newest["directory"])
            found = gauges(report(manifest, key, self.qrels.latest(newest["batch_id"]), GAUGE_OPTIONS))
        except (StoreError, ExportError, ValueError) as exc:
            log.warning("cannot compute the judged batch's figures", extra={"error": str(exc)})
            return previous
        self.judged = (stamp, found)
        return found


def _top(counts: dict[str, int], n: int) -> dict[str, int]:
    """The n largest strata by count, the rest summed as `other` (bounded labels)."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    top = dict(ranked[:n])
    rest = sum(v for _, v in ranked[n:])
    if rest:
        top[OTHER] = top.get(OTHER, 0) + rest
    return top


class JudgmentCollector:
    """The judgment and security queues, as the store holds them for all replicas."""

    def __init__(self, jobs: JudgmentJobs):
        self.jobs = jobs

    def describe(self) -> Iterator[Metric]:
        return self._render(JudgmentStatus(security_queue=0, last_batch=0.0, last_batch_items=0))

    def collect(self) -> Iterator[Metric]:
        return self._render(self.jobs.status)

    def _render(self, status: JudgmentStatus) -> Iterator[Metric]:
        candidates = GaugeMetricFamily("ragdrift_judgment_candidates",
                                       "Judgment candidates of the current ISO week in the store, per stratum.",
                                       labels=["stratum"])
        for stratum, n in sorted(status.candidates.items()):
            candidates.add_metric([stratum], n)
        yield candidates
        if status.security_queue is not None:
            yield GaugeMetricFamily("ragdrift_security_queue_events",
                                    "Events in the security review queue (unauthorized results).",
                                    value=status.security_queue)
        if status.last_batch is not None:
            yield GaugeMetricFamily("ragdrift_judgment_batch_last_timestamp_seconds",
                                    "When the newest judgment batch was built.", value=status.last_batch)
            yield GaugeMetricFamily("ragdrift_judgment_batch_last_items", "Items in the newest judgment batch.",
                                    value=status.last_batch_items)
        if status.judged is not None:
            yield from _judged(status.judged)
        failures = CounterMetricFamily("ragdrift_judgment_batch_failures",
                                       "Scheduled judgment batches that failed on this replica.")
        failures.add_metric([], status.failures)
        yield failures


def _judged(judged: JudgedFigures) -> Iterator[Metric]:
    """The newest judged batch: each metric, its 95 % interval as `_low` and `_high`, the items, the batch."""
    labels = ["app", "view", "stratum"]
    for metric, suffix in GAUGED.items():
        name = f"ragdrift_judged_{suffix}"
        rows = [f for f in judged.figures if f.metric == metric]
        families = [GaugeMetricFamily(name, f"{metric} of the newest judged batch (bootstrap estimate).", labels=labels),
                    GaugeMetricFamily(f"{name}_low", f"Lower bound of the 95 % interval of {name}.", labels=labels),
                    GaugeMetricFamily(f"{name}_high", f"Upper bound of the 95 % interval of {name}.", labels=labels)]
        for f in rows:
            for family, value in zip(families, (f.estimate, f.low, f.high)):
                family.add_metric([f.app, f.view, f.stratum], value)
        yield from families
    items = GaugeMetricFamily("ragdrift_judged_items", "Judged items of each view of the newest judged batch.",
                              labels=labels)
    for labels_of, n in sorted(judged.items.items()):
        items.add_metric(list(labels_of), n)
    yield items
    info = InfoMetricFamily("ragdrift_judged_batch", "The batch the ragdrift_judged_* figures come from.")
    info.add_metric([], {"batch_id": judged.batch_id, "week": judged.week})
    yield info
