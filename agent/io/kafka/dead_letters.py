"""Dead-letter delivery: each rejected message to the dead-letter topic, once
per checkpoint interval checked delivered before the checkpoint passes it."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kafka.errors import KafkaError

from agent.core.reasons import RejectedEvent
from agent.io.kafka import broker

log = logging.getLogger("ragdrift.agent")


@dataclass(frozen=True, kw_only=True)
class Letter:
    """A dead letter in flight."""

    future: Any  # kafka-python's FutureRecordMetadata
    topic: str
    partition: int
    offset: int
    reason: str


class DeadLetters:
    def __init__(self, producer, topic: str):
        self.producer = producer
        self.topic = topic
        self.rejected: Counter[str] = Counter()  # by reason kind, for this process's lifetime
        self.pending: list[Letter] = []
        self.logged = 0

    def send(self, record, rejected: RejectedEvent) -> None:
        value, key, headers = broker.dead_letter(record, rejected)
        try:
            future = self.producer.send(self.topic, value=value, key=key, headers=headers)
        except KafkaError:  # e.g. larger than the producer takes: forward the facts only
            value, key, headers = broker.dead_letter(record, rejected, withhold=True)
            future = self.producer.send(self.topic, value=value, key=key, headers=headers)
        self.pending.append(Letter(future=future, topic=record.topic, partition=record.partition, offset=record.offset, reason=rejected.reason))
        self.rejected[rejected.kind] += 1

    def log_new(self) -> None:
        """One line per poll, never the payload: reasons name a field path at most."""
        fresh = self.pending[self.logged:]
        if fresh:
            log.warning("messages dead-lettered", extra={
                "count": len(fresh), "reasons": dict(Counter(letter.reason for letter in fresh)),
                "first": f"{fresh[0].topic}/{fresh[0].partition}@{fresh[0].offset}",
            })
            self.logged = len(self.pending)

    def deliver(self, timeout: float) -> None:
        """Make sure every pending letter arrived, or raise `KafkaError`.

        Waits stay well under the session timeout (this also runs in rebalance
        callbacks); a failure fails the checkpoint, which is retried later.
        """
        self.producer.flush(timeout=timeout)
        failed = [letter for letter in self.pending if not letter.future.succeeded()]
        if failed:  # retry once with the facts only: the payload may be what failed
            retries = [
                self.producer.send(self.topic, value=value, key=key, headers=headers)
                for value, key, headers in (
                    broker.dead_letter_facts(x.topic, x.partition, x.offset, x.reason) for x in failed)
            ]
            self.producer.flush(timeout=timeout)
            if not all(future.succeeded() for future in retries):
                raise KafkaError(f"{len(failed)} dead letters not delivered")
        self.pending.clear()
        self.logged = 0
