"""Kafka adapters: consumer and dead-letter producer built from settings.

Values are read as raw bytes; decoding happens in the agent's own code, never
in a kafka-python deserializer (whose exceptions stall a consumer).
"""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer
from kafka.consumer.fetcher import ConsumerRecord

from agent.io.settings import KafkaSettings

REASON_HEADER = "ragdrift-reason"
# Payloads that must not travel further: privacy suspects, and oversized ones
# (the dead-letter topic would refuse them anyway).
WITHHELD = frozenset(("pii_suspected", "too_large"))


def has_fast_crc() -> bool:
    """kafka-python verifies record CRCs in pure Python (about 20x slower)
    unless the `crc32c` package is importable."""
    from kafka.record import util

    return util.crc32c_c is not None


def consumer(settings: KafkaSettings, client_id: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        group_id=settings.group_id,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset=settings.auto_offset_reset,
        max_poll_records=settings.max_poll_records,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        **settings.client,
    )


def producer(settings: KafkaSettings, client_id: str) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        client_id=client_id,
        acks="all",
        linger_ms=20,
        **settings.client,
    )


def dead_letter(record: ConsumerRecord, reason: str, kind: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The dead-letter value and headers for a rejected record.

    A withheld payload is an empty value with `ragdrift-payload: withheld`
    (not null: Kafka refuses a record with neither key nor value).
    """
    withheld = kind in WITHHELD
    headers = [
        (REASON_HEADER, reason.encode()),
        ("ragdrift-source-topic", record.topic.encode()),
        ("ragdrift-source-partition", str(record.partition).encode()),
        ("ragdrift-source-offset", str(record.offset).encode()),
        ("ragdrift-payload", b"withheld" if withheld else b"original"),
    ]
    return (b"" if withheld else record.value or b""), headers


def header(record: ConsumerRecord, name: str) -> str | None:
    for key, value in record.headers or ():
        if key == name and value is not None:
            return value.decode("ascii", "replace")
    return None
