"""The producer library against a real broker: events arrive, the app is never held up.

Every call to `Producer.retrieval` is accounted for exactly once (sent,
failed, dropped by reason, or still held), the queue's bound in events and in
bytes holds however long the broker is away, and events flow again once it is
back, on the same producer.
"""

from __future__ import annotations

import json
import threading
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from kafka import KafkaConsumer
from kafka.errors import TopicAlreadyExistsError

from agent.demo.broker import Tansu
from agent.demo.process import free_port, wait_until
from ragdrift_producer import Dropped, HashKey, Producer, Result, Stats, User
from ragdrift_producer.metrics import _COLLECTORS
from tests.services import poll_records, unique_name

pytestmark = pytest.mark.broker

KEY = HashKey(b"0123456789abcdef0123456789abcdef")
USER = User(tenant="acme", groups=["support", "emea"])
TS = datetime(2026, 12, 7, 9, 30, tzinfo=UTC)
# kafka-python's timeouts, short where a broker that is away is waited for (a first connection, a delivery),
# long enough where a loaded machine should not fail a healthy send (a metadata wait, a request).
FAST = {"bootstrap_timeout_ms": 1000, "max_block_ms": 10_000, "request_timeout_ms": 3000,
        "delivery_timeout_ms": 5000, "linger_ms": 5, "retry_backoff_ms": 50,
        "reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 200}


def results(n: int = 3) -> list[Result]:
    return [Result(chunk_id=f"c{i}", parent_id=f"d{i}", source="wiki", score=1.0 - i / 10, acl=["support"],
                   text=f"passage {i} about refunds and returns") for i in range(n)]


def producer(bootstrap: str, topic: str, **options) -> Producer:
    kafka = {"bootstrap_servers": bootstrap, "client_id": unique_name("producer"), **FAST, **options.pop("kafka", {})}
    options.setdefault("registry", None)
    return Producer(app="tests", key=KEY, kafka=kafka, topic=topic, **options)


def call(p: Producer, n: int) -> str | None:
    """One retrieval of a fixed size (a fixed-width id, a fixed time)."""
    return p.retrieval(query="how do refunds work", user=USER, results=results(), ts=TS, event_id=f"e{n:07d}")


def calls(stats: Stats) -> int:
    """The calls a producer's counts account for."""
    return stats.sent + stats.failed + sum(stats.dropped.values()) + stats.queued_events


def consumed(bootstrap: str, topic: str, count: int | None = None,
             until=None, timeout: float = 30.0) -> list[dict]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        return [json.loads(r.value) for r in poll_records(consumer, count=count, timeout=timeout, until=until)]
    finally:
        consumer.close()


def create(broker: Tansu, topic: str) -> None:
    try:
        broker.create_topic(topic, 1)
    except TopicAlreadyExistsError:
        pass  # tansu creates a topic a client asks about; the producer may have asked first


@pytest.fixture
def dead() -> str:
    """A bootstrap address with nothing listening on it."""
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def private_broker(tansu_bin) -> Iterator[list[Tansu]]:
    """Brokers of this test only (it stops and restarts them); all stopped at the end."""
    started: list[Tansu] = []
    yield started
    for b in started:
        b.stop()


def start(started: list[Tansu], binary: str, port: int | None = None) -> Tansu:
    b = Tansu(port=port, binary=binary)
    started.append(b)
    return b.start()


def stopped(p: Producer) -> bool:
    """Whether the producer's thread and its kafka-python network thread have ended."""
    network = f"{p._sender.kafka['client_id']}-network-thread"
    return not p._sender._thread.is_alive() and all(t.name != network for t in threading.enumerate())


# -- delivery ---------------------------------------------------------------------------


def test_events_arrive_on_the_topic_and_close_sends_what_is_queued(broker, make_topic):
    topic = make_topic()
    p = producer(broker.bootstrap, topic)
    ids = [p.retrieval(query=f"refund policy {n}", user=USER, results=results()) for n in range(50)]
    assert all(ids) and len(set(ids)) == 50
    stats = p.close(10)  # no wait before: close is what sends them
    assert (stats.sent, stats.failed, stats.dropped, stats.queued_events, stats.queued_bytes) == (50, 0, {}, 0, 0)
    events = consumed(broker.bootstrap, topic, count=50)
    assert sorted(e["event_id"] for e in events) == sorted(ids)
    assert {e["schema"] for e in events} == {"retrieval.v1"}
    assert {e["app"] for e in events} == {"tests"}
    assert all(len(e["results"]) == 3 for e in events)
    wait_until(lambda: stopped(p), 10, 0.05, "the library's threads stopped")
    assert p.retrieval(query="after close", user=USER, results=results()) is None
    assert p.stats().dropped == {"closed": 1}


# -- strict and not -----------------------------------------------------------------------


def test_strict_raises_dropped_for_a_bad_event_and_a_full_queue(dead):
    p = producer(dead, "t", strict=True, max_queue_events=2)
    try:
        with pytest.raises(Dropped) as bad:
            p.retrieval(query="q", user=USER, results=[Result(chunk_id="c", parent_id="d", source="s",
                                                              score=float("nan"))])
        assert bad.value.reason == "invalid_score"
        with pytest.raises(Dropped) as nobody:
            p.retrieval(query="q", results=results())
        assert nobody.value.reason == "missing_tenant"
        assert call(p, 1) and call(p, 2)
        with pytest.raises(Dropped) as full:
            call(p, 3)
        assert full.value.reason == "queue_full"
        assert p.stats().dropped == {"invalid_score": 1, "missing_tenant": 1, "queue_full": 1}
    finally:
        p.close(0)


def test_non_strict_never_raises_and_counts_each_drop_where_it_happens(broker, make_topic):
    """A call returns at once: values no event can be made of are dropped on the library's thread
    (counted there, nothing sent), values that are no sequence and a full queue at once (None)."""
    topic = make_topic()
    p = producer(broker.bootstrap, topic)
    hostile = [
        {"query": None, "user": USER, "results": results()},
        {"query": "q", "results": results()},
        {"query": "q", "user": USER, "results": [None]},
        {"query": "q", "user": USER, "results": "not results"},
        {"query": "q", "user": USER, "results": [Result(chunk_id="", parent_id="d", source="s", score=1.0)]},
        {"query": "q", "user": User(tenant="acme", groups=["g"] * 5000), "results": results()},
    ]
    try:
        assert all(p.retrieval(**kwargs) is not None for kwargs in hostile)
        assert p.retrieval(query="q", user=USER, results=5) is None  # type: ignore[arg-type]
        assert call(p, 1) == "e0000001"
        wait_until(lambda: p.stats().sent == 1, 30, 0.02, "the good event sent")
        stats = p.stats()
        assert stats.dropped == {"invalid_query": 1, "missing_tenant": 1, "invalid_input": 3,
                                 "missing_chunk_id": 1, "too_many_groups": 1}
        assert [e["event_id"] for e in consumed(broker.bootstrap, topic, count=1)] == ["e0000001"]
    finally:
        p.close(5)
    full = producer(f"127.0.0.1:{free_port()}", "t", max_queue_events=2)
    try:
        assert call(full, 1) and call(full, 2) and call(full, 3) is None
        assert full.stats().dropped == {"queue_full": 1}
    finally:
        full.close(0)


# -- the bound --------------------------------------------------------------------------------


def test_the_queue_is_bounded_in_events_when_kafka_is_never_reachable(dead):
    p = producer(dead, "t", max_queue_events=50)
    for n in range(2000):
        call(p, n)
        stats = p.stats()
        assert stats.queued_events <= 50
    assert not p.connected
    assert stats.queued_events == 50 and stats.dropped == {"queue_full": 1950} and stats.sent == stats.failed == 0
    stats = p.close(0.2)
    assert stats.dropped == {"queue_full": 1950, "closed": 50}
    assert (stats.queued_events, stats.queued_bytes) == (0, 0)


def test_the_queue_is_bounded_in_bytes_when_kafka_is_never_reachable(dead):
    probe = producer(dead, "t")
    call(probe, 0)
    size = probe.stats().queued_bytes
    probe.close(0)
    limit = 10 * size + size // 2  # room for ten events and a half
    p = producer(dead, "t", max_queue_bytes=limit)
    for n in range(1000):
        call(p, n)
        assert p.stats().queued_bytes <= limit
    stats = p.close(0)
    assert stats.dropped == {"queue_full": 990, "closed": 10}


def test_a_broker_stopped_and_restarted(tansu_bin, private_broker):
    """Thousands of calls while the broker is away hold no more than the bound; the same
    producer sends again once a broker is back on the same address (memory storage: the
    topic is made again)."""
    b = start(private_broker, tansu_bin)
    topic = "restart"
    b.create_topic(topic, 1)
    max_events, max_bytes = 100, 64 * 1024
    p = producer(b.bootstrap, topic, max_queue_events=max_events, max_queue_bytes=max_bytes)
    try:
        for n in range(20):
            call(p, n)
        wait_until(lambda: p.stats().sent == 20, 30, 0.05, "20 events sent")

        b.kill()  # a crash; stop() waits 5 s for tansu to end while clients are connected
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for n in range(20, 5020):
                call(p, n)
                if n % 50 == 0:
                    stats = p.stats()
                    assert stats.queued_events <= max_events and stats.queued_bytes <= max_bytes
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        stats = p.stats()
        assert calls(stats) == 5020
        assert stats.sent == 20 and stats.dropped["queue_full"] > 0 and set(stats.dropped) == {"queue_full"}
        # The queue and kafka-python's batches each hold at most the bound's bytes; beyond them, a
        # fixed allowance for kafka-python's reconnection attempts. 5000 events unbounded would be
        # several times this.
        assert peak <= 4 * max_bytes + 1024 * 1024, peak
        # What was handed to Kafka fails at its delivery timeout and is counted. (Nothing pending when the
        # broker is back: tansu takes a batch for a topic it has not yet made and mangles the log.)
        wait_until(lambda: p.stats().queued_events == 0, 30, 0.05, "held events failed")
        assert p.stats().failed > 0

        b = start(private_broker, tansu_bin, port=b.port)
        create(b, topic)
        after = 0

        def sending() -> bool:
            nonlocal after
            after += 1
            p.retrieval(query="back again", user=USER, results=results(), event_id=f"after-{after}")
            return p.stats().sent > 20

        wait_until(sending, 60, 0.1, "events sent after the restart")
    finally:
        stats = p.close(5)
    assert calls(stats) == 5020 + after and stats.queued_events == 0
    events = consumed(b.bootstrap, topic, count=stats.sent - 20)  # the new broker's log: what came after
    assert {e["event_id"] for e in events} <= {f"after-{n}" for n in range(1, after + 1)}
    assert f"after-{after}" in {e["event_id"] for e in events}


def test_a_producer_built_while_the_broker_is_down_sends_once_it_is_up(tansu_bin, private_broker):
    port = free_port()
    p = producer(f"127.0.0.1:{port}", "late", max_queue_events=100)
    try:
        assert not p.connected
        ids = [call(p, n) for n in range(10)]
        assert all(ids) and p.stats().queued_events == 10  # held, not dropped, while there is room
        b = start(private_broker, tansu_bin, port=port)
        create(b, "late")
        wait_until(lambda: p.stats().sent == 10, 60, 0.05, "the held events sent")
        assert p.connected
        events = consumed(b.bootstrap, "late", count=10)
        assert sorted(e["event_id"] for e in events) == sorted(ids)
    finally:
        stats = p.close(5)
    assert (stats.sent, stats.failed, stats.dropped) == (10, 0, {})


# -- close ---------------------------------------------------------------------------------------


def test_close_with_kafka_never_reached_drops_what_is_queued_as_closed(dead):
    p = producer(dead, "t")
    for n in range(20):
        call(p, n)
    stats = p.close(0.5)
    assert stats.dropped == {"closed": 20} and (stats.queued_events, stats.queued_bytes) == (0, 0)
    wait_until(lambda: stopped(p), 10, 0.05, "the library's threads stopped")


def test_close_with_the_broker_gone_counts_what_is_in_flight_as_closed(tansu_bin, private_broker):
    b = start(private_broker, tansu_bin)
    b.create_topic("gone", 1)
    p = producer(b.bootstrap, "gone", kafka={"delivery_timeout_ms": 60_000})  # in flight until close
    for n in range(10):
        call(p, n)
    wait_until(lambda: p.stats().sent == 10, 30, 0.05, "10 events sent")
    b.kill()
    for n in range(10, 40):
        call(p, n)
    stats = p.close(0.5)
    assert (stats.sent, stats.failed, stats.dropped) == (10, 0, {"closed": 30})
    assert (stats.queued_events, stats.queued_bytes) == (0, 0)
    # kafka-python's network thread is stopped too, not left reconnecting, and what it
    # reports of the aborted batches is not counted a second time.
    wait_until(lambda: stopped(p), 10, 0.05, "the library's threads stopped")
    assert p.stats() == stats


# -- prometheus-client -------------------------------------------------------------------------------


def test_counts_on_the_apps_registry(broker, make_topic):
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    topic = make_topic()
    registry = CollectorRegistry()
    p = producer(broker.bootstrap, topic, registry=registry)
    for n in range(3):
        call(p, n)
    p.retrieval(query="q", user=USER, results=[Result(chunk_id="c", parent_id="d", source="s", score=float("inf"))])
    p.close(10)
    text = generate_latest(registry).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    labels = (("app", "tests"), ("topic", topic))
    assert samples[("ragdrift_producer_events_sent_total", labels)] == 3
    assert samples[("ragdrift_producer_events_failed_total", labels)] == 0
    assert samples[("ragdrift_producer_events_dropped_total", (*labels[:1], ("reason", "invalid_score"),
                                                               *labels[1:]))] == 1
    assert samples[("ragdrift_producer_queue_events", labels)] == 0
    assert f'ragdrift_producer_events_sent_total{{app="tests",topic="{topic}"}} 3.0' in text

    quiet = producer(broker.bootstrap, make_topic(), registry=None)
    try:
        call(quiet, 0)
        assert all(quiet not in collector.producers for collector in _COLLECTORS.values())
        assert quiet.topic not in generate_latest(REGISTRY).decode()
    finally:
        quiet.close(5)
