"""Prometheus exposition: a collector that renders the latest published snapshot.

The agent loop publishes an immutable `Snapshot` every second or so; a scrape
only reads the reference it finds, builds fresh metric families from it, and
never touches live state. No series outlives the snapshot that held it.
Label values are folded to the top N by volume plus `other`.
"""

from __future__ import annotations

import platform
import ssl
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer
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
from agent.core.sources import concentration
from agent.core.tally import Counter, Histogram, Key, Tally, total

PREFIX = "ragdrift_"
# Which family ranks the values of each label dimension.
VOLUME = {
    "app": "retrievals",
    "source": "admitted_results",
    "filter": "filter_outcomes",
    "query_type": "query_type_retrievals",
    "language": "query_language_retrievals",
}
EXEMPLAR_FAMILIES = ("unauthorized_results", "unauthorized_retrievals", "stale_results")


@dataclass(frozen=True)
class Snapshot:
    """Everything a scrape shows, frozen at one moment of the agent loop."""

    counters: Tally = field(default_factory=dict)  # process-local totals
    windows: dict[str, Tally] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    exemplars: dict[Key, tuple[str, float]] = field(default_factory=dict)  # (family, app) -> (trace id, time)
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    assigned: int = 0
    last_checkpoint: float | None = None
    checkpoints: dict[str, int] = field(default_factory=dict)
    resets: int = 0  # partitions whose log restarted below their checkpoint
    last_contact: float | None = None  # epoch s of Kafka's last answer
    unreachable_since: float | None = None  # set while Kafka does not answer


class RagdriftCollector:
    def __init__(self, config: CoreConfig, top_n: int = 50, clock=time.time):
        self.config = config
        self.top_n = top_n
        self.clock = clock
        self.snapshot = Snapshot()
        self._families = {f.name: f for f in FAMILIES}
        self._kept: dict[str, set[str]] = {dim: set() for dim in VOLUME}
        self._last: Tally = {}  # last exported counter values, see _steady
        self._lock = threading.Lock()

    def publish(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        # Rank by this process's counts and the longest window, so that values
        # restored from a checkpoint keep their names after a restart.
        longest = snap.windows.get(max(self.config.windows, key=lambda window: window[1])[0], {})
        keep = self._top_values(total([snap.counters, longest]))
        counters = self._steady(self._fold(snap.counters, keep))
        apps = sorted({k[1] for k in counters if k[0] == "retrievals"})
        yield from self._health(snap)
        for family in FAMILIES:
            if isinstance(family, Counter):
                yield self._counter(family, counters, apps, snap.exemplars)
            else:
                yield self._histogram(family, counters)
        windows = {name: self._fold(tally, keep) for name, tally in snap.windows.items()}
        yield from self._window_gauges(windows)
        yield from self._concentration(snap.windows)

    def _top_values(self, counters: Tally) -> dict[str, set[str]]:
        """Label values to show: sticky for the process, so a counter series
        never moves into `other` and back (which would read as a reset)."""
        volume: dict[str, dict[str, float]] = {dim: defaultdict(float) for dim in VOLUME}
        for key, value in counters.items():
            family = self._families.get(key[0])
            if family is None:
                continue
            for position, dim in enumerate(family.labels, start=1):
                if VOLUME.get(dim) == key[0]:
                    volume[dim][key[position]] += value
        with self._lock:
            for dim, values in volume.items():
                kept = self._kept[dim]
                for value in sorted(values, key=lambda v: (-values[v], v)):
                    if len(kept) >= self.top_n:
                        break
                    if value != OTHER:
                        kept.add(value)
            return {dim: set(kept) for dim, kept in self._kept.items()}

    def _fold(self, tally: Tally, keep: dict[str, set[str]]) -> Tally:
        out: Tally = defaultdict(float)
        for key, value in tally.items():
            family = self._families.get(_family_name(key[0]))
            if family is None:
                continue
            labels = list(key[1:])
            for i, dim in enumerate(family.labels):
                if dim in keep and labels[i] not in keep[dim]:
                    labels[i] = OTHER
            out[(key[0], *labels)] += value
        return out

    def _steady(self, counters: Tally) -> Tally:
        """Hide float noise: regrouping the same observations can move a sum
        down by an ulp, which Prometheus would read as a counter reset. A real
        decrease (a histogram of negative scores) is far larger and passes."""
        with self._lock:
            out = {}
            for key, value in counters.items():
                last = self._last.get(key)
                if last is not None and last - 1e-9 * max(1.0, abs(last)) <= value < last:
                    value = last
                out[key] = self._last[key] = value
            return out

    def _counter(self, family: Counter, counters: Tally, apps: list[str], exemplars: dict) -> Metric:
        metric = CounterMetricFamily(PREFIX + family.name, family.help, labels=family.labels)
        values = {k[1:]: v for k, v in counters.items() if k[0] == family.name}
        if family.labels == ("app",):
            for app in apps:
                values.setdefault((app,), 0)
        elif not family.labels:
            values.setdefault((), 0)
        for labels, value in sorted(values.items()):
            found = exemplars.get((family.name, *labels)) if family.name in EXEMPLAR_FAMILIES else None
            exemplar = Exemplar({"trace_id": found[0]}, 1.0, found[1]) if found else None
            metric.add_metric(list(labels), value, exemplar=exemplar)
        return metric

    def _histogram(self, family: Histogram, counters: Tally) -> Metric:
        metric = HistogramMetricFamily(PREFIX + family.name, family.help, labels=family.labels)
        counts: dict[tuple, dict[str, float]] = defaultdict(dict)
        sums: dict[tuple, float] = {}
        for key, value in counters.items():
            if key[0] == family.name + "_bucket":
                counts[key[1:-1]][key[-1]] = value
            elif key[0] == family.name + "_sum":
                sums[key[1:]] = value
        for labels in sorted(sums):
            if family.buckets == "score" and labels and labels[0] != OTHER:
                les = self.config.score_buckets(labels[0]).labels
            else:
                les = self.config.bucket_set(family.buckets).labels
            seen = counts[labels]
            les = sorted(set(les) | set(seen), key=float)
            running, buckets = 0.0, []
            for le in les:
                running += seen.get(le, 0)
                buckets.append((le, running))
            metric.add_metric(list(labels), buckets, sums[labels])
        return metric

    def _window_gauges(self, windows: dict[str, Tally]) -> Iterator[Metric]:
        for family in FAMILIES:
            names = (
                [(family.name, family.help)]
                if isinstance(family, Counter)
                else [(f"{family.name}_sum", f"Sum of {family.name} in the window."), (f"{family.name}_count", f"Observations of {family.name} in the window.")]
            )
            if isinstance(family, Counter) and not family.windowed:
                continue
            for name, help_text in names:
                gauge = GaugeMetricFamily(f"{PREFIX}window_{name}", help_text + " (rolling window)", labels=[*family.labels, "window"])
                for window, tally in windows.items():
                    for key, value in sorted(tally.items()):
                        if key[0] == name:
                            gauge.add_metric([*key[1:], window], value)
                yield gauge
        yield from self._ratios(windows)

    def _ratios(self, windows: dict[str, Tally]) -> Iterator[Metric]:
        zero = GaugeMetricFamily(f"{PREFIX}window_zero_result_ratio", "Zero-result events / events, per replica.", labels=["app", "window"])
        new_terms = GaugeMetricFamily(f"{PREFIX}window_new_term_ratio", "New-term occurrences / term occurrences, per replica.", labels=["app", "window"])
        for window, tally in windows.items():
            for key, events in sorted(tally.items()):
                if key[0] == "retrievals" and events:
                    zero.add_metric([key[1], window], tally.get(("zero_result_retrievals", key[1]), 0) / events)
                elif key[0] == "query_terms" and events:
                    new_terms.add_metric([key[1], window], tally.get(("query_new_terms", key[1]), 0) / events)
        yield from (zero, new_terms)

    def _concentration(self, windows: dict[str, Tally]) -> Iterator[Metric]:
        """From the sources as the core keeps them, before any top-N folding."""
        hhi = GaugeMetricFamily(f"{PREFIX}window_source_hhi_ratio", "Herfindahl index of admitted results over sources.", labels=["window"])
        top = GaugeMetricFamily(f"{PREFIX}window_top_source_share_ratio", "Largest source's share of admitted results.", labels=["window"])
        for window, tally in windows.items():
            by_source: dict[str, float] = defaultdict(float)
            for key, value in tally.items():
                if key[0] == "admitted_results":
                    by_source[key[2]] += value
            if by_source:
                h, t = concentration(by_source)
                hhi.add_metric([window], h)
                top.add_metric([window], t)
        yield from (hhi, top)

    def _health(self, snap: Snapshot) -> Iterator[Metric]:
        info = InfoMetricFamily(f"{PREFIX}build", "Build metadata.")
        info.add_metric([], {"version": __version__, "python": platform.python_version()})
        yield info
        events = CounterMetricFamily(f"{PREFIX}events", "Messages read from Kafka, by outcome.", labels=["outcome"])
        processed = sum(v for k, v in snap.counters.items() if k[0] == "retrievals")
        events.add_metric(["processed"], processed)
        events.add_metric(["rejected"], sum(snap.rejected.values()))
        yield events
        dead = CounterMetricFamily(f"{PREFIX}dead_letters", "Rejected messages by reason.", labels=["reason"])
        for reason in ("invalid_json", "invalid_field", "unsupported_schema", "too_large", "pii_suspected"):
            dead.add_metric([reason], snap.rejected.get(reason, 0))
        yield dead
        yield GaugeMetricFamily(f"{PREFIX}assigned_partitions", "Partitions this replica owns.", value=snap.assigned)
        lag = GaugeMetricFamily(f"{PREFIX}consumer_lag_messages", "End offset minus the next offset to process.", labels=["topic", "partition"])
        for (topic, partition), value in sorted(snap.lag.items()):
            lag.add_metric([topic, str(partition)], value)
        yield lag
        if snap.last_checkpoint is not None:
            yield GaugeMetricFamily(f"{PREFIX}last_checkpoint_timestamp_seconds", "Time of the last successful checkpoint.", value=snap.last_checkpoint)
            yield GaugeMetricFamily(f"{PREFIX}checkpoint_age_seconds", "Seconds since the last successful checkpoint.", value=max(0.0, self.clock() - snap.last_checkpoint))
        if snap.last_contact is not None:
            yield GaugeMetricFamily(f"{PREFIX}kafka_last_contact_timestamp_seconds",
                                    "Time Kafka last answered this replica (a fetch or a log-end probe).",
                                    value=snap.last_contact)
        since = snap.unreachable_since
        yield GaugeMetricFamily(f"{PREFIX}kafka_unreachable_seconds",
                                "Seconds Kafka has not answered this replica's probes; 0 while it answers.",
                                value=0.0 if since is None else max(0.0, self.clock() - since))
        resets = CounterMetricFamily(f"{PREFIX}offset_resets", "Partitions restarted afresh because their log began below the checkpoint.")
        resets.add_metric([], snap.resets)
        yield resets
        checkpoints = CounterMetricFamily(f"{PREFIX}checkpoints", "Checkpoint transactions by outcome.", labels=["outcome"])
        for outcome in ("ok", "error"):
            checkpoints.add_metric([outcome], snap.checkpoints.get(outcome, 0))
        yield checkpoints


def _family_name(key_name: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if key_name.endswith(suffix):
            return key_name[: -len(suffix)]
    return key_name


class _QuietHandler(WSGIRequestHandler):
    timeout = 30  # an idle connection cannot hold a handler thread forever

    def log_message(self, format, *args):  # noqa: A002 - scrapes are not news
        pass


class MetricsServer:
    """`/metrics` (text and OpenMetrics), `/healthz` and `/readyz` on one port."""

    def __init__(self, registry: CollectorRegistry, address: str, port: int, health, ready,
                 cert_file: str | None = None, key_file: str | None = None):
        metrics = make_wsgi_app(registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO", "/")
            for route, check in (("/healthz", health), ("/readyz", ready)):
                if path == route:
                    ok, why = check()
                    start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
                    return [why.encode() + b"\n"]
            return metrics(environ, start_response)

        self.httpd = make_server(address, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        if cert_file:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert_file, key_file)
            # The handshake happens in the request's own thread, so an idle
            # connection cannot stall accept() for everyone else.
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
