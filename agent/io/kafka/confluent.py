"""librdkafka (confluent-kafka) behind the consumer and producer surface the
agent uses of kafka-python, so the loop, the ownership of partitions and the
dead letters run unchanged on either library.

What differs underneath, and is made the same here:
- rebalance callbacks run inside `poll()` on the calling thread, and a
  partition's start is given with its assignment: seeks made by the listener
  while it is being assigned become the offsets it is assigned at;
- records are wrapped in `Record` (a tuple: cheap), keyed by kafka-python's
  `TopicPartition`; errors are raised as kafka-python's `KafkaError`;
- partitions librdkafka gives up in a broker outage stay the agent's until
  the group answers again, as in kafka-python (see `_lost`);
- the consumer has no topic ids (KIP-516) in its metadata: an admin client
  asks for them in the background, and `topic_id()` answers from the last answer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicCollection
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import Producer as _Producer
from confluent_kafka import TopicPartition as _Partition
from confluent_kafka.admin import AdminClient
from kafka import TopicPartition
from kafka.errors import KafkaError

log = logging.getLogger("ragdrift.agent")
TOPIC_IDS_EVERY = 2.0  # seconds between asks for the topics' ids


class _Log:
    """librdkafka's log lines, through the `librdkafka` logger. A broker that
    does not answer is logged once by the agent ("kafka unreachable"), so
    librdkafka's line for each failed connection attempt (many a second) is
    debug."""

    logger = logging.getLogger("librdkafka")

    def log(self, level: int, text: str, facility: str, *args) -> None:
        self.logger.log(logging.DEBUG if facility == "FAIL" else level, text, facility, *args)


LIBRDKAFKA_LOG = _Log()


class Record(tuple):
    """A consumed record with the attributes the agent reads of kafka-python's."""

    __slots__ = ()
    topic = property(itemgetter(0))
    partition = property(itemgetter(1))
    offset = property(itemgetter(2))
    timestamp = property(itemgetter(3))  # ms since the epoch; not positive when the record has none
    key = property(itemgetter(4))
    value = property(itemgetter(5))
    headers = property(itemgetter(6))


_record = tuple.__new__


class Consumer:
    """A group consumer with kafka-python's methods, on librdkafka."""

    def __init__(self, config: dict, admin: dict, max_records: int):
        self.max_records = max_records
        self.incremental = ("cooperative" in str(config.get("partition.assignment.strategy", ""))
                            or config.get("group.protocol") == "consumer")
        self.consumer = _Consumer({**config, "logger": LIBRDKAFKA_LOG, "on_commit": self._committed})
        self.admin = AdminClient({**admin, "logger": LIBRDKAFKA_LOG})
        self.listener: Any = None  # the agent's rebalance listener, from subscribe()
        self.topics: list[str] = []
        self.assigning: dict[TopicPartition, int] | None = None  # starts given while being assigned
        self.starts: dict[TopicPartition, int] = {}  # logical starts not yet resolved to an offset
        self.next_offsets: dict[TopicPartition, int] = {}  # after the last record handed out, or the last seek
        self.held: set[TopicPartition] = set()  # lost by librdkafka, still the agent's (see _lost)
        self.paused_now: set[TopicPartition] = set()
        self.commit_callback: Callable | None = None
        self.ids: dict[str, str] = {}
        self.asked: dict | None = None
        self.next_ask = 0.0

    # -- the group --------------------------------------------------------

    def subscribe(self, topics: list[str], listener) -> None:
        self.listener = listener
        self.topics = list(topics)
        self._ask_ids()
        self.consumer.subscribe(self.topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)

    def _assigned(self, consumer, partitions: list[_Partition]) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        gone = [tp for tp in self.held if tp not in tps]
        self.assigning = {}
        for tp in self.held & set(tps):  # back after a lost session: on from where the agent is
            start = self.next_offsets.get(tp, self.starts.get(tp))
            if start is not None:
                self.assigning[tp] = start
        self.held = set()
        try:
            if gone:
                self._release(gone, self.listener.on_partitions_lost)
            self.listener.on_partitions_assigned(tps)  # the agent loads and seeks the new ones
        finally:
            starts, self.assigning = self.assigning, None
            given = [_Partition(tp.topic, tp.partition, *([starts[tp]] if tp in starts else [])) for tp in tps]
            (consumer.incremental_assign if self.incremental else consumer.assign)(given)
            consumer.resume(given)  # a new assignment is not paused, as in kafka-python
            self.paused_now.difference_update(tps)

    def _revoked(self, consumer, partitions: list[_Partition]) -> None:
        self._release([TopicPartition(p.topic, p.partition) for p in partitions], self.listener.on_partitions_revoked)

    def _lost(self, consumer, partitions: list[_Partition]) -> None:
        """librdkafka drops its partitions once the group coordinator has been
        silent for a session (a broker outage). kafka-python keeps them until
        the group answers again, and so does the agent: it stays ready and
        measures the outage. At the next assignment, the partitions it gets
        back go on from where it is; the others are lost then."""
        self.held.update(TopicPartition(p.topic, p.partition) for p in partitions)

    def _release(self, tps: list[TopicPartition], call: Callable) -> None:
        try:
            call(tps)  # a revoked partition is checkpointed here, before it goes
        finally:
            for tp in tps:
                self.paused_now.discard(tp)
                self.starts.pop(tp, None)
                self.next_offsets.pop(tp, None)

    # -- records ----------------------------------------------------------

    def poll(self, timeout_ms: int) -> dict[TopicPartition, list[Record]]:
        try:
            messages = self.consumer.consume(self.max_records, timeout_ms / 1000)
        except KafkaException as exc:
            raise KafkaError(str(exc)) from None
        polled: dict[TopicPartition, list[Record]] = {}
        keys: dict[tuple[str, int], TopicPartition] = {}
        for m in messages:
            if m.error() is not None:
                log.warning("kafka consumer error", extra={"error": str(m.error())})
                continue
            where = (m.topic(), m.partition())
            tp = keys.get(where)
            if tp is None:
                tp = keys[where] = TopicPartition(*where)
                polled[tp] = []
            polled[tp].append(_record(Record, (where[0], where[1], m.offset(), m.timestamp()[1], m.key(), m.value(),
                                               m.headers())))
        for tp, records in polled.items():
            self.starts.pop(tp, None)
            self.next_offsets[tp] = records[-1].offset + 1
        return polled

    # -- positions --------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset >= 0:
            self.next_offsets[tp] = offset
        else:
            self.next_offsets.pop(tp, None)
        if self.assigning is not None:
            self.assigning[tp] = offset
            return
        if tp in self.held:
            return  # librdkafka has no such partition now: it starts there when assigned again
        try:
            self.consumer.seek(_Partition(tp.topic, tp.partition, offset))
        except KafkaException as exc:
            raise KafkaError(str(exc)) from None

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self.starts[tp] = OFFSET_BEGINNING
        self.seek(tp, OFFSET_BEGINNING)

    def seek_to_end(self, tp: TopicPartition) -> None:
        self.starts[tp] = OFFSET_END
        self.seek(tp, OFFSET_END)

    def position(self, tp: TopicPartition, timeout_ms: int) -> int | None:
        """The next offset to read; None while it cannot be told. A logical
        start (beginning, end) resolves to the log's low or high mark, as
        kafka-python's position does."""
        try:
            (found,) = self.consumer.position([_Partition(tp.topic, tp.partition)])
            if found.offset >= 0:
                return found.offset
            start = self.starts.get(tp)
            if start is None:
                return None
            low, high = self.consumer.get_watermark_offsets(_Partition(tp.topic, tp.partition), timeout_ms / 1000)
        except KafkaException:
            return None
        return low if start == OFFSET_BEGINNING else high

    def highwater(self, tp: TopicPartition) -> int | None:
        """The log end from the last fetch (no request)."""
        _, high = self.consumer.get_watermark_offsets(_Partition(tp.topic, tp.partition), cached=True)
        return high if high >= 0 else None

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: int) -> dict[TopicPartition, int]:
        """Each partition's log end, asked of the broker; `KafkaError` if it does not answer in time."""
        deadline = time.monotonic() + timeout_ms / 1000
        ends = {}
        try:
            for tp in partitions:
                left = max(0.001, deadline - time.monotonic())
                ends[tp] = self.consumer.get_watermark_offsets(_Partition(tp.topic, tp.partition), left)[1]
        except KafkaException as exc:
            raise KafkaError(str(exc)) from None
        return ends

    # -- pausing ----------------------------------------------------------

    def pause(self, *partitions: TopicPartition) -> None:
        self.consumer.pause([_Partition(tp.topic, tp.partition) for tp in partitions])
        self.paused_now.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.consumer.resume([_Partition(tp.topic, tp.partition) for tp in partitions])
        self.paused_now.difference_update(partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self.paused_now)

    # -- commits, topic ids, closing -------------------------------------

    def commit_async(self, offsets: dict, callback: Callable) -> None:
        """Commit for lag tools (the store holds the truth); `callback(offsets, error)` on a failure."""
        self.commit_callback = callback
        given = [_Partition(tp.topic, tp.partition, meta.offset) for tp, meta in offsets.items()]
        try:
            self.consumer.commit(offsets=given, asynchronous=True)
        except KafkaException as exc:
            callback(offsets, KafkaError(str(exc)))

    def _committed(self, error, partitions) -> None:
        if error is not None and self.commit_callback is not None:
            offsets = {TopicPartition(p.topic, p.partition): p.offset for p in partitions}
            self.commit_callback(offsets, KafkaError(str(error)))

    def topic_id(self, topic: str) -> str | None:
        """The topic's id from the last answer of the admin client, written as kafka-python writes it."""
        if topic not in self.topics:
            self.topics.append(topic)
        self._ask_ids()
        return self.ids.get(topic)

    def _ask_ids(self) -> None:
        if self.asked is not None and all(f.done() for f in self.asked.values()):
            for topic, future in self.asked.items():
                if future.exception() is None:
                    found = future.result().topic_id
                    high, low = found.get_most_significant_bits(), found.get_least_significant_bits()
                    self.ids[topic] = str(uuid.UUID(int=((high % (1 << 64)) << 64) | (low % (1 << 64))))
            self.asked = None
        if self.asked is None and self.topics and time.monotonic() >= self.next_ask:
            self.asked = self.admin.describe_topics(TopicCollection(list(self.topics)), request_timeout=5)
            self.next_ask = time.monotonic() + TOPIC_IDS_EVERY

    def close(self, autocommit: bool = False, timeout_ms: int | None = None) -> None:
        """Leave the group (the revoke callback runs first). librdkafka never
        commits here: auto-commit is off."""
        try:
            self.consumer.close()
        except KafkaException as exc:
            raise KafkaError(str(exc)) from None


class Delivery:
    """A dead letter's delivery, reported by librdkafka in `flush()`."""

    __slots__ = ("done", "error")

    def __init__(self):
        self.done = False
        self.error = None

    def report(self, error, message) -> None:
        self.done, self.error = True, error

    def succeeded(self) -> bool:
        return self.done and self.error is None


class Producer:
    """The dead-letter producer with kafka-python's `send`, `flush` and `close`."""

    def __init__(self, config: dict):
        self.producer = _Producer({**config, "logger": LIBRDKAFKA_LOG})

    def send(self, topic: str, value: bytes, key: bytes | None, headers: list) -> Delivery:
        delivery = Delivery()
        try:
            self.producer.produce(topic, value=value, key=key, headers=headers, on_delivery=delivery.report)
        except (KafkaException, BufferError) as exc:  # too large, or the queue is full
            raise KafkaError(str(exc)) from None
        return delivery

    def flush(self, timeout: float) -> None:
        self.producer.flush(timeout)

    def close(self, timeout: float) -> None:
        self.producer.flush(timeout)


def consumer(settings, client_id: str) -> Consumer:
    """The group consumer. The agent takes every partition's start from its
    store: librdkafka stores and commits no offset by itself."""
    config, shared = consumer_config(settings, client_id)
    return _built(lambda: Consumer(config, shared, settings.max_poll_records))


def consumer_config(settings, client_id: str) -> tuple[dict, dict]:
    """The consumer's configuration, and the part its admin client shares."""
    shared = {"bootstrap.servers": settings.bootstrap_servers, "client.id": client_id, **settings.client}
    return {
        **shared,
        "group.id": settings.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": settings.auto_offset_reset,
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": settings.heartbeat_interval_ms,
        "allow.auto.create.topics": False,
        **settings.consumer,
    }, shared


def producer(settings, client_id: str) -> Producer:
    return _built(lambda: Producer(producer_config(settings, client_id)))


def producer_config(settings, client_id: str) -> dict:
    """The dead-letter producer's configuration: room for any message the agent accepts, plus headers."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": client_id,
        "acks": "all",
        "linger.ms": 20,
        "message.max.bytes": max(1 << 20, settings.max_message_bytes + (64 << 10)),
        **settings.client,
        **settings.producer,
    }


def refusal(settings) -> tuple[str, str] | None:
    """What librdkafka refuses of the settings when a run builds its clients:
    (the client, librdkafka's message), or None. Each is built as a run
    builds it but without a broker, so nothing is contacted, and closed at once."""
    for side, config, make in (("consumer", consumer_config(settings, "ragdrift-check")[0], _Consumer),
                               ("producer", producer_config(settings, "ragdrift-check"), _Producer)):
        del config["bootstrap.servers"]
        try:
            client = make({**config, "logger": LIBRDKAFKA_LOG})
        except KafkaException as exc:
            return side, exc.args[0].str()
        except (TypeError, ValueError) as exc:  # confluent-kafka checks a few properties' types itself
            return side, str(exc)
        if side == "consumer":
            client.close()
    return None


def _built(make: Callable):
    """librdkafka refuses a bad setting value when the client is built: the same error as a broker's."""
    try:
        return make()
    except KafkaException as exc:
        raise KafkaError(str(exc)) from None
