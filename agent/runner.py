"""The agent loop: consume, fold into per-partition state, checkpoint, publish.

The partitions it owns, and their exactly-once checkpoints, are
agent/ownership.py's; the rules are the core's (agent/core/partitions.py).
The Kafka consumer and producer are passed in, so a test can drive the loop.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Sequence

from kafka import ConsumerRebalanceListener, TopicPartition
from kafka.errors import KafkaError
from opentelemetry.trace import Link, Tracer

from agent.core import partitions
from agent.core.access import UNAUTHORIZED_RESULTS, UNAUTHORIZED_RETRIEVALS
from agent.core.facts import Facts
from agent.core.freshness import STALE_RESULTS
from agent.core.partitions import NO_OFFSET, Owned
from agent.core.reasons import RejectedEvent
from agent.core.snapshot import Exposition, Health
from agent.core.state import recent
from agent.core.tally import Tally, add, total
from agent.io.features import FeatureAdapter
from agent.io.kafka import broker
from agent.io.kafka.broker import Clients
from agent.io.kafka.dead_letters import DeadLetters
from agent.io.prometheus.collectors import Latest
from agent.io.settings.agent import Settings
from agent.io.store.database import Store, StoreError
from agent.io.tracing import remote_context
from agent.ownership import IO_TIMEOUT_MS, Ownership

log = logging.getLogger("ragdrift.agent")
MAX_LINKS = 32  # links per poll span: enough to follow a sample, bounded
SHUTDOWN_SECONDS = 9.0  # drain, checkpoint, commit and leave within this after a stop request


class Agent:
    def __init__(self, *, settings: Settings, store: Store, latest: Latest, tracer: Tracer, clients: Clients,
                 features: Sequence[FeatureAdapter] = ()):
        self.kafka = settings.kafka
        self.core = settings.core()
        self.metrics = settings.metrics
        self.checkpoint_every = settings.store.checkpoint_interval_seconds
        self.store = store
        self.latest = latest
        self.tracer = tracer
        self.consumer = clients.consumer
        self.letters = DeadLetters(clients.producer, self.kafka.dead_letter_topic)
        self.client_id = clients.client_id or f"ragdrift-{socket.gethostname()}"
        self.exposition = Exposition(self.core, self.metrics.top_n)
        self.features = features
        self.parts = Ownership(settings=settings, store=store, consumer=self.consumer, letters=self.letters,
                               tracer=tracer, budget=self._remaining, features=features)
        self.owned = self.parts.owned
        self.counters: Tally = {}  # everything this process ingested, less the pipeline versions forgotten
        self.exemplars: dict[tuple, tuple[str, float]] = {}
        self.last_progress = time.monotonic()
        self.log_end: dict[TopicPartition, int] = {}  # from the last probe (fresh while paused too)
        self.last_contact: float | None = None  # epoch s of the broker's last answer
        self.unreachable_since: float | None = None  # set while probes fail
        self.started = time.time()
        self.fatal: Exception | None = None
        self.stop_event = threading.Event()
        self.deadline = float("inf")

    # -- lifecycle -------------------------------------------------------

    def run(self) -> None:
        """Consume until `stop()`; then drain, checkpoint, commit and leave the group."""
        kafka = self.kafka
        broker.subscribe(self.consumer, kafka.topics, _Rebalance(self))
        next_checkpoint = time.monotonic() + self.checkpoint_every
        next_publish = next_probe = 0.0
        log.info("agent started", extra={"topics": kafka.topics, "group": kafka.group_id})
        if not broker.has_fast_crc():
            log.warning("the crc32c package is missing: record CRCs are checked in pure Python, ~20x slower")
        try:
            while not self.stop_event.is_set():
                self._hold_while_failing()
                polled = self.consumer.poll(timeout_ms=kafka.poll_timeout_ms)
                for tp in self.parts.verify_logs():
                    polled.pop(tp, None)  # read from a log that is gone
                if self.parts.resolve_starts(polled):
                    next_checkpoint = 0.0  # record where new partitions start at once
                if polled:
                    if self._process_poll(polled):
                        next_checkpoint = 0.0  # many security incidents wait in memory
                    self._contact()
                self.last_progress = now = time.monotonic()
                if now >= next_probe:
                    self._probe()
                    next_probe = now + kafka.probe_interval_seconds
                if now >= next_checkpoint:
                    self.parts.checkpoint()
                    next_checkpoint = now + self.checkpoint_every
                if now >= next_publish:
                    self.publish()
                    next_publish = now + self.metrics.snapshot_interval_seconds
            if self.fatal is None:
                self.parts.checkpoint()
        finally:
            self._close()
        if self.fatal is not None:
            raise self.fatal

    def stop(self) -> None:
        if not self.stop_event.is_set():
            self.deadline = time.monotonic() + SHUTDOWN_SECONDS
        self.stop_event.set()

    def _hold_while_failing(self) -> None:
        if partitions.paused(self.parts.failures):
            self.consumer.pause(*self.owned)  # again each time: new assignments too
        elif held := [tp for tp in self.consumer.paused() if tp not in self.parts.unreadable]:
            self.consumer.resume(*held)
            log.info("checkpoints succeed again; consumption resumed")

    def _remaining(self, cap: float) -> float:
        """Seconds an I/O step may take: `cap`, or less once shutting down."""
        return max(0.5, min(cap, self.deadline - time.monotonic() - 1.0))

    def _close(self) -> None:
        try:
            self.publish()
            self.consumer.close(autocommit=False, timeout_ms=int(self._remaining(5) * 1000))
        except Exception:  # never hide the error that ended the loop
            log.exception("error while leaving the group")
        finally:
            self.letters.producer.close(timeout=self._remaining(5))
            log.info("agent stopped")

    # -- the log ---------------------------------------------------------

    def _probe(self) -> None:
        """Ask for the log end of every owned partition (of each topic's first
        partition when none is owned): lag stays true while consumption is
        paused, and a broker that cannot answer is counted unreachable."""
        asked = list(self.owned) or [TopicPartition(t, 0) for t in self.kafka.topics]
        try:
            ends = self.consumer.end_offsets(asked, timeout_ms=int(self._remaining(IO_TIMEOUT_MS / 1000) * 1000))
        except KafkaError as exc:
            if self.unreachable_since is None:
                self.unreachable_since = self.last_contact or self.started
                log.error("kafka unreachable", extra={"error": str(exc)})
            return
        self.log_end = {tp: end for tp, end in ends.items() if tp in self.owned}
        self._contact()

    def _contact(self) -> None:
        """The broker answered."""
        if self.unreachable_since is not None:
            log.info("kafka reachable again", extra={"after_seconds": round(time.time() - self.unreachable_since, 1)})
        self.unreachable_since = None
        self.last_contact = time.time()

    # -- processing -----------------------------------------------------

    def _process_poll(self, polled: dict) -> bool:
        """Process a poll's records; True when a partition wants a checkpoint now."""
        links: list[Link] = []
        count = 0
        flush = False
        with self.tracer.start_as_current_span("ragdrift.poll") as span:
            for tp, records in polled.items():
                owned = self.owned.get(tp)
                if owned is None or owned.next_offset == NO_OFFSET:
                    continue  # not loaded (the store failed: we are stopping) or start unknown
                if records[0].offset < owned.next_offset:
                    owned = self.parts.restart(tp, owned, records[0].offset)
                for feature in self.features:
                    feature.prepare(owned.state)
                for record in records:
                    self._process(owned, record, links)
                    owned.next_offset = record.offset + 1
                    count += 1
                add(self.counters, owned.state.take_added())
                flush = flush or partitions.flush_due(owned)
            span.set_attribute("messaging.batch.message_count", count)
            for item in links:
                span.add_link(item.context)
        self.letters.log_new()
        return flush

    def _process(self, owned: Owned, record, links: list[Link]) -> None:
        try:
            facts = owned.state.process(record.value or b"", self.kafka.max_message_bytes, broker.written_at(record))
        except RejectedEvent as exc:
            self.letters.send(record, exc)
            return
        traceparent = broker.header(record, "traceparent")
        if traceparent is not None:
            self._follow(owned, facts, traceparent, links)

    def _follow(self, owned: Owned, facts: Facts, traceparent: str, links: list[Link]) -> None:
        """Link the producer's trace, and keep its id as the exemplar of the
        unauthorized and stale counters this event raised."""
        hits = []
        if facts.unauthorized:
            hits += [UNAUTHORIZED_RESULTS.name, UNAUTHORIZED_RETRIEVALS.name]
        if facts.stale:
            hits.append(STALE_RESULTS.name)
        if not hits and len(links) >= MAX_LINKS:
            return
        context = remote_context(traceparent)
        if context is None:
            return
        if len(links) < MAX_LINKS:
            links.append(Link(context))
        lead = owned.state.context.lead()  # of the event just ingested: its app label (and version's, when split)
        for family in hits:
            self.exemplars[(family, *lead)] = (format(context.trace_id, "032x"), time.time())

    # -- rebalancing ----------------------------------------------------

    def assign(self, assigned: list[TopicPartition]) -> None:
        self._contact()  # the group coordinator answered
        try:
            self.parts.assign(assigned)
        except StoreError as exc:
            # Without its state a partition cannot be processed exactly once:
            # stop, so the orchestrator restarts us and the group rebalances.
            log.error("cannot load a checkpoint; stopping", extra={"error": str(exc)})
            self.fatal = exc
            self.stop()

    def revoke(self, revoked: list[TopicPartition], lost: bool = False) -> None:
        self.parts.revoke(revoked, lost)
        for tp in revoked:
            self.log_end.pop(tp, None)


    # -- exposition -----------------------------------------------------

    def publish(self) -> None:
        """Hand the collectors a fresh immutable snapshot."""
        now = time.time()
        states = [self.owned[tp].state for tp in sorted(self.owned)]
        windows = {name: total(s.windows.window(seconds, now) for s in states) for name, seconds in self.core.windows}
        health = Health(
            rejected=dict(self.letters.rejected), lag=self.parts.lag(self.log_end), assigned=len(states),
            last_checkpoint=self.parts.last_checkpoint, checkpoints=dict(self.parts.checkpoints), resets=self.parts.resets,
            set_aside=self.parts.set_aside,
            unreadable={(tp.topic, tp.partition): reason for tp, reason in self.parts.unreadable.items()},
            last_contact=self.last_contact, unreachable_since=self.unreachable_since,
            paused=partitions.paused(self.parts.failures),
        )
        live = recent(self.core, states) if self.core.by_pipeline_version else None
        self.latest.publish(self.exposition.snapshot(self.counters, windows, now, self.exemplars, health, live))
        for feature in self.features:
            feature.publish(states, now)

    def health(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self.last_progress
        return (stalled < self.metrics.stalled_after_seconds, f"last poll {stalled:.1f}s ago")

    def ready(self) -> tuple[bool, str]:
        if not self.owned:
            return False, "no partitions assigned"
        if not self.parts.store_ok or not self.store.ping():
            return False, "store unreachable"
        lag = sum(self.latest.snapshot.health.lag.values())
        if lag > self.metrics.ready_max_lag:
            return False, f"lag {lag} above {self.metrics.ready_max_lag}"
        # Still ready while Kafka is unreachable: an unready pod leaves its
        # Service's endpoints, and then nothing would scrape the metric that
        # tells of the outage (docs/operations.md, health endpoints).
        since = self.unreachable_since
        outage = f"; kafka unreachable for {time.time() - since:.0f}s" if since is not None else ""
        return True, f"{len(self.owned)} partitions, lag {lag}{outage}"


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, agent: Agent):
        self.agent = agent

    def on_partitions_revoked(self, revoked):
        self.agent.revoke(list(revoked))

    def on_partitions_assigned(self, assigned):
        self.agent.assign(list(assigned))

    def on_partitions_lost(self, lost):
        self.agent.revoke(list(lost), lost=True)
