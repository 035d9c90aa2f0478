"""One tool of bench/peers.py over the filled topic, in a process of its own.

`python peer_runs.py TOOL BOOTSTRAP TOPIC COUNT GROUP` reads COUNT records
with TOOL and prints one JSON line: its rate from the first record received
to the last processed (not counting what arrived before the clock started: a
raw consumer's first poll), and its totals of the families in families.py
(none for the raw consumers, which compute nothing). Each tool's library is
imported in its own function: the whylogs run has an environment of its own.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import families

WINDOW = timedelta(minutes=5)
LATENESS = timedelta(minutes=1)  # the windowed peers' grace: the generator's events arrive within it
FRAME = 1000  # rows per whylogs frame
Measured = tuple[float, dict[str, Any] | None]  # events/s, and the families' totals (none from a bare consumer)


class Clock:
    """Marks the first tick and the one that reaches `count` records; `tick(n)` follows n records handled,
    and returns True at that one. The rate counts the records handled after the first mark, since those
    the first tick reports (a whole poll, for a raw consumer) came in before the clock started."""

    def __init__(self, count: int):
        self.count, self.seen, self.untimed = count, 0, 0
        self.first: float | None = None
        self.last: float | None = None

    def tick(self, n: int = 1) -> bool:
        if self.first is None:
            self.first, self.untimed = time.perf_counter(), n
        self.seen += n
        if self.seen >= self.count and self.last is None:
            self.last = time.perf_counter()
            return True
        return False

    @property
    def rate(self) -> float:
        assert self.first is not None and self.last is not None, "read once `tick` returned True"
        return (self.seen - self.untimed) / (self.last - self.first)


def raw_kafka_python(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    from throughput import raw_rate

    return raw_rate(bootstrap, count, group, topic), None


def raw_confluent_kafka(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    clock = Clock(count)
    while clock.last is None:
        records = sum(message.error() is None for message in consumer.consume(num_messages=2000, timeout=0.5))
        if records:
            clock.tick(records)
    consumer.close()
    return clock.rate, None


def agent(bootstrap: str, topic: str, count: int, group: str, library: str = "kafka-python") -> Measured:
    """The agent as deployed, on the Kafka client `library`; its totals as its /metrics exposes them."""
    from urllib.request import urlopen

    from common import agent as build
    from common import consume
    from prometheus_client.parser import text_string_to_metric_families

    with tempfile.TemporaryDirectory() as workdir:
        running = build(bootstrap, topic, group, workdir, library)
        try:
            rate = consume(running, count)
            with urlopen(f"http://127.0.0.1:{running.server.port}/metrics") as response:
                text = response.read().decode()
        finally:
            running.close()
    return rate, _exposed(text_string_to_metric_families(text), "ragdrift_")


def _exposed(metric_families, prefix: str) -> dict:
    """Totals of the seven families from Prometheus samples, summed over every label but the families' own."""
    totals = families.empty()
    names = {f"{prefix}{name}": name for name in ("retrievals_total", "zero_result_retrievals_total",
                                                  "top1_score_count", "top1_score_sum", "content_age_days_count",
                                                  "content_age_days_sum", "unauthorized_results_total")}
    for metric in metric_families:
        for sample in metric.samples:
            name = names.get(sample.name)
            if name is not None:
                totals[name.removesuffix("_total")] += sample.value
            elif sample.name == f"{prefix}admitted_results_total":
                counts, label = totals["admitted_results"], sample.labels["source"]
                counts[label] = counts.get(label, 0) + sample.value
            elif sample.name == f"{prefix}filter_outcomes_total":
                counts, label = totals["filter_outcomes"], f"{sample.labels['filter']}/{sample.labels['status']}"
                counts[label] = counts.get(label, 0) + sample.value
    return totals


def by_hand(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    """What a team writes by hand: kafka-python, json, prometheus-client counters and histograms per app."""
    from kafka import KafkaConsumer
    from prometheus_client import CollectorRegistry, Counter, Histogram

    registry = CollectorRegistry()
    retrievals = Counter("by_hand_retrievals", "", ["app"], registry=registry)
    zero = Counter("by_hand_zero_result_retrievals", "", ["app"], registry=registry)
    top1 = Histogram("by_hand_top1_score", "", ["app"], registry=registry)
    age = Histogram("by_hand_content_age_days", "", ["app"], buckets=(1, 7, 30, 90, 365, 1825), registry=registry)
    admitted = Counter("by_hand_admitted_results", "", ["app", "source"], registry=registry)
    outcomes = Counter("by_hand_filter_outcomes", "", ["filter", "status"], registry=registry)
    unauthorized = Counter("by_hand_unauthorized_results", "", ["app"], registry=registry)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=2000, heartbeat_interval_ms=500)
    clock = Clock(count)
    while clock.last is None:
        for records in consumer.poll(timeout_ms=500, max_records=2000).values():
            for record in records:
                event = json.loads(record.value)
                app = event["app"]
                is_zero, score, ages, sources, filters, n_unauthorized = families.observe(event)
                retrievals.labels(app).inc()
                if is_zero:
                    zero.labels(app).inc()
                if score is not None:
                    top1.labels(app).observe(score)
                for days in ages:
                    age.labels(app).observe(days)
                for source in sources:
                    admitted.labels(app, source).inc()
                for outcome in filters:
                    outcomes.labels(*outcome.split("/")).inc()
                if n_unauthorized:
                    unauthorized.labels(app).inc(n_unauthorized)
                clock.tick()
    consumer.close()
    return clock.rate, _exposed(registry.collect(), "by_hand_")


def quix_streams(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    """Quix Streams: 5-minute tumbling windows per app (the message key) on the records' timestamps."""
    from quixstreams import Application

    with tempfile.TemporaryDirectory() as state:
        app = Application(broker_address=bootstrap, consumer_group=group, auto_offset_reset="earliest",
                          state_dir=state, use_changelog_topics=False, auto_create_topics=False)
        source = app.topic(topic, value_deserializer="json")
        # tansu's topic configs name no retention, which Quix reads to configure its window store: keep all
        source.broker_config.extra_config.setdefault("retention.ms", "-1")
        source.broker_config.extra_config.setdefault("retention.bytes", "-1")
        sdf = app.dataframe(source)
        sdf = sdf.apply(families.observe)
        sdf = sdf.tumbling_window(WINDOW, grace_ms=LATENESS).reduce(
            lambda totals, observed: families.add(totals, observed),
            lambda observed: families.add(families.empty(), observed)).current()
        windows: dict = {}  # (app, window start): its totals so far
        clock = Clock(count)

        def keep(window, key, timestamp, headers):
            windows[key, window["start"]] = window["value"]
            if clock.tick():
                app.stop()

        sdf.update(keep, metadata=True)
        app.run()
    return clock.rate, _merged(windows.values())


def bytewax(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    """Bytewax: its Kafka connector, 5-minute tumbling windows per app on the records' timestamps."""
    import bytewax.operators as op
    from bytewax.connectors.kafka import KafkaSource
    from bytewax.dataflow import Dataflow
    from bytewax.operators.windowing import EventClock, TumblingWindower, fold_window
    from bytewax.testing import run_main

    clock = Clock(count)

    def observe(message):
        observed = message.timestamp[1], families.observe(json.loads(message.value))
        clock.tick()
        return observed

    def app_of(message):  # the source raises on errors (its default), so every item is a message with a key
        return message.key.decode()

    flow = Dataflow("peers")
    records = op.input("kafka", flow, KafkaSource([bootstrap], [topic], tail=False, add_config={"group.id": group}))
    keyed = op.key_on("app", records, app_of)
    observed = op.map_value("observe", keyed, observe)
    windows = fold_window("windows", observed,
                          EventClock(lambda item: datetime.fromtimestamp(item[0] / 1000, UTC), LATENESS),
                          TumblingWindower(WINDOW, datetime(2026, 1, 1, tzinfo=UTC)), families.empty,
                          lambda totals, item: families.add(totals, item[1]), families.merge)
    closed = []
    op.inspect("collect", windows.down, lambda step, item: closed.append(item[1][1]))
    run_main(flow)
    return clock.rate, _merged(closed)


def whylogs(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    """whylogs: column profiles of each event's family values, logged in frames of 1,000 rows."""
    import pandas
    import whylogs as why
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=2000, heartbeat_interval_ms=500)
    clock, rows, view = Clock(count), [], None
    while clock.last is None:
        for records in consumer.poll(timeout_ms=500, max_records=2000).values():
            for record in records:
                rows.append(_row(families.observe(json.loads(record.value))))
                if clock.tick() or len(rows) == FRAME:
                    frame = pandas.DataFrame(rows)
                    logged = why.log(frame.fillna({c: 0 for c in frame.columns if c != "top1_score"})).view()
                    view = logged if view is None else view.merge(logged)
                    rows = []
    consumer.close()
    assert view is not None  # the count-th record's tick logged a frame
    totals = families.empty()
    for name, column in view.get_columns().items():
        n, nulls = column.get_metric("counts").n.value, column.get_metric("counts").null.value
        mean = column.get_metric("distribution").mean.value
        total = mean * (n - nulls) if n > nulls else 0.0
        if name == "top1_score":
            totals["top1_score_count"], totals["top1_score_sum"] = n - nulls, total
        elif name == "content_age_days_sum":
            totals[name] = total
        elif ":" in name:
            table, label = name.split(":", 1)
            totals[table][label] = round(total)
        else:
            totals[name] = round(total)
    return clock.rate, totals


def _row(observed: tuple) -> dict:
    zero, top1, ages, sources, filters, unauthorized = observed
    row = {"retrievals": 1, "zero_result_retrievals": int(zero), "top1_score": top1,
           "content_age_days_count": len(ages), "content_age_days_sum": sum(ages), "unauthorized_results": unauthorized}
    for table, labels in (("admitted_results", sources), ("filter_outcomes", filters)):
        for label in labels:
            row[f"{table}:{label}"] = row.get(f"{table}:{label}", 0) + 1
    return row


def _merged(window_totals) -> dict:
    totals = families.empty()
    for window in window_totals:
        families.merge(totals, window)
    return totals


def agent_on_librdkafka(bootstrap: str, topic: str, count: int, group: str) -> Measured:
    """The agent with `kafka.library: confluent-kafka`."""
    return agent(bootstrap, topic, count, group, "confluent-kafka")


TOOLS = {"kafka-python": raw_kafka_python, "confluent-kafka": raw_confluent_kafka, "agent": agent,
         "agent-confluent": agent_on_librdkafka, "by-hand": by_hand, "quix-streams": quix_streams, "bytewax": bytewax,
         "whylogs": whylogs}

if __name__ == "__main__":
    tool, bootstrap, topic, count, group = sys.argv[1:]
    rate, totals = TOOLS[tool](bootstrap, topic, int(count), group)
    print(json.dumps({"rate": rate, "totals": totals}))
