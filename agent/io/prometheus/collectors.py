"""Prometheus collectors that render the latest published snapshot.

The agent loop publishes an immutable `Snapshot` (agent/core/snapshot.py)
every second or so; a scrape only reads the reference it finds and renders it.
Nothing here decides anything: folding, ratios and ages are the core's. One
collector per concern, each registered on its own, each with `describe()` so
that registering never renders.
"""

from __future__ import annotations

import platform
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.samples import Exemplar

from agent import __version__
from agent.core.config import CoreConfig
from agent.core.families import FAMILIES
from agent.core.labels import OTHER
from agent.core.reasons import REASONS
from agent.core.snapshot import GAUGES, UNREADABLE, Health, Snapshot
from agent.core.tally import Counter, Histogram, Tally
from agent.core.zero_results import RETRIEVALS

PREFIX = "ragdrift_"


class Latest:
    """The snapshot scrapes read: replaced whole, never mutated."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def publish(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


def _grouped(tally: Tally) -> dict[str, list[tuple[tuple, float]]]:
    """Keys by family key name, label values sorted: one pass per tally."""
    out: dict[str, list] = defaultdict(list)
    for key, value in sorted(tally.items()):
        out[key[0]].append((key[1:], value))
    return out


class RetrievalCollector:
    """Counters, histograms, rolling-window gauges and derived gauges of the retrieval families."""

    def __init__(self, config: CoreConfig, latest: Latest):
        self.config = config
        self.latest = latest
        self.labels = {family: config.labels_of(family) for family in FAMILIES}  # with pipeline_version, if split
        self.lead = config.labels_of(RETRIEVALS)  # the labels of the counters zero-filled for each `leads` entry

    def describe(self) -> Iterator[Metric]:
        return self._render(Snapshot())

    def collect(self) -> Iterator[Metric]:
        return self._render(self.latest.snapshot)

    def _render(self, snap: Snapshot) -> Iterator[Metric]:
        counters = _grouped(snap.counters)
        for family in FAMILIES:
            if isinstance(family, Counter):
                yield self._counter(family, counters.get(family.name, ()), snap)
            else:
                yield self._histogram(family, counters)
        windows = {window: _grouped(tally) for window, tally in snap.windows.items()}
        for family in FAMILIES:
            labels = self.labels[family]
            if isinstance(family, Counter):
                if family.windowed:
                    yield _window_gauge(family.name, family.help, labels, windows)
            else:
                yield _window_gauge(f"{family.name}_sum", f"Sum of {family.name} in the window.", labels, windows)
                yield _window_gauge(f"{family.name}_count", f"Observations of {family.name} in the window.",
                                    labels, windows)
        gauges = _grouped(snap.gauges)
        for gauge in GAUGES:
            metric = GaugeMetricFamily(PREFIX + gauge.name, gauge.help, labels=gauge.labels)
            for labels, value in gauges.get(gauge.name, ()):
                metric.add_metric(labels, value)
            yield metric

    def _counter(self, family: Counter, series, snap: Snapshot) -> Metric:
        labels = self.labels[family]
        metric = CounterMetricFamily(PREFIX + family.name, family.help, labels=labels)
        values = dict(series)
        if labels == self.lead:  # zero-filled for every app (and pipeline version) with traffic
            values = {**dict.fromkeys(snap.leads, 0), **values}
        elif not labels:
            values.setdefault((), 0)
        exemplars = snap.exemplars
        for labels, value in sorted(values.items()):
            found = exemplars.get((family.name, *labels))
            exemplar = Exemplar({"trace_id": found[0]}, 1.0, found[1]) if found else None
            metric.add_metric(list(labels), value, exemplar=exemplar)
        return metric

    def _histogram(self, family: Histogram, counters: dict[str, list]) -> Metric:
        metric = HistogramMetricFamily(PREFIX + family.name, family.help, labels=self.labels[family])
        counts: dict[tuple, dict[str, float]] = defaultdict(dict)
        for labels, value in counters.get(family.bucket_key, ()):
            counts[labels[:-1]][labels[-1]] = value
        for labels, total_ in counters.get(family.sum_key, ()):
            les = self.config.buckets_for(family.buckets, labels[0] if labels else OTHER).labels  # as the core counted
            seen = counts[labels]
            running, buckets = 0.0, []
            for le in sorted(set(les) | set(seen), key=float):
                running += seen.get(le, 0)
                buckets.append((le, running))
            metric.add_metric(list(labels), buckets, total_)
        return metric


def _window_gauge(name: str, help_text: str, labels: tuple[str, ...], windows: dict[str, dict]) -> Metric:
    gauge = GaugeMetricFamily(f"{PREFIX}window_{name}", help_text + " (rolling window)", labels=[*labels, "window"])
    for window, grouped in windows.items():
        for values, value in grouped.get(name, ()):
            gauge.add_metric([*values, window], value)
    return gauge


class HealthCollector:
    """The agent's own state: traffic in, dead letters, Kafka, checkpoints."""

    def __init__(self, latest: Latest):
        self.latest = latest

    def describe(self) -> Iterator[Metric]:
        return self._render(Snapshot(checkpoint_age=0.0, health=_DESCRIBED))

    def collect(self) -> Iterator[Metric]:
        return self._render(self.latest.snapshot)

    def _render(self, snap: Snapshot) -> Iterator[Metric]:
        health = snap.health
        info = InfoMetricFamily(f"{PREFIX}build", "Build metadata.")
        info.add_metric([], {"version": __version__, "python": platform.python_version()})
        yield info
        events = CounterMetricFamily(f"{PREFIX}events", "Messages read from Kafka, by outcome.", labels=["outcome"])
        events.add_metric(["processed"], snap.processed)
        events.add_metric(["rejected"], sum(snap.rejected.values()))
        yield events
        dead = CounterMetricFamily(f"{PREFIX}dead_letters", "Rejected messages by reason.", labels=["reason"])
        for reason in REASONS:
            dead.add_metric([reason], snap.rejected.get(reason, 0))
        yield dead
        yield GaugeMetricFamily(f"{PREFIX}assigned_partitions", "Partitions this replica owns.", value=health.assigned)
        lag = GaugeMetricFamily(f"{PREFIX}consumer_lag_messages", "Log end minus the next offset to process.",
                                labels=["topic", "partition"])
        for (topic, partition), value in sorted(health.lag.items()):
            lag.add_metric([topic, str(partition)], value)
        yield lag
        if health.last_checkpoint is not None:
            yield GaugeMetricFamily(f"{PREFIX}last_checkpoint_timestamp_seconds",
                                    "Time of the last successful checkpoint.", value=health.last_checkpoint)
            yield GaugeMetricFamily(f"{PREFIX}checkpoint_age_seconds", "Seconds since the last successful checkpoint.",
                                    value=snap.checkpoint_age)
        if health.last_contact is not None:
            yield GaugeMetricFamily(f"{PREFIX}kafka_last_contact_timestamp_seconds",
                                    "Time Kafka last answered this replica (a fetch, a log-end probe or an assignment).",
                                    value=health.last_contact)
        yield GaugeMetricFamily(f"{PREFIX}kafka_unreachable_seconds",
                                "Seconds Kafka has not answered this replica's probes; 0 while it answers.",
                                value=snap.unreachable_seconds)
        yield GaugeMetricFamily(f"{PREFIX}consumption_paused",
                                "1 while this replica has paused consumption because checkpoints keep failing.",
                                value=int(health.paused))
        resets = CounterMetricFamily(f"{PREFIX}offset_resets",
                                     "Partitions started afresh because their topic was recreated or its log lost.")
        resets.add_metric([], health.resets)
        yield resets
        aside = CounterMetricFamily(f"{PREFIX}checkpoints_set_aside",
                                    "Damaged checkpoints kept aside in the store, their partitions started afresh.")
        aside.add_metric([], health.set_aside)
        yield aside
        unreadable = GaugeMetricFamily(f"{PREFIX}unreadable_partitions",
                                       "Assigned partitions left paused and untouched because this release cannot read "
                                       "their checkpoint, by reason.", labels=["reason"])
        for reason in UNREADABLE:
            unreadable.add_metric([reason], sum(1 for r in health.unreadable.values() if r == reason))
        yield unreadable
        checkpoints = CounterMetricFamily(f"{PREFIX}checkpoints", "Checkpoint transactions by outcome.",
                                          labels=["outcome"])
        for outcome in ("ok", "error"):
            checkpoints.add_metric([outcome], health.checkpoints.get(outcome, 0))
        yield checkpoints


_DESCRIBED = Health(last_checkpoint=0.0, last_contact=0.0)  # every optional family present
