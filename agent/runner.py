"""The agent loop: consume, fold into per-partition state, checkpoint, publish.

Exactly-once state: each partition's state and its next offset are written in
one store transaction, then the same offsets are committed to Kafka for lag
tools. On assignment a partition resumes from its stored checkpoint, so after
any crash, restart or rebalance its state equals one uninterrupted run's.
Dead letters are delivered (and checked) before the checkpoint that moves
past them.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass

from kafka import ConsumerRebalanceListener, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from opentelemetry.trace import Link, Tracer

from agent.core.access import UNAUTHORIZED_RESULTS, UNAUTHORIZED_RETRIEVALS
from agent.core.facts import Facts
from agent.core.freshness import STALE_RESULTS
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState, snapshot
from agent.core.tally import Tally, add, subtract, total
from agent.io import broker
from agent.io.exporter import RagdriftCollector, Snapshot
from agent.io.settings import Settings
from agent.io.store import Checkpoint, Store, StoreError
from agent.io.tracing import remote_context

log = logging.getLogger("ragdrift.agent")
MAX_LINKS = 32  # links per poll span: enough to follow a sample, bounded


NO_OFFSET = -1  # a partition with no checkpoint, until its start offset is known
SHUTDOWN_SECONDS = 9.0  # drain, checkpoint, commit and leave within this after a stop request
LOG_SHORTFALL_SECONDS = 10.0  # a log ending before the checkpoint this long was recreated
IO_TIMEOUT_MS = 3000  # the longest a Kafka call may block the loop or a rebalance callback
PAUSE_AFTER_FAILURES = 3  # failed checkpoints in a row before consumption pauses


@dataclass
class Owned:
    """A partition this replica owns: its state, where it resumes, and the
    totals it had when loaded (so counters stay process-local)."""

    state: PartitionState
    next_offset: int
    base: Tally
    checkpointed_offset: int
    stored_before: int  # sealed buckets below this index are in the store already
    verified: bool = True  # False until the log is known to reach the stored offset
    short_since: float | None = None  # when the log was first seen ending before the offset
    topic_id: str | None = None  # the log's identity when loaded; a new id means a recreated topic


@dataclass(frozen=True)
class Letter:
    """A dead letter in flight: delivered before the checkpoint that passes it."""

    future: object
    topic: str
    partition: int
    offset: int
    reason: str


class Agent:
    def __init__(self, settings: Settings, store: Store, collector: RagdriftCollector, tracer: Tracer,
                 client_id: str | None = None):
        self.settings = settings
        self.core = settings.core()
        self.store = store
        self.collector = collector
        self.tracer = tracer
        self.client_id = client_id or f"ragdrift-{socket.gethostname()}"
        self.owned: dict[TopicPartition, Owned] = {}
        self.released: Tally = {}  # process-local totals of partitions given away
        self.rejected: Counter[str] = Counter()
        self.letters: list[Letter] = []
        self.logged_letters = 0
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
        self.consumer = None
        self.producer = None

    # -- lifecycle -------------------------------------------------------

    def run(self) -> None:
        """Consume until `stop()`; then drain, checkpoint, commit and leave the group."""
        kafka = self.settings.kafka
        self.consumer = broker.consumer(kafka, self.client_id)
        self.producer = broker.producer(kafka, self.client_id)
        self.consumer.subscribe(kafka.topics, listener=_Rebalance(self))
        interval = self.settings.store.checkpoint_interval_seconds
        publish_every = self.settings.metrics.snapshot_interval_seconds
        next_checkpoint = time.monotonic() + interval
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
                    next_checkpoint = now + interval
                if now >= next_publish:
                    self.publish()
                    next_publish = now + publish_every
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
        """While checkpoints keep failing (store or dead-letter topic down),
        stop consuming: otherwise the work to redo after a crash, and the dead
        letters held in memory, would grow without bound."""
        if self.failures >= PAUSE_AFTER_FAILURES:
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
            self.producer.close(timeout=self._remaining(5))
            log.info("agent stopped")

    # -- processing -----------------------------------------------------

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
        """Start afresh each owned partition whose log was recreated (or lost
        by the broker); return them.

        A topic id other than the one loaded says so at once, whatever the new
        log's length. Brokers without topic ids are caught when the log ends
        before the checkpoint: some then simply return nothing, so compare
        with the high watermark once it is known. A new partition leader can
        report a low watermark for a moment, so only a shortfall that lasts
        counts.
        """
        now = time.monotonic()
        restarted = []
        for tp, owned in list(self.owned.items()):
            current = broker.topic_id(self.consumer, tp.topic)
            if owned.topic_id is None:
                owned.topic_id = current
            elif current is not None and current != owned.topic_id:
                self._restart(tp, owned, None, current)
                restarted.append(tp)
                continue
            high = None if owned.verified else self.consumer.highwater(tp)
            if high is None:
                continue
            if high >= owned.next_offset:
                owned.verified = True
            elif owned.short_since is None:
                owned.short_since = now
            elif now - owned.short_since >= LOG_SHORTFALL_SECONDS:
                self._restart(tp, owned, None, current)
                restarted.append(tp)
        return restarted

    def _probe(self) -> None:
        """Ask for the log end of every owned partition (of each topic's first
        partition when none is owned): lag stays true while consumption is
        paused, and a broker that cannot answer is counted unreachable."""
        partitions = list(self.owned) or [TopicPartition(t, 0) for t in self.settings.kafka.topics]
        try:
            ends = self.consumer.end_offsets(partitions, timeout_ms=int(self._remaining(IO_TIMEOUT_MS / 1000) * 1000))
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
        self._log_rejections()

    def _restart(self, tp: TopicPartition, owned: Owned, offset: int | None, topic_id: str | None = None) -> Owned:
        """The partition's log now starts below our checkpoint: the topic was
        recreated or the broker lost its data. The stored state describes a log
        that is gone, so start afresh (at `offset`, or from the beginning)
        rather than skip every new record."""
        log.error("partition log recreated or restarted below its checkpoint; starting a fresh state",
                  extra={"topic": tp.topic, "partition": tp.partition, "checkpoint": owned.next_offset,
                         "topic_id": topic_id, "previous_topic_id": owned.topic_id})
        self.resets += 1
        add(self.released, subtract(owned.state.totals(), owned.base))
        self.store.reset(self.settings.kafka.group_id, tp.topic, tp.partition)
        if offset is None:
            self.consumer.seek_to_beginning(tp)
        fresh = Owned(PartitionState(self.core), NO_OFFSET if offset is None else offset, {}, NO_OFFSET, 0,
                      topic_id=topic_id or owned.topic_id)
        self.owned[tp] = fresh
        return fresh

    def _process(self, owned: Owned, record, links: list[Link]) -> None:
        try:
            facts = owned.state.process(
                record.value or b"", self.settings.kafka.max_message_bytes, broker.written_at(record))
        except RejectedEvent as exc:
            self._dead_letter(record, exc)
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

    def _dead_letter(self, record, exc: RejectedEvent) -> None:
        topic = self.settings.kafka.dead_letter_topic
        value, key, headers = broker.dead_letter(record, exc)
        try:
            future = self.producer.send(topic, value=value, key=key, headers=headers)
        except KafkaError:  # e.g. larger than the producer takes: forward the facts only
            value, key, headers = broker.dead_letter(record, exc, withhold=True)
            future = self.producer.send(topic, value=value, key=key, headers=headers)
        self.letters.append(Letter(future, record.topic, record.partition, record.offset, exc.reason))
        self.rejected[exc.kind] += 1

    def _log_rejections(self) -> None:
        """One line per batch, never the payload: reasons name a field path at most."""
        fresh = self.letters[self.logged_letters:]
        if fresh:
            log.warning("messages dead-lettered", extra={
                "count": len(fresh), "reasons": dict(Counter(letter.reason for letter in fresh)),
                "first": f"{fresh[0].topic}/{fresh[0].partition}@{fresh[0].offset}",
            })
            self.logged_letters = len(self.letters)

    def _deliver_letters(self) -> None:
        """Make sure every dead letter since the last checkpoint arrived.

        Waits stay well under the session timeout (this also runs in rebalance
        callbacks); a failure fails the checkpoint, which is retried later.
        """
        self.producer.flush(timeout=self._remaining(IO_TIMEOUT_MS / 1000))
        failed = [letter for letter in self.letters if not letter.future.succeeded()]
        if failed:  # retry once with the facts only: the payload may be what failed
            retries = [
                self.producer.send(self.settings.kafka.dead_letter_topic, value=value, key=key, headers=headers)
                for value, key, headers in (
                    broker.dead_letter_facts(x.topic, x.partition, x.offset, x.reason) for x in failed)
            ]
            self.producer.flush(timeout=self._remaining(IO_TIMEOUT_MS / 1000))
            if not all(future.succeeded() for future in retries):
                raise KafkaError(f"{len(failed)} dead letters not delivered")
        self.letters.clear()
        self.logged_letters = 0

    # -- checkpoints ----------------------------------------------------

    def checkpoint(self, partitions: list[TopicPartition] | None = None) -> bool:
        """Write state + offsets in one transaction, then commit them to Kafka."""
        targets = [tp for tp in (list(self.owned) if partitions is None else partitions) if tp in self.owned]
        dirty = [tp for tp in targets if self.owned[tp].next_offset != self.owned[tp].checkpointed_offset
                 and self.owned[tp].next_offset != NO_OFFSET]
        if not dirty:
            self.last_checkpoint = time.time()  # nothing unsaved: the state is durable as of now
            return True
        with self.tracer.start_as_current_span("ragdrift.checkpoint") as span:
            span.set_attribute("ragdrift.partitions", len(dirty))
            try:
                self._deliver_letters()
                self.store.save(self.settings.kafka.group_id, [self._checkpoint_of(tp) for tp in dirty])
            except (StoreError, KafkaError) as exc:
                self.checkpoints["error"] += 1
                self.store_ok = False
                self.failures += 1
                paused = self.failures >= PAUSE_AFTER_FAILURES
                log.error("checkpoint failed; will retry" + ("; consumption paused" if paused else ""),
                          extra={"error": str(exc), "failures_in_a_row": self.failures})
                return False
            self.store_ok = True
            self.failures = 0
            for tp in dirty:
                owned = self.owned[tp]
                owned.checkpointed_offset = owned.next_offset
                owned.stored_before = owned.state.windows.sealed_before()
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

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._contact()  # the group coordinator answered
        for tp in partitions:
            if tp in self.owned:
                continue
            try:
                stored = self.store.load(self.settings.kafka.group_id, tp.topic, tp.partition)
            except StoreError as exc:
                # Without its state a partition cannot be processed exactly once:
                # stop, so the orchestrator restarts us and the group rebalances.
                log.error("cannot load a checkpoint; stopping", extra={"error": str(exc)})
                self.fatal = exc
                self.stop()
                return
            current = broker.topic_id(self.consumer, tp.topic)
            if stored is None:
                state = PartitionState(self.core)
                self._seek_start(tp)
                offset = NO_OFFSET
            else:
                state = PartitionState.from_dict(self.core, stored.state, stored.sealed)
                self.consumer.seek(tp, stored.next_offset)
                offset = stored.next_offset
            self.owned[tp] = Owned(state, offset, state.totals(), offset, state.windows.sealed_before(),
                                   verified=stored is None, topic_id=stored.topic_id if stored else current)
            log.info("partition assigned", extra={"topic": tp.topic, "partition": tp.partition, "offset": offset})

    def _seek_start(self, tp: TopicPartition) -> None:
        if self.settings.kafka.auto_offset_reset == "earliest":
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek_to_end(tp)

    def revoke(self, partitions: list[TopicPartition], lost: bool = False) -> None:
        mine = [tp for tp in partitions if tp in self.owned]
        if not lost and mine:
            self.checkpoint(mine)
        for tp in mine:
            self.log_end.pop(tp, None)
            owned = self.owned.pop(tp)
            add(self.released, subtract(owned.state.totals(), owned.base))
            log.info("partition released", extra={"topic": tp.topic, "partition": tp.partition, "lost": lost})

    # -- exposition -----------------------------------------------------

    def publish(self) -> None:
        """Hand the exporter a fresh immutable snapshot."""
        tps = sorted(self.owned)
        owned = [self.owned[tp] for tp in tps]
        sums = snapshot(self.core, (o.state for o in owned), time.time())
        counters = total([self.released, subtract(sums.pop("totals"), total(o.base for o in owned))])
        lag = {}
        for tp, o in zip(tps, owned):
            # The fetcher's high watermark is fresh while consuming, the
            # probe's log end while paused: a log end only grows, so the larger.
            ends = [self.consumer.highwater(tp) if self.consumer is not None else None, self.log_end.get(tp)]
            ends = [end for end in ends if end is not None]
            if ends and o.next_offset != NO_OFFSET:
                lag[(tp.topic, tp.partition)] = max(0, max(ends) - o.next_offset)
        self.collector.publish(Snapshot(
            counters=counters, windows=sums, rejected=dict(self.rejected), exemplars=dict(self.exemplars),
            lag=lag, assigned=len(owned), last_checkpoint=self.last_checkpoint, checkpoints=dict(self.checkpoints),
            resets=self.resets, last_contact=self.last_contact, unreachable_since=self.unreachable_since,
        ))

    def health(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self.last_progress
        limit = self.settings.metrics.stalled_after_seconds
        return (stalled < limit, f"last poll {stalled:.1f}s ago")

    def ready(self) -> tuple[bool, str]:
        if not self.owned:
            return False, "no partitions assigned"
        if not self.store_ok or not self.store.ping():
            return False, "store unreachable"
        lag = sum(self.collector.snapshot.lag.values())
        if lag > self.settings.metrics.ready_max_lag:
            return False, f"lag {lag} above {self.settings.metrics.ready_max_lag}"
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


@dataclass
class Running:
    """An agent with its metrics endpoint, wired but not yet consuming."""

    agent: Agent
    server: object
    store: Store
    tracer_provider: object

    def close(self) -> None:
        self.server.stop()
        self.store.close()
        self.tracer_provider.shutdown()


def build(settings: Settings, tracer_provider=None) -> Running:
    """Wire store, collector, tracer and the metrics endpoint around an agent."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    from agent.io.exporter import MetricsServer
    from agent.io.tracing import provider

    tracer_provider = tracer_provider or provider()
    store = Store(settings.store.url, settings.store.schema)
    collector = RagdriftCollector(settings.core(), settings.metrics.top_n)
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)  # process_start_time_seconds marks restarts for the rules
    agent = Agent(settings, store, collector, tracer_provider.get_tracer("ragdrift"))
    m = settings.metrics
    server = MetricsServer(registry, m.address, m.port, agent.health, agent.ready, m.tls.cert_file, m.tls.key_file)
    return Running(agent, server.start(), store, tracer_provider)


def serve(settings: Settings) -> int:
    """Run the agent until SIGTERM or SIGINT, then drain and exit 0 (1 on a fatal error)."""
    import signal

    try:
        running = build(settings)
    except (StoreError, KafkaError, OSError) as exc:
        log.error("cannot start", extra={"error": str(exc)})
        return 1
    log.info("metrics listening", extra={"port": running.server.port})
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: running.agent.stop())
    try:
        running.agent.run()
    except (StoreError, KafkaError) as exc:
        log.error("agent stopped on an error", extra={"error": str(exc)})
        return 1
    finally:
        running.close()
    return 0
