"""Kafka adapters: consumer and dead-letter producer built from settings.

Values are read as raw bytes; decoding happens in the agent's own code, never
in a client's deserializer (whose exceptions stall a consumer). With
`kafka.library: confluent-kafka` the clients are agent/io/kafka/confluent.py's,
which answer as kafka-python's do.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka.consumer.fetcher import ConsumerRecord

from agent.core.privacy import forwardable_key
from agent.core.reasons import RejectedEvent
from agent.io.kafka.options import CONFLUENT
from agent.io.settings.agent import KafkaSettings

# A dead letter's headers: why, where its message was, and whether it carries the message.
REASON_HEADER = "ragdrift-reason"
SOURCE_TOPIC_HEADER = "ragdrift-source-topic"
SOURCE_PARTITION_HEADER = "ragdrift-source-partition"
SOURCE_OFFSET_HEADER = "ragdrift-source-offset"
PAYLOAD_HEADER = "ragdrift-payload"
ORIGINAL = b"original"  # the payload header of a letter that carries its message as it came


@dataclass(frozen=True)
class Clients:
    """The agent's Kafka clients: passed in, so a test can drive the loop."""

    consumer: KafkaConsumer
    producer: KafkaProducer
    client_id: str | None = None


def has_fast_crc() -> bool:
    """kafka-python verifies record CRCs in pure Python (about 20x slower)
    unless the `crc32c` package is importable."""
    from kafka.record import util

    return util.crc32c_c is not None


def consumer(settings: KafkaSettings, client_id: str):
    """The group consumer, of the library `kafka.library` chooses. It never
    creates the topic it reads (unless `kafka.client` says so): a misspelt
    topic must not appear on the broker, and a recreated topic must come from
    its owner, with its own partitions."""
    if settings.library == CONFLUENT:
        from agent.io.kafka import confluent  # the `confluent` extra

        return confluent.consumer(settings, client_id)
    return KafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=settings.group_id,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset=settings.auto_offset_reset,
        max_poll_records=settings.max_poll_records,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        **{"allow_auto_create_topics": False, **settings.client, **settings.consumer},
    )


def subscribe(consumer, topics: list[str], listener: ConsumerRebalanceListener) -> None:
    """Join the group for `topics`, with `listener` told of every rebalance."""
    if isinstance(consumer, KafkaConsumer):
        listener = _JoinedOnce(consumer, listener)
    consumer.subscribe(topics, listener=listener)


class _JoinedOnce(ConsumerRebalanceListener):
    """kafka-python 3.0.12 starts a rebalance itself when a subscribed topic's partitions change (a topic
    recreated, partitions added) without marking the group to be rejoined. It only notices that a
    rejoin is needed by comparing its metadata with the metadata its last assignment used. The group
    leader brings the two back in line while it assigns, before its SyncGroup is answered. If a poll's
    time runs out in between, no later poll awaits that join, and the consumer keeps no partitions
    until it restarts (seen with a recreated topic: "Elected group leader", then nothing). Kafka's
    Java client marks the rejoin whenever the metadata starts one (KAFKA-9815); marking it here, as
    each rebalance starts (every join first revokes), keeps the join awaited until it completes.
    The coordinator is not public API: kafka-python is pinned (constraints/agent.txt), and
    tests/io/test_kafka_join.py holds this to the installed version."""

    def __init__(self, consumer: KafkaConsumer, listener: ConsumerRebalanceListener):
        self.coordinator = consumer._coordinator
        self.listener = listener

    def on_partitions_revoked(self, revoked):
        self.coordinator.request_rejoin()
        self.listener.on_partitions_revoked(revoked)

    def on_partitions_assigned(self, assigned):
        self.listener.on_partitions_assigned(assigned)

    def on_partitions_lost(self, lost):
        self.listener.on_partitions_lost(lost)


def producer(settings: KafkaSettings, client_id: str):
    """The dead-letter producer, of the same library as the consumer: room for
    any message the agent accepts, plus headers."""
    if settings.library == CONFLUENT:
        from agent.io.kafka import confluent

        return confluent.producer(settings, client_id)
    return KafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        client_id=client_id,
        acks="all",
        linger_ms=20,
        max_request_size=max(1 << 20, settings.max_message_bytes + (64 << 10)),
        max_block_ms=3000,  # a dead letter must not stall the loop past the session timeout
        **settings.client,
        **settings.producer,
    )


def dead_letter(record: ConsumerRecord, rejected: RejectedEvent,
                withhold: bool = False) -> tuple[bytes, bytes | None, list[tuple[str, bytes]]]:
    """Value, key and headers of the dead letter for a rejected record."""
    if withhold or rejected.withheld:
        return dead_letter_facts(record.topic, record.partition, record.offset, rejected.reason)
    headers = _headers(record.topic, record.partition, record.offset, rejected.reason, ORIGINAL)
    return record.value or b"", forwardable_key(record.key), headers


def dead_letter_facts(topic: str, partition: int, offset: int,
                      reason: str) -> tuple[bytes, None, list[tuple[str, bytes]]]:
    """A dead letter that carries where and why only: empty value, no key
    (Kafka refuses a record with neither, hence empty rather than null)."""
    return b"", None, _headers(topic, partition, offset, reason, b"withheld")


def _headers(topic: str, partition: int, offset: int, reason: str, payload: bytes) -> list[tuple[str, bytes]]:
    return [
        (REASON_HEADER, reason.encode()),
        (SOURCE_TOPIC_HEADER, topic.encode()),
        (SOURCE_PARTITION_HEADER, str(partition).encode()),
        (SOURCE_OFFSET_HEADER, str(offset).encode()),
        (PAYLOAD_HEADER, payload),
    ]


def topic_id(consumer, topic: str) -> str | None:
    """The topic's id (KIP-516) in the consumer's metadata, or None if the
    broker reports none. A recreated topic gets a new id. kafka-python 3
    keeps it on its cluster metadata, which has no public accessor."""
    if not isinstance(consumer, KafkaConsumer):
        return consumer.topic_id(topic)
    found = consumer._client.cluster.topic_id(topic)
    return None if found is None else str(found)


def written_at(record: ConsumerRecord) -> float | None:
    """When the record was written (epoch s), from its Kafka timestamp, if it has one."""
    return record.timestamp / 1000 if record.timestamp is not None and record.timestamp > 0 else None


def header(record: ConsumerRecord, name: str) -> str | None:
    for key, value in record.headers or ():
        if key == name and value is not None:
            return value.decode("ascii", "replace")
    return None
