"""The one object an app builds: `Producer`, and a call per retrieval.

    producer = Producer(app="support-bot", key=HashKey.from_env(),
                        kafka={"bootstrap_servers": "kafka:9092"}, cutoff_k=5)
    producer.retrieval(query=text, user=User(tenant="acme", groups=groups), results=[...])
    producer.close()

`retrieval` builds, hashes, encodes and queues the event on the calling
thread, and returns at once; sending happens on the library's own thread.
It never raises into the app: what it cannot send is dropped and counted
(`stats()`, and `ragdrift_producer_*` on the app's prometheus-client
registry). `strict=True`, for tests, raises `Dropped` instead.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ragdrift_producer.event import Builder, Dropped
from ragdrift_producer.hashing import Hasher, HashKey
from ragdrift_producer.recorder import Recorder
from ragdrift_producer.transport import Counts, Sender
from ragdrift_producer.values import Feedback, Filter, Pipeline, Result, Stages, User

log = logging.getLogger("ragdrift_producer")

_APP = re.compile(r"[a-z0-9_-]{1,64}\Z")
_CURRENT_USER: contextvars.ContextVar[User | None] = contextvars.ContextVar("ragdrift_user", default=None)
MAX_EVENT_BYTES = 1024 * 1024  # the agent's default `max_bytes`
# What json.dumps(event, ...) builds on every call with these arguments, built once (it keeps no state).
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


@contextmanager
def user_context(user: User) -> Iterator[User]:
    """The user of the request being served, for retrievals that do not name one
    (the span processor's, above all). Set it where the request is authenticated."""
    token = _CURRENT_USER.set(user)
    try:
        yield user
    finally:
        _CURRENT_USER.reset(token)


def current_user() -> User | None:
    return _CURRENT_USER.get()


@dataclass(frozen=True)
class Stats:
    """Counts since the producer was built, and what it holds now."""

    sent: int
    failed: int
    dropped: Mapping[str, int] = field(default_factory=dict)
    adjusted: Mapping[str, int] = field(default_factory=dict)
    queued_events: int = 0
    queued_bytes: int = 0


class Producer:
    """Turns an app's retrievals into `retrieval.v1` events on a Kafka topic."""

    def __init__(self, *, app: str, key: HashKey, kafka: Mapping[str, Any], topic: str = "retrieval.v1",
                 cutoff_k: int = 5, pipeline: Pipeline | None = None, recorder: Recorder | None = None,
                 max_queue_events: int = 10_000, max_queue_bytes: int = 32 * 1024 * 1024,
                 max_event_bytes: int = MAX_EVENT_BYTES, strict: bool = False, registry: Any = "default") -> None:
        if not isinstance(app, str) or not _APP.match(app):
            raise ValueError("app must be 1-64 characters of a-z, 0-9, _ and -")
        if not isinstance(key, HashKey):
            raise TypeError("key must be a HashKey (HashKey.from_env() or HashKey.from_file(path))")
        _positive(cutoff_k=cutoff_k, max_queue_events=max_queue_events, max_queue_bytes=max_queue_bytes,
                  max_event_bytes=max_event_bytes)
        _check_kafka(kafka)
        self.app = app
        self.topic = topic
        self.cutoff_k = cutoff_k
        self.pipeline = pipeline
        self.recorder = recorder
        self.max_event_bytes = max_event_bytes
        self.strict = strict
        self._counts = Counts()
        self._builder = Builder(Hasher(key), app, self._counts.adjust)
        self._ids = itertools.count(1)
        self._prefix = secrets.token_hex(6)
        self._sender = Sender(topic, kafka, max_events=max_queue_events, max_bytes=max_queue_bytes,
                              counts=self._counts)
        if registry is not None:
            from ragdrift_producer.metrics import export

            export(self, registry)

    def __repr__(self) -> str:
        return f"Producer(app={self.app!r}, topic={self.topic!r})"

    def retrieval(self, *, query: str, results: Sequence[Result], user: User | None = None,
                  cutoff_k: int | None = None, query_type: str | None = None, language: str | None = None,
                  stages: Stages | None = None, filters: Sequence[Filter] = (), pipeline: Pipeline | None = None,
                  latency_ms: float | None = None, feedback: Feedback | None = None, ts: datetime | None = None,
                  event_id: str | None = None) -> str | None:
        """Queue the event of one retrieval; its event id, or None when it was dropped.

        `user` defaults to the one `user_context` set for this request.
        """
        try:
            user = user or _CURRENT_USER.get()
            if user is None:
                raise Dropped("missing_tenant")
            event_id = event_id or f"{self._prefix}-{next(self._ids)}"
            event = self._builder.event(
                event_id=event_id, ts=ts or datetime.now(UTC), query=query, user=user, results=results,
                cutoff_k=cutoff_k or self.cutoff_k, query_type=query_type, language=language,
                pipeline=pipeline or self.pipeline, stages=stages, filters=filters, latency_ms=latency_ms,
                feedback=feedback)
            value = _JSON.encode(event).encode()
            if len(value) > self.max_event_bytes:
                raise Dropped("too_large")
        except Dropped as exc:
            self._counts.drop(exc.reason)
            if self.strict:
                raise
            return None
        except Exception as exc:
            self._counts.drop("invalid_input")
            log.warning("ragdrift producer: an event could not be built (%s)", type(exc).__name__)
            if self.strict:
                raise Dropped("invalid_input") from exc
            return None
        if self.recorder is not None:
            self._record(event, query, results)
        reason = self._sender.put(value)
        if reason is not None:
            if self.strict:
                raise Dropped(reason)
            return None
        return event_id

    def _record(self, event: dict[str, Any], query: str, results: Sequence[Result]) -> None:
        assert self.recorder is not None
        try:
            self.recorder.query(event["query"]["id"], query)
            for sent, result in zip(event["results"], results, strict=False):
                if isinstance(result.text, str):
                    self.recorder.chunk(sent["chunk_id"], result.text)
        except Exception as exc:
            self._counts.adjust("recorder_failed")
            log.warning("ragdrift producer: the recorder failed (%s)", type(exc).__name__)

    def count_dropped(self, reason: str) -> None:
        """Count an event its caller could not build (the span processor's); raises when strict."""
        self._counts.drop(reason)
        if self.strict:
            raise Dropped(reason)

    def stats(self) -> Stats:
        events, size = self._sender.held()
        with self._counts.lock:
            return Stats(sent=self._counts.sent, failed=self._counts.failed, dropped=dict(self._counts.dropped),
                         adjusted=dict(self._counts.adjusted), queued_events=events, queued_bytes=size)

    @property
    def connected(self) -> bool:
        """Whether the library's thread has reached Kafka once."""
        return self._sender.connected

    def close(self, timeout: float = 5.0) -> Stats:
        """Send what is queued within `timeout` seconds, then stop; what is left is dropped as `closed`."""
        self._sender.close(timeout)
        return self.stats()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1")


def _check_kafka(kafka: Mapping[str, Any]) -> None:
    from kafka import KafkaProducer

    if "bootstrap_servers" not in kafka:
        raise ValueError("kafka needs bootstrap_servers")
    unknown = sorted(set(kafka) - set(KafkaProducer.DEFAULT_CONFIG))
    if unknown:
        raise ValueError(f"kafka settings kafka-python does not know: {', '.join(unknown)}")

