"""Getting events to Kafka without ever holding up the app.

The calling thread only appends an item to a queue: a retrieval's values as
the app gave them, or (in strict mode) its encoded event. One thread of the
library's own takes items from it, turns each into the event's bytes
(`prepare`: build, hash, fingerprint, encode; None when the event is dropped)
and hands them to a kafka-python producer. The queue and the events handed
over but not yet acknowledged share one bound, in events and in bytes (each
item's size as the caller estimates it; kafka-python 3 has no memory bound
of its own), so memory stays bounded however long the broker is away. When
the bound is reached the newest event is dropped and counted; the app never
waits and never sees an exception. `close` counts whatever is still held at
its deadline as dropped `closed`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka import KafkaProducer

log = logging.getLogger("ragdrift_producer")

# kafka-python settings the library sets unless the app gives its own.
DEFAULTS: Mapping[str, Any] = {
    "linger_ms": 20,
    "max_block_ms": 5000,  # a send waits this long for metadata, on the library's thread only
    "bootstrap_timeout_ms": 5000,
    "client_id": "ragdrift-producer",
    # kafka-python's idempotent producer fails every send for good once a broker that lost its producer ids
    # (one restarted without storage) refuses the epoch bump; a rare duplicate on a retry is the lesser harm.
    "enable_idempotence": False,
}
RETRY_SECONDS = (0.5, 1, 2, 5, 10, 30)


class Counts:
    """What happened to the events: thread-safe, read by `snapshot`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = 0
        self.failed = 0
        self.dropped: Counter[str] = Counter()
        self.adjusted: Counter[str] = Counter()

    def drop(self, reason: str) -> None:
        with self.lock:
            self.dropped[reason] += 1

    def adjust(self, rule: str) -> None:
        with self.lock:
            self.adjusted[rule] += 1


class Sender:
    """A bounded queue drained into kafka-python by one background thread."""

    def __init__(self, topic: str, kafka: Mapping[str, Any], *, max_events: int, max_bytes: int,
                 counts: Counts, prepare: Callable[[Any], bytes | None]) -> None:
        self.topic = topic
        self.kafka = {**DEFAULTS, **kafka}
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.counts = counts
        self.prepare = prepare
        self._queue: deque[tuple[Any, int]] = deque()
        self._held_events = 0  # queued or in flight
        self._held_bytes = 0
        self._lock = threading.Condition(threading.Lock())
        self._closing = False
        self._closed = False  # close() has counted what was held; later outcomes are not counted again
        self._deadline = float("inf")
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ragdrift-producer", daemon=True)
        self._thread.start()

    def put(self, item: Any, size: int) -> str | None:
        """Queue one item of about `size` bytes; the reason it was dropped, or None."""
        with self._lock:
            if self._closing:
                reason = "closed"
            elif self._held_events >= self.max_events or self._held_bytes + size > self.max_bytes:
                reason = "queue_full"
            else:
                self._queue.append((item, size))
                self._held_events += 1
                self._held_bytes += size
                if len(self._queue) == 1:  # the library's thread waits only for an empty queue
                    self._lock.notify()
                return None
        self.counts.drop(reason)
        return reason

    def held(self) -> tuple[int, int]:
        """Events and bytes queued or in flight."""
        with self._lock:
            return self._held_events, self._held_bytes

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def close(self, timeout: float) -> None:
        """Send what is queued within `timeout` seconds; what is left is dropped as `closed`."""
        with self._lock:
            self._closing = True
            self._deadline = time.monotonic() + max(timeout, 0.0)
            self._lock.notify()
        self._thread.join(max(timeout, 0.0) + 1.0)
        self._drop_held()

    def _drop_held(self) -> None:
        """Count what is still queued or in flight as dropped `closed`; Kafka's word on it later is not counted."""
        with self._lock:
            left = self._held_events
            self._queue.clear()
            self._held_events = self._held_bytes = 0
            self._closed = True
            if left:
                with self.counts.lock:
                    self.counts.dropped["closed"] += left

    # -- the library's thread -------------------------------------------------------

    def _run(self) -> None:
        producer = self._connect()
        if producer is None:
            return
        self._connected.set()
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._lock.wait()
                if not self._queue or (self._closing and time.monotonic() >= self._deadline):
                    break
                item, size = self._queue.popleft()
            value = item if isinstance(item, bytes) else self.prepare(item)
            if value is None:  # dropped by `prepare`, and counted there
                self._settled(size, ok=None)
            else:
                self._send(producer, value, size)
        with self._lock:  # what was handed over settles within the deadline, or close() counts it
            self._lock.wait_for(lambda: self._held_events == 0, timeout=max(self._deadline - time.monotonic(), 0))
        self._drop_held()
        self._stop(producer)

    @staticmethod
    def _stop(producer: KafkaProducer) -> None:
        from kafka.errors import KafkaError

        try:
            producer.close(timeout=0)
        except KafkaError:
            # kafka-python's close flushes first and raises when batches are still in flight, before it would
            # stop its network thread; stop that thread as its own close would (the batches fail).
            producer._sender.force_close()

    def _connect(self) -> KafkaProducer | None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        for attempt in itertools.count():
            try:
                return KafkaProducer(**self.kafka)
            except KafkaError as exc:
                log.warning("ragdrift producer: Kafka is unreachable (%s); events are dropped while it is",
                            type(exc).__name__)
            wait = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
            with self._lock:
                if self._lock.wait_for(lambda: self._closing, timeout=wait):
                    return None
        raise AssertionError("unreachable")

    def _send(self, producer: KafkaProducer, value: bytes, size: int) -> None:
        try:
            future = producer.send(self.topic, value=value)
        except Exception:
            self._settled(size, ok=False)
            return
        future.add_callback(lambda _meta: self._settled(size, ok=True))
        future.add_errback(lambda _exc: self._settled(size, ok=False))

    def _settled(self, size: int, *, ok: bool | None) -> None:
        """An item left the bound: sent (`ok`), failed, or (None) never an event."""
        with self._lock:
            if self._closed:
                return
            self._held_events -= 1
            self._held_bytes -= size
            if self._closing:  # the library's thread waits for what is in flight only when closing
                self._lock.notify()
            if ok is None:
                return
            with self.counts.lock:
                if ok:
                    self.counts.sent += 1
                else:
                    self.counts.failed += 1
