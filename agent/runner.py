"""The agent loop: consume, fold into per-partition state, checkpoint, publish.

Exactly-once state: each partition's state and its next offset are written in
one store transaction, then the same offsets are committed to Kafka for lag
tools. On assignment a partition resumes from its stored checkpoint, so after
any crash, restart or rebalance its state equals one uninterrupted run's.
Dead letters are delivered (and checked) before the checkpoint that moves
past them. The rules (what to checkpoint, when to pause, when a log was
recreated) are the core's: agent/core/partitions.py.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter

from kafka import ConsumerRebalanceListener, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from opentelemetry.trace import Link, Tracer

from agent.core import partitions
from agent.core.access import UNAUTHORIZED_RESULTS, UNAUTHORIZED_RETRIEVALS
from agent.core.facts import Facts
from agent.core.freshness import STALE_RESULTS
from agent.core.partitions import NO_OFFSET, Owned
from agent.core.reasons import RejectedEvent
from agent.core.snapshot import Exposition, Health
from agent.core.state import PartitionState, StateError
from agent.core.tally import Tally, total
from agent.io import broker
from agent.io.dead_letters import DeadLetters
from agent.io.exporter import Latest
from agent.io.settings import Settings
from agent.io.store import Checkpoint, Store, StoreError
from agent.io.tracing import remote_context

log = logging.getLogger("ragdrift.agent")
MAX_LINKS = 32  # links per poll span: enough to follow a sample, bounded
SHUTDOWN_SECONDS = 9.0  # drain, checkpoint, commit and leave within this after a stop request
IO_TIMEOUT_MS = 3000  # the longest a Kafka call may block the loop or a rebalance callback


class Agent:
    def __init__(self, settings: Settings, store: Store, latest: Latest, tracer: Tracer, consumer, producer,
                 client_id: str | None = None):
        self.kafka = settings.kafka
        self.core = settings.core()
        self.metrics = settings.metrics
        self.checkpoint_every = settings.store.checkpoint_interval_seconds
        self.store = store
        self.latest = latest
        self.tracer = tracer
        self.consumer = consumer
        self.letters = DeadLetters(producer, self.kafka.dead_letter_topic)
        self.client_id = client_id or f"ragdrift-{socket.gethostname()}"
        self.exposition = Exposition(self.core, self.metrics.top_n)
        self.owned: dict[TopicPartition, Owned] = {}
        self.counters: Tally = {}  # everything this process ingested: only ever grows
        self.exemplars: dict[tuple, tuple[str, float]] = {}
        self.checkpoints: Counter[str] = Counter()
        self.resets = 0
        self.last_checkpoint: float | None = None
        self.last_progress = time.monotonic()
        self.store_ok = True
        self.failures = 0  # failed checkpoints in a row
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
        self.consumer.subscribe(kafka.topics, listener=_Rebalance(self))
        next_checkpoint = time.monotonic() + self.checkpoint_every
        next_publish = next_probe = 0.0
        log.info("agent started", extra={"topics": kafka.topics, "group": kafka.group_id})
        if not broker.has_fast_crc():
            log.warning("the crc32c package is missing: record CRCs are checked in pure Python, ~20x slower")
        try:
            while not self.stop_event.is_set():
                self._hold_while_failing()
                batch = self.consumer.poll(timeout_ms=kafka.poll_timeout_ms)
                for tp in self._verify_logs():
                    batch.pop(tp, None)  # read from a log that is gone
                if self._resolve_starts(batch):
                    next_checkpoint = 0.0  # record where new partitions start at once
                if batch:
                    self._process_batch(batch)
                    self._contact()
                self.last_progress = now = time.monotonic()
                if now >= next_probe:
                    self._probe()
                    next_probe = now + kafka.probe_interval_seconds
                if now >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = now + self.checkpoint_every
                if now >= next_publish:
                    self.publish()
                    next_publish = now + self.metrics.snapshot_interval_seconds
            if self.fatal is None:
                self.checkpoint()
        finally:
            self._close()
        if self.fatal is not None:
            raise self.fatal

    def stop(self) -> None:
        if not self.stop_event.is_set():
            self.deadline = time.monotonic() + SHUTDOWN_SECONDS
        self.stop_event.set()

    def _hold_while_failing(self) -> None:
        if partitions.paused(self.failures):
            self.consumer.pause(*self.owned)  # again each time: new assignments too
        elif self.consumer.paused():
            self.consumer.resume(*self.consumer.paused())
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

    def _resolve_starts(self, batch: dict) -> bool:
        """Pin where partitions without a checkpoint start, before processing.

        Without this, a crash before their first checkpoint would resolve
        `auto_offset_reset` again and, with `latest`, skip events.
        """
        fresh = [tp for tp, owned in self.owned.items() if owned.next_offset == NO_OFFSET]
        for tp in fresh:
            records = batch.get(tp)
            start = records[0].offset if records else self.consumer.position(tp, timeout_ms=IO_TIMEOUT_MS)
            if start is not None:  # not yet resolvable: try again after the next poll
                self.owned[tp].next_offset = start
        return bool(fresh)

    def _verify_logs(self) -> list[TopicPartition]:
        """Start afresh each owned partition whose log was recreated; return them."""
        now = time.monotonic()
        restarted = []
        for tp, owned in list(self.owned.items()):
            current = broker.topic_id(self.consumer, tp.topic)
            high = None if owned.verified else self.consumer.highwater(tp)
            if partitions.recreated(owned, current, high, now):
                self._restart(tp, owned, None, current)
                restarted.append(tp)
        return restarted

    def _restart(self, tp: TopicPartition, owned: Owned, offset: int | None, topic_id: str | None = None) -> Owned:
        """The partition's log is not the one its state describes: the topic was
        recreated or the broker lost its data. Start afresh (at `offset`, or
        from the beginning) rather than skip every new record."""
        log.error("partition log recreated or restarted below its checkpoint; starting a fresh state",
                  extra={"topic": tp.topic, "partition": tp.partition, "checkpoint": owned.next_offset,
                         "topic_id": topic_id, "previous_topic_id": owned.topic_id})
        self.resets += 1
        self.store.reset(self.kafka.group_id, tp.topic, tp.partition)
        if offset is None:
            self.consumer.seek_to_beginning(tp)
        fresh = Owned.fresh(PartitionState(self.core), NO_OFFSET if offset is None else offset,
                            topic_id or owned.topic_id)
        self.owned[tp] = fresh
        return fresh

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

    def _process_batch(self, batch: dict) -> None:
        links: list[Link] = []
        count = 0
        with self.tracer.start_as_current_span("ragdrift.poll_batch") as span:
            for tp, records in batch.items():
                owned = self.owned.get(tp)
                if owned is None or owned.next_offset == NO_OFFSET:
                    continue  # not loaded (the store failed: we are stopping) or start unknown
                if records[0].offset < owned.next_offset:
                    owned = self._restart(tp, owned, records[0].offset)
                for record in records:
                    self._process(owned, record, links)
                    owned.next_offset = record.offset + 1
                    count += 1
            span.set_attribute("messaging.batch.message_count", count)
            for item in links:
                span.add_link(item.context)
        self.letters.log_new()

    def _process(self, owned: Owned, record, links: list[Link]) -> None:
        try:
            facts = owned.state.process(record.value or b"", self.kafka.max_message_bytes,
                                        broker.written_at(record), self.counters)
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
        app = owned.state.labels["app"](facts.event.app)
        for family in hits:
            self.exemplars[(family, app)] = (format(context.trace_id, "032x"), time.time())

    # -- checkpoints ----------------------------------------------------

    def checkpoint(self, only: list[TopicPartition] | None = None) -> bool:
        """Write state + offsets in one transaction, then commit them to Kafka."""
        dirty = [tp for tp in (list(self.owned) if only is None else only) if tp in self.owned and self.owned[tp].dirty]
        if not dirty:
            self.last_checkpoint = time.time()  # nothing unsaved: the state is durable as of now
            return True
        with self.tracer.start_as_current_span("ragdrift.checkpoint") as span:
            span.set_attribute("ragdrift.partitions", len(dirty))
            try:
                self.letters.deliver(self._remaining(IO_TIMEOUT_MS / 1000))
                self.store.save(self.kafka.group_id, [self._checkpoint_of(tp) for tp in dirty])
            except (StoreError, KafkaError) as exc:
                self.checkpoints["error"] += 1
                self.store_ok = False
                self.failures += 1
                log.error("checkpoint failed; will retry" + ("; consumption paused" if partitions.paused(self.failures) else ""),
                          extra={"error": str(exc), "failures_in_a_row": self.failures})
                return False
            self.store_ok = True
            self.failures = 0
            for tp in dirty:
                self.owned[tp].saved()
            self.checkpoints["ok"] += 1
            self.last_checkpoint = time.time()
            # The store is the truth; Kafka's copy is for lag tools. Async,
            # because this also runs inside rebalance callbacks on the
            # client's I/O thread, where blocking calls are refused.
            offsets = {tp: OffsetAndMetadata(self.owned[tp].next_offset, "", -1) for tp in dirty}
            self.consumer.commit_async(offsets, callback=_log_commit_error)
        return True

    def _checkpoint_of(self, tp: TopicPartition) -> Checkpoint:
        owned = self.owned[tp]
        windows = owned.state.windows
        return Checkpoint(
            tp.topic, tp.partition, owned.next_offset, owned.state.to_dict(sealed_elsewhere=True),
            sealed=windows.sealed_items(owned.stored_before), keep_from=windows.oldest(), topic_id=owned.topic_id,
        )

    def assign(self, assigned: list[TopicPartition]) -> None:
        self._contact()  # the group coordinator answered
        for tp in assigned:
            if tp in self.owned:
                continue
            try:
                stored = self.store.load(self.kafka.group_id, tp.topic, tp.partition)
            except StoreError as exc:
                # Without its state a partition cannot be processed exactly once:
                # stop, so the orchestrator restarts us and the group rebalances.
                log.error("cannot load a checkpoint; stopping", extra={"error": str(exc)})
                self.fatal = exc
                self.stop()
                return
            current = broker.topic_id(self.consumer, tp.topic)
            if stored is None:
                self._seek_start(tp)
                self.owned[tp] = Owned.fresh(PartitionState(self.core), topic_id=current)
            else:
                self.owned[tp] = self._restore(tp, stored)
            log.info("partition assigned", extra={"topic": tp.topic, "partition": tp.partition,
                                                  "offset": self.owned[tp].next_offset})

    def _restore(self, tp: TopicPartition, stored: Checkpoint) -> Owned:
        self.consumer.seek(tp, stored.next_offset)
        try:
            state = PartitionState.from_dict(self.core, stored.state, stored.sealed)
        except StateError as exc:
            # A state this release cannot read (written by a newer one, or
            # damaged): start afresh where it stopped rather than crash-loop.
            log.error("stored state unreadable; starting a fresh state at its offset",
                      extra={"topic": tp.topic, "partition": tp.partition, "error": str(exc)})
            self.resets += 1
            self.store.reset(self.kafka.group_id, tp.topic, tp.partition)
            return Owned.fresh(PartitionState(self.core), stored.next_offset, stored.topic_id)
        return Owned.restored(state, stored.next_offset, stored.topic_id)

    def _seek_start(self, tp: TopicPartition) -> None:
        if self.kafka.auto_offset_reset == "earliest":
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek_to_end(tp)

    def revoke(self, revoked: list[TopicPartition], lost: bool = False) -> None:
        mine = [tp for tp in revoked if tp in self.owned]
        if not lost and mine:
            self.checkpoint(mine)
        for tp in mine:
            self.log_end.pop(tp, None)
            del self.owned[tp]
            log.info("partition released", extra={"topic": tp.topic, "partition": tp.partition, "lost": lost})

    # -- exposition -----------------------------------------------------

    def lag(self) -> dict[tuple[str, int], int]:
        out = {}
        for tp, owned in sorted(self.owned.items()):
            waiting = partitions.lag(owned, self.consumer.highwater(tp), self.log_end.get(tp))
            if waiting is not None:
                out[(tp.topic, tp.partition)] = waiting
        return out

    def publish(self) -> None:
        """Hand the exporter a fresh immutable snapshot."""
        now = time.time()
        states = [self.owned[tp].state for tp in sorted(self.owned)]
        windows = {name: total(s.windows.window(seconds, now) for s in states) for name, seconds in self.core.windows}
        health = Health(
            rejected=dict(self.letters.rejected), lag=self.lag(), assigned=len(states),
            last_checkpoint=self.last_checkpoint, checkpoints=dict(self.checkpoints), resets=self.resets,
            last_contact=self.last_contact, unreachable_since=self.unreachable_since,
        )
        self.latest.publish(self.exposition.snapshot(self.counters, windows, now, self.exemplars, health))

    def health(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self.last_progress
        return (stalled < self.metrics.stalled_after_seconds, f"last poll {stalled:.1f}s ago")

    def ready(self) -> tuple[bool, str]:
        if not self.owned:
            return False, "no partitions assigned"
        if not self.store_ok or not self.store.ping():
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


def _log_commit_error(offsets, response) -> None:
    if isinstance(response, Exception):
        log.warning("kafka offset commit failed", extra={"error": str(response)})


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, agent: Agent):
        self.agent = agent

    def on_partitions_revoked(self, revoked):
        self.agent.revoke(list(revoked))

    def on_partitions_assigned(self, assigned):
        self.agent.assign(list(assigned))

    def on_partitions_lost(self, lost):
        self.agent.revoke(list(lost), lost=True)
