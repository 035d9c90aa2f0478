"""The one object an app builds: `Producer`, and a call per retrieval.

    producer = Producer(app="support-bot", key=HashKey.from_env(),
                        kafka={"bootstrap_servers": "kafka:9092"}, cutoff_k=5)
    producer.retrieval(query=text, user=User(tenant="acme", groups=groups), results=[...])
    producer.close()

`retrieval` captures the call's values and queues them, and returns at
once: the library's own thread builds, hashes, fingerprints, encodes,
records and sends the event, so the app's request pays microseconds (the
texts stay in the process, in the queue, until then). It never raises into
the app: what it cannot send is dropped and counted (`stats()`, and
`ragdrift_producer_*` on the app's prometheus-client registry).
`strict=True`, for tests, builds on the calling thread and raises `Dropped`
instead.
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
from typing import Any, NamedTuple

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


class _Call(NamedTuple):
    """One retrieval's values as the app gave them, until the library's thread builds its event."""

    event_id: str
    ts: datetime
    query: str
    user: User | None
    results: tuple[Result, ...]
    cutoff_k: int
    query_type: str | None
    language: str | None
    stages: Stages | None
    filters: tuple[Filter, ...]
    pipeline: Pipeline | None
    latency_ms: float | None
    feedback: Feedback | None


def _size(call: _Call) -> int:
    """About the memory a queued call holds: its texts, and a little for each value."""
    texts = len(call.query) if isinstance(call.query, str) else 0
    for result in call.results:
        text = getattr(result, "text", None)
        texts += len(text) if isinstance(text, str) else 0
    return texts + 256 * (len(call.results) + 2)


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
                              counts=self._counts, prepare=self._prepare)
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
        """Queue one retrieval; its event id, or None when it was dropped at once (queue full, closed).

        `user` defaults to the one `user_context` set for this request, `ts` to now. The event is
        built on the library's thread: one its values cannot make is dropped there and counted in
        `stats()`. With `strict`, it is built here, and any drop raises `Dropped`.
        """
        try:
            call = _Call(event_id or f"{self._prefix}-{next(self._ids)}", ts or datetime.now(UTC), query,
                         user or _CURRENT_USER.get(), tuple(results), cutoff_k or self.cutoff_k, query_type,
                         language, stages, tuple(filters), pipeline or self.pipeline, latency_ms, feedback)
        except TypeError:  # results or filters that are no sequence
            self._counts.drop("invalid_input")
            if self.strict:
                raise Dropped("invalid_input") from None
            return None
        if self.strict:
            try:
                value = self._built(call)
            except Dropped as exc:
                self._counts.drop(exc.reason)
                raise
            reason = self._sender.put(value, len(value))
        else:
            reason = self._sender.put(call, _size(call))
        if reason is not None:
            if self.strict:
                raise Dropped(reason)
            return None
        return call.event_id

    def _prepare(self, call: _Call) -> bytes | None:
        """On the library's thread: the call's event, or None when it is dropped (counted)."""
        try:
            return self._built(call)
        except Dropped as exc:
            self._counts.drop(exc.reason)
            return None

    def _built(self, call: _Call) -> bytes:
        """The call's event, encoded, with its texts recorded; `Dropped` when its values cannot make one."""
        try:
            if call.user is None:
                raise Dropped("missing_tenant")
            event = self._builder.event(
                event_id=call.event_id, ts=call.ts, query=call.query, user=call.user, results=call.results,
                cutoff_k=call.cutoff_k, query_type=call.query_type, language=call.language,
                pipeline=call.pipeline, stages=call.stages, filters=call.filters, latency_ms=call.latency_ms,
                feedback=call.feedback)
            value = _JSON.encode(event).encode()
        except Dropped:
            raise
        except Exception as exc:
            log.warning("ragdrift producer: an event could not be built (%s)", type(exc).__name__)
            raise Dropped("invalid_input") from exc
        if len(value) > self.max_event_bytes:
            raise Dropped("too_large")
        if self.recorder is not None:
            self._record(event, call.query, call.results)
        return value

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

