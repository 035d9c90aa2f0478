"""Client settings passed through from the configuration, checked with it.

`kafka.client` goes to the consumer and to the dead-letter producer, so it may
hold only settings both know (security, timeouts, proxies, ...);
`kafka.consumer` and `kafka.producer` go to one each, after `client` (fetch
sizes, isolation level, compression, ...). Their names are those of the
library `kafka.library` chooses: kafka-python's (`security_protocol`) or
librdkafka's (`security.protocol`). Neither library refuses an unknown setting
before a client is built, and a setting the agent sets itself would collide
with it there; checked with the configuration, both are a clear error at
`check-config` and at start instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafka import KafkaConsumer, KafkaProducer

from agent.io.kafka import librdkafka
from agent.io.secrets import MASK, secret_name

KAFKA_PYTHON = "kafka-python"
CONFLUENT = "confluent-kafka"
LIBRARIES = (KAFKA_PYTHON, CONFLUENT)
_OURS = "the agent"
_COMMITS = f"{_OURS}: offsets are committed with its checkpoints"
_DECODES = f"{_OURS}: it decodes raw bytes itself"
_ACKS = f"{_OURS}: dead letters are written with acks=all"
_STALL = f"{_OURS}: a dead letter must not stall the loop"


@dataclass(frozen=True, kw_only=True)
class Names:
    """One library's setting names: which client takes each, and which the agent sets."""

    library: str
    kind: str  # how its settings are called in errors
    consumer: frozenset[str]
    producer: frozenset[str]
    managed: Mapping[str, str]  # setting -> where to set it instead


KAFKA_PYTHON_NAMES = Names(library=KAFKA_PYTHON, kind="kafka-python", consumer=frozenset(KafkaConsumer.DEFAULT_CONFIG),
                           producer=frozenset(KafkaProducer.DEFAULT_CONFIG), managed={
    "bootstrap_servers": "kafka.bootstrap_servers",
    "group_id": "kafka.group_id",
    "client_id": f"{_OURS} (one per replica)",
    "auto_offset_reset": "kafka.auto_offset_reset",
    "max_poll_records": "kafka.max_poll_records",
    "session_timeout_ms": "kafka.session_timeout_ms",
    "heartbeat_interval_ms": "kafka.heartbeat_interval_ms",
    "enable_auto_commit": _COMMITS,
    "key_deserializer": _DECODES,
    "value_deserializer": _DECODES,
    "acks": _ACKS,
    "max_request_size": "kafka.max_message_bytes",
    "linger_ms": _OURS,
    "max_block_ms": _STALL,
})
LIBRDKAFKA_NAMES = Names(library=CONFLUENT, kind="librdkafka", consumer=librdkafka.CONSUMER, producer=librdkafka.PRODUCER, managed={
    "bootstrap.servers": "kafka.bootstrap_servers",
    "metadata.broker.list": "kafka.bootstrap_servers",
    "group.id": "kafka.group_id",
    "client.id": f"{_OURS} (one per replica)",
    "auto.offset.reset": "kafka.auto_offset_reset",
    "session.timeout.ms": "kafka.session_timeout_ms",
    "heartbeat.interval.ms": "kafka.heartbeat_interval_ms",
    "enable.auto.commit": _COMMITS,
    "auto.commit.enable": _COMMITS,
    "enable.auto.offset.store": _COMMITS,
    "acks": _ACKS,
    "request.required.acks": _ACKS,
    "message.max.bytes": "kafka.max_message_bytes",
    "linger.ms": _OURS,
    "queue.buffering.max.ms": _OURS,
})
NAMES = {names.library: names for names in (KAFKA_PYTHON_NAMES, LIBRDKAFKA_NAMES)}


def check_options(library: str, client: Mapping, consumer: Mapping, producer: Mapping,
                  need: Callable[[bool, str, str], None]) -> None:
    """Each pass-through key is a setting of the client(s) it goes to in
    `library`, and not one the agent sets."""
    names = NAMES[library]
    (other,) = (n for n in NAMES.values() if n is not names)
    for section, options, known in (("client", client, names.consumer & names.producer),
                                    ("consumer", consumer, names.consumer), ("producer", producer, names.producer)):
        for key in options:
            where = f"kafka.{section}.{key}"
            need(key not in names.managed, where, f"set by {names.managed.get(key)}")
            theirs = key in other.consumer | other.producer and key not in names.consumer | names.producer
            need(not theirs, where, f"a {other.kind} setting; with kafka.library {library}, settings are {names.kind}'s")
            if section == "client" and key in names.consumer ^ names.producer:
                side = "consumer" if key in names.consumer else "producer"
                need(False, where, f"a {names.kind} {side} setting only: put it under kafka.{side}")
            what = "setting" if section == "client" else f"{section} setting"
            need(key in known, where, f"not a {names.kind} {what}")


def check_librdkafka(settings, need: Callable[[bool, str, str], None]) -> None:
    """The pass-through values as librdkafka takes them (`settings`: the `kafka`
    section, `kafka.library` confluent-kafka): one value each, and whatever
    librdkafka refuses when a run builds its clients, refused by the key it names."""
    for section in ("client", "consumer", "producer"):
        for key, value in getattr(settings, section).items():
            need(isinstance(value, str | int | float | bool), f"kafka.{section}.{key}",
                 "must be one value (text, a number, true or false)")
    from agent.io.kafka import confluent  # the `confluent` extra, installed: checked before

    refused = confluent.refusal(settings)
    if refused is None:
        return
    side, text = refused
    text = " ".join(text.split())
    for section in ("client", "consumer", "producer"):  # the message may show a value: never a secret's
        for key, value in getattr(settings, section).items():
            if secret_name(key) and str(value):
                text = text.replace(str(value), MASK)
    if not text.isprintable():
        text = "(its message holds control characters)"
    for prop, key in _sources(settings, side):
        if re.search(rf"(?<![\w.]){re.escape(prop)}(?![\w.])", text):
            need(False, key, "librdkafka refuses its value" if secret_name(prop) else f"librdkafka refuses it: {text}")
    need(False, "kafka", f"librdkafka refuses the {side}'s settings: {text}")


def _sources(settings, side: str) -> list[tuple[str, str]]:
    """Each property a client of `side` is given, with the key it comes from, the one that wins first."""
    given = [(prop, f"kafka.{section}.{prop}") for section in (side, "client") for prop in getattr(settings, section)]
    ours = [(prop, key) for prop, key in LIBRDKAFKA_NAMES.managed.items() if key.startswith("kafka.")]
    return given + ours
