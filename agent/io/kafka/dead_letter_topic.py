"""Reading the dead-letter topic once, from its start to its end as it stands when reading starts.

A plain kafka-python consumer with no group: it assigns itself every
partition, commits nothing and disturbs no one. The end of a partition is its
end offset when reading starts, raised to the high watermark of the first
fetch: some brokers (tansu, docs/broker-notes.md) answer ListOffsets with the
last batch's base offset plus one, and only fetches tell the log end. Letters
written after that are not read, so a topic still being written ends.

Every wait on the broker is bounded by `timeout`: reaching it, its metadata
and offsets, and any stretch of reading in which no partition moves. What the
headers say is taken as text that anyone may have written (agent/core/dead_letter_summary.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CorruptRecordError, KafkaError, KafkaTimeoutError

from agent.core.dead_letter_summary import Letter, event_id, grouped
from agent.core.escape import plain
from agent.io.kafka.broker import (
    ORIGINAL,
    PAYLOAD_HEADER,
    REASON_HEADER,
    SOURCE_OFFSET_HEADER,
    SOURCE_PARTITION_HEADER,
    SOURCE_TOPIC_HEADER,
    written_at,
)
from agent.io.settings.agent import KafkaSettings

CLIENT_ID = "ragdrift-dead-letters"
_POLL_MS = 500
_NUMBER = 19  # most digits a partition or offset header may have (an int64)


class TopicError(Exception):
    """The topic cannot be read to its end: one line, naming why (no payload, no header text)."""


@contextmanager
def reading(settings: KafkaSettings, topic: str, timeout: float, since: float | None = None):
    """A `Reading` of `topic` (from `since`, epoch s, when given), its consumer closed when the block
    ends; Kafka's and the network's errors inside the block become one-line `TopicError`s."""
    kafka_log = logging.getLogger("kafka")
    if not kafka_log.handlers:  # its warnings are not the command's output (Python's last resort would print them)
        kafka_log.addHandler(logging.NullHandler())
    consumer = None
    try:
        consumer = _consumer(settings, timeout)
        yield Reading(consumer=consumer, topic=topic, timeout=timeout, since=since, max_records=settings.max_poll_records)
    except KafkaTimeoutError:
        raise TopicError(f"no answer from the Kafka broker at {plain(settings.bootstrap_servers)} "
                         f"within {timeout:g} s") from None
    except CorruptRecordError as exc:  # e.g. a header name that is not UTF-8: kafka-python stops at it
        raise TopicError(f"topic {plain(topic)} holds a record kafka-python cannot parse: {_one_line(exc)}") from None
    except (KafkaError, OSError) as exc:
        raise TopicError(f"Kafka: {_one_line(exc)}") from None
    finally:
        if consumer is not None:
            consumer.close(autocommit=False, timeout_ms=1000)


def _one_line(exc: Exception) -> str:
    return plain(" ".join(str(exc).split())) or type(exc).__name__


def _consumer(settings: KafkaSettings, timeout: float) -> KafkaConsumer:
    """The group-less consumer with the agent's client settings; the settings that make it group-less are ours."""
    return KafkaConsumer(**{
        "allow_auto_create_topics": False,  # a misspelt topic must not appear on the broker
        "max_poll_records": settings.max_poll_records,
        **settings.client,
        **settings.consumer,
        "bootstrap_servers": settings.bootstrap_servers,
        "client_id": CLIENT_ID,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "bootstrap_timeout_ms": int(timeout * 1000),
    })


class Reading:
    """The topic's partitions, where reading starts and ends in each, and the records between."""

    def __init__(self, *, consumer: KafkaConsumer, topic: str, timeout: float, since: float | None, max_records: int):
        self.consumer = consumer
        self.topic = topic
        self.timeout = timeout
        self.since_ms = None if since is None else int(since * 1000)
        self.max_records = max_records
        found = consumer.partitions_for_topic(topic)
        if not found:
            raise TopicError(f"topic {plain(topic)} does not exist on the broker (or these credentials cannot see it)")
        self.partitions = [TopicPartition(topic, p) for p in sorted(found)]
        consumer.assign(self.partitions)
        wait = int(timeout * 1000)
        begin = consumer.beginning_offsets(self.partitions, timeout_ms=wait)
        self.end: dict[TopicPartition, int] = consumer.end_offsets(self.partitions, timeout_ms=wait)
        self.start = dict(begin)
        if self.since_ms is not None:
            at = consumer.offsets_for_times(dict.fromkeys(self.partitions, self.since_ms), timeout_ms=wait)
            self.start = {tp: self.end[tp] if at.get(tp) is None else max(begin[tp], at[tp].offset)
                          for tp in self.partitions}
        # A partition whose start is its end is empty (or has nothing since); the others are read until
        # their position passes the end, raised to the first high watermark a fetch tells.
        self.empty = {tp for tp in self.partitions if begin[tp] >= self.end[tp]}
        for tp in self.partitions:
            consumer.seek(tp, self.start[tp])

    @property
    def expected(self) -> int:
        """About how many records the reading holds (exact where end offsets are)."""
        return sum(max(0, self.end[tp] - self.start[tp]) for tp in self.partitions if tp not in self.empty)

    def records(self) -> Iterator[ConsumerRecord]:
        """Every record from each partition's start to its end, as fetched (not in offset order across
        partitions); records older than `since` are left out."""
        consumer = self.consumer
        goal = dict(self.end)
        known: set[TopicPartition] = set()  # partitions whose goal a high watermark has set
        pending = [tp for tp in self.partitions if tp not in self.empty]
        consumer.pause(*self.empty)
        moved = time.monotonic()
        while pending:
            batches = consumer.poll(timeout_ms=_POLL_MS, max_records=self.max_records)
            for tp in pending:
                high = consumer.highwater(tp)
                if tp not in known and high is not None:
                    goal[tp] = max(goal[tp], high)
                    known.add(tp)
            for tp, batch in batches.items():
                for record in batch:
                    if record.offset >= goal[tp]:
                        break
                    if self.since_ms is None or record.timestamp >= self.since_ms:
                        yield record
            done = [tp for tp in pending if tp in known and consumer.position(tp) >= goal[tp]]
            if batches or done:
                moved = time.monotonic()
            elif time.monotonic() - moved > self.timeout:
                names = ", ".join(str(tp.partition) for tp in pending)
                raise TopicError(f"topic {plain(self.topic)}: no records from partition(s) {names} for "
                                 f"{self.timeout:g} s before the end")
            if done:
                consumer.pause(*done)
                pending = [tp for tp in pending if tp not in done]


def letter(record: ConsumerRecord) -> Letter:
    """What the summary takes of a dead letter: its place, and what its headers say, read defensively
    (a header missing, repeated or not UTF-8 is no error). The payload is read for its event id only,
    and only when the letter says it carries the message as it came."""
    headers: dict[str, bytes] = {}
    for key, value in record.headers or ():
        if isinstance(key, str) and isinstance(value, bytes):
            headers.setdefault(key, value)  # the first of a repeated header, as broker.header reads it
    reason = headers[REASON_HEADER].decode("utf-8", "replace") if REASON_HEADER in headers else None
    kind = grouped(reason)[0] if reason else ""
    payload = record.value if headers.get(PAYLOAD_HEADER) == ORIGINAL else None
    return Letter(partition=record.partition, offset=record.offset, written=written_at(record), reason=reason or None,
                  source=_source(headers), event_id=event_id(kind, payload))


def _source(headers: dict[str, bytes]) -> tuple[str, int, int] | None:
    topic = headers.get(SOURCE_TOPIC_HEADER)
    partition, offset = _number(headers.get(SOURCE_PARTITION_HEADER)), _number(headers.get(SOURCE_OFFSET_HEADER))
    if not topic or partition is None or offset is None:
        return None
    return topic.decode("utf-8", "replace"), partition, offset


def _number(value: bytes | None) -> int | None:
    """A non-negative decimal header, or None."""
    if value is None or not 0 < len(value) <= _NUMBER or not value.isdigit():
        return None
    return int(value)
