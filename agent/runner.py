"""The agent loop: consume, fold into per-partition state, checkpoint, publish.

Exactly-once state: each partition's state and its next offset are written in
one store transaction, then the same offsets are committed to Kafka for lag
tools. On assignment a partition resumes from its stored checkpoint, so after
any crash, restart or rebalance its state equals one uninterrupted run's.
Dead letters are flushed before the checkpoint that moves past them.
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

from agent.core.access import unauthorized_results
from agent.core.event import RejectedEvent
from agent.core.freshness import is_stale
from agent.core.state import PartitionState
from agent.core.tally import Tally, add, subtract, total
from agent.core.view import admitted_set
from agent.io import broker
from agent.io.exporter import RagdriftCollector, Snapshot
from agent.io.settings import Settings
from agent.io.store import Checkpoint, Store, StoreError
from agent.io.tracing import remote_context

log = logging.getLogger("ragdrift.agent")
MAX_LINKS = 32  # links per poll span: enough to follow a sample, bounded


@dataclass
class Owned:
    """A partition this replica owns: its state, where it resumes, and the
    totals it had when loaded (so counters stay process-local)."""

    state: PartitionState
    next_offset: int
    base: Tally
    checkpointed_offset: int
    stored_before: int  # sealed buckets below this index are in the store already


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
        self.exemplars: dict[tuple, tuple[str, float]] = {}
        self.checkpoints: Counter[str] = Counter()
        self.last_checkpoint: float | None = None
        self.last_progress = time.monotonic()
        self.store_ok = True
        self.stop_event = threading.Event()
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
        next_publish = 0.0
        log.info("agent started", extra={"topics": kafka.topics, "group": kafka.group_id})
        if not broker.has_fast_crc():
            log.warning("the crc32c package is missing: record CRCs are checked in pure Python, ~20x slower")
        try:
            while not self.stop_event.is_set():
                batch = self.consumer.poll(timeout_ms=kafka.poll_timeout_ms)
                if batch:
                    self._process_batch(batch)
                self.last_progress = time.monotonic()
                now = time.monotonic()
                if now >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = now + interval
                if now >= next_publish:
                    self.publish()
                    next_publish = now + publish_every
            self.checkpoint()
        finally:
            self._close()

    def stop(self) -> None:
        self.stop_event.set()

    def _close(self) -> None:
        try:
            self.publish()
            self.consumer.close(autocommit=False)
        except Exception:  # never hide the error that ended the loop
            log.exception("error while leaving the group")
        finally:
            self.producer.close(timeout=5)
            log.info("agent stopped")

    # -- processing -----------------------------------------------------

    def _process_batch(self, batch: dict) -> None:
        links: list[Link] = []
        count = 0
        with self.tracer.start_as_current_span("ragdrift.poll_batch") as span:
            for tp, records in batch.items():
                owned = self.owned.get(tp)
                if owned is None:
                    continue
                for record in records:
                    if record.offset < owned.next_offset:
                        continue  # already folded into the restored state
                    self._process(owned, record, links)
                    owned.next_offset = record.offset + 1
                    count += 1
            span.set_attribute("messaging.batch.message_count", count)
            for item in links:
                span.add_link(item.context)

    def _process(self, owned: Owned, record, links: list[Link]) -> None:
        try:
            decoded = owned.state.process(record.value or b"", self.settings.kafka.max_message_bytes)
        except RejectedEvent as exc:
            self._dead_letter(record, exc)
            return
        context = remote_context(broker.header(record, "traceparent"))
        if context is not None:
            if len(links) < MAX_LINKS:
                links.append(Link(context))
            self._remember_exemplar(owned, decoded.event, format(context.trace_id, "032x"))

    def _dead_letter(self, record, exc: RejectedEvent) -> None:
        value, headers = broker.dead_letter(record, exc.reason, exc.kind)
        self.producer.send(self.settings.kafka.dead_letter_topic, value=value, key=record.key, headers=headers)
        self.rejected[exc.kind] += 1
        # The reason names a field path at most; the payload is never logged.
        log.warning("message dead-lettered", extra={"reason": exc.reason, "topic": record.topic,
                                                    "partition": record.partition, "offset": record.offset})

    def _remember_exemplar(self, owned: Owned, event, trace_id: str) -> None:
        app = owned.state.labels["app"](event.app)
        ts = event.ts.timestamp()
        now = time.time()
        if unauthorized_results(event):
            self.exemplars[("unauthorized_results", app)] = (trace_id, now)
            self.exemplars[("unauthorized_retrievals", app)] = (trace_id, now)
        if any(is_stale(r, ts) for r in admitted_set(event)):
            self.exemplars[("stale_results", app)] = (trace_id, now)

    # -- checkpoints ----------------------------------------------------

    def checkpoint(self, partitions: list[TopicPartition] | None = None) -> bool:
        """Write state + offsets in one transaction, then commit them to Kafka."""
        targets = [tp for tp in (partitions or list(self.owned)) if tp in self.owned]
        dirty = [tp for tp in targets if self.owned[tp].next_offset != self.owned[tp].checkpointed_offset]
        if not dirty:
            self._mark_checkpoint()
            return True
        with self.tracer.start_as_current_span("ragdrift.checkpoint") as span:
            span.set_attribute("ragdrift.partitions", len(dirty))
            try:
                self.producer.flush(timeout=30)
                self.store.save(self.settings.kafka.group_id, [self._checkpoint_of(tp) for tp in dirty])
            except (StoreError, KafkaError) as exc:
                self.checkpoints["error"] += 1
                self.store_ok = False
                log.error("checkpoint failed; will retry", extra={"error": str(exc)})
                return False
            self.store_ok = True
            for tp in dirty:
                owned = self.owned[tp]
                owned.checkpointed_offset = owned.next_offset
                owned.stored_before = owned.state.windows.sealed_before()
            self._mark_checkpoint()
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
            sealed=windows.sealed_items(owned.stored_before), keep_from=windows.oldest(),
        )

    def _mark_checkpoint(self) -> None:
        self.checkpoints["ok"] += 1
        self.last_checkpoint = time.time()

    def assign(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            if tp in self.owned:
                continue
            stored = self.store.load(self.settings.kafka.group_id, tp.topic, tp.partition)
            if stored is None:
                state = PartitionState(self.core)
                self._seek_start(tp)
                offset = -1
            else:
                state = PartitionState.from_dict(self.core, stored.state, stored.sealed)
                self.consumer.seek(tp, stored.next_offset)
                offset = stored.next_offset
            self.owned[tp] = Owned(state, offset, state.totals(), offset, state.windows.sealed_before())
            log.info("partition assigned", extra={"topic": tp.topic, "partition": tp.partition, "offset": offset})

    def _seek_start(self, tp: TopicPartition) -> None:
        if self.settings.kafka.auto_offset_reset == "earliest":
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek_to_end(tp)

    def revoke(self, partitions: list[TopicPartition], lost: bool = False) -> None:
        mine = [tp for tp in partitions if tp in self.owned]
        if not lost:
            self.checkpoint(mine)
        for tp in mine:
            owned = self.owned.pop(tp)
            add(self.released, subtract(owned.state.totals(), owned.base))
            log.info("partition released", extra={"topic": tp.topic, "partition": tp.partition, "lost": lost})

    # -- exposition -----------------------------------------------------

    def publish(self) -> None:
        """Hand the exporter a fresh immutable snapshot."""
        owned = [self.owned[tp] for tp in sorted(self.owned)]
        now = time.time()
        counters = total([self.released, *(subtract(o.state.totals(), o.base) for o in owned)])
        windows = {
            name: total(o.state.windows.window(seconds, now) for o in owned) for name, seconds in self.core.windows
        }
        lag = {}
        for tp in sorted(self.owned):
            high = self.consumer.highwater(tp) if self.consumer is not None else None
            if high is not None and self.owned[tp].next_offset >= 0:
                lag[(tp.topic, tp.partition)] = max(0, high - self.owned[tp].next_offset)
        self.collector.publish(Snapshot(
            counters=counters, windows=windows, rejected=dict(self.rejected), exemplars=dict(self.exemplars),
            lag=lag, assigned=len(owned), last_checkpoint=self.last_checkpoint, checkpoints=dict(self.checkpoints),
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
        return True, f"{len(self.owned)} partitions, lag {lag}"


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
    """Run the agent until SIGTERM or SIGINT, then drain and exit 0."""
    import signal

    running = build(settings)
    log.info("metrics listening", extra={"port": running.server.port})
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: running.agent.stop())
    try:
        running.agent.run()
    finally:
        running.close()
    return 0
