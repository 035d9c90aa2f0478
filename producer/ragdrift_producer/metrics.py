"""The producer's counts on the app's own prometheus-client registry.

prometheus-client is optional: without it, `Producer.stats()` is the only way
to read them. One collector per registry reads every live producer at scrape
time (nothing is done per event), summed per app and topic.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragdrift_producer.producer import Producer

_COLLECTORS: weakref.WeakKeyDictionary[Any, _Collector] = weakref.WeakKeyDictionary()


def export(producer: Producer, registry: Any) -> None:
    """Add `producer` to `registry`'s collector; "default" is prometheus-client's global one, when installed."""
    if registry == "default":
        try:
            from prometheus_client import REGISTRY
        except ImportError:
            return
        registry = REGISTRY
    collector = _COLLECTORS.get(registry)
    if collector is None:
        collector = _COLLECTORS[registry] = _Collector()
        registry.register(collector)
    collector.producers.add(producer)


class _Collector:
    def __init__(self) -> None:
        self.producers: weakref.WeakSet[Producer] = weakref.WeakSet()

    def describe(self) -> list[Any]:
        return []  # counts appear with the first producer; nothing to check up front

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        sent: Counter[tuple[str, ...]] = Counter()
        failed: Counter[tuple[str, ...]] = Counter()
        dropped: Counter[tuple[str, ...]] = Counter()
        adjusted: Counter[tuple[str, ...]] = Counter()
        queued: Counter[tuple[str, ...]] = Counter()
        queued_bytes: Counter[tuple[str, ...]] = Counter()
        for producer in list(self.producers):
            stats, labels = producer.stats(), (producer.app, producer.topic)
            sent[labels] += stats.sent
            failed[labels] += stats.failed
            queued[labels] += stats.queued_events
            queued_bytes[labels] += stats.queued_bytes
            for reason, n in stats.dropped.items():
                dropped[(*labels, reason)] += n
            for rule, n in stats.adjusted.items():
                adjusted[(*labels, rule)] += n
        names = ["app", "topic"]
        families: list[tuple[Any, Counter[tuple[str, ...]]]] = [
            (CounterMetricFamily("ragdrift_producer_events_sent", "Events the broker acknowledged.",
                                 labels=names), sent),
            (CounterMetricFamily("ragdrift_producer_events_failed", "Events handed to Kafka that it did not deliver.",
                                 labels=names), failed),
            (CounterMetricFamily("ragdrift_producer_events_dropped", "Events never sent, by reason.",
                                 labels=[*names, "reason"]), dropped),
            (CounterMetricFamily("ragdrift_producer_values_adjusted",
                                 "Values brought within the event contract, by rule.",
                                 labels=[*names, "rule"]), adjusted),
            (GaugeMetricFamily("ragdrift_producer_queue_events", "Events queued or in flight.", labels=names), queued),
            (GaugeMetricFamily("ragdrift_producer_queue_bytes", "Bytes queued or in flight.", labels=names),
             queued_bytes),
        ]
        for family, values in families:
            for key, value in sorted(values.items()):
                family.add_metric(list(key), value)
            yield family
