"""kafka-python settings passed through from the configuration, checked with it.

`kafka.client` goes to the consumer and to the dead-letter producer, so it may
hold only settings both know (security, timeouts, proxies, ...);
`kafka.consumer` and `kafka.producer` go to one each, after `client` (fetch
sizes, `isolation_level`, `compression_type`, ...). kafka-python refuses an
unknown setting only when a client is built, and a setting the agent sets
itself would collide with it there; checked with the configuration, both are a
clear error at `check-config` and at start instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafka import KafkaConsumer, KafkaProducer

CONSUMER = frozenset(KafkaConsumer.DEFAULT_CONFIG)
PRODUCER = frozenset(KafkaProducer.DEFAULT_CONFIG)
# What the agent sets itself, and where to set it instead.
_OURS = "the agent"
MANAGED = {
    "bootstrap_servers": "kafka.bootstrap_servers",
    "group_id": "kafka.group_id",
    "client_id": f"{_OURS} (one per replica)",
    "auto_offset_reset": "kafka.auto_offset_reset",
    "max_poll_records": "kafka.max_poll_records",
    "session_timeout_ms": "kafka.session_timeout_ms",
    "heartbeat_interval_ms": "kafka.heartbeat_interval_ms",
    "enable_auto_commit": f"{_OURS}: offsets are committed with its checkpoints",
    "key_deserializer": f"{_OURS}: it decodes raw bytes itself",
    "value_deserializer": f"{_OURS}: it decodes raw bytes itself",
    "acks": f"{_OURS}: dead letters are written with acks=all",
    "max_request_size": "kafka.max_message_bytes",
    "linger_ms": _OURS,
    "max_block_ms": f"{_OURS}: a dead letter must not stall the loop",
}


def check_options(client: Mapping, consumer: Mapping, producer: Mapping,
                  need: Callable[[bool, str, str], None]) -> None:
    """Each pass-through key is a setting of the client(s) it goes to, and not one the agent sets."""
    for section, options, known in (("client", client, CONSUMER & PRODUCER), ("consumer", consumer, CONSUMER),
                                    ("producer", producer, PRODUCER)):
        for key in options:
            need(key not in MANAGED, f"kafka.{section}.{key}", f"set by {MANAGED.get(key)}")
            if section == "client" and key in CONSUMER ^ PRODUCER:
                side = "consumer" if key in CONSUMER else "producer"
                need(False, f"kafka.client.{key}", f"a kafka-python {side} setting only: put it under kafka.{side}")
            what = "setting" if section == "client" else f"{section} setting"
            need(key in known, f"kafka.{section}.{key}", f"not a kafka-python {what}")
