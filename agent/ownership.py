"""The partitions a replica owns: loading, checkpointing, restarting, releasing.

Exactly-once state: each partition's state and its next offset are written in
one store transaction, then the same offsets are committed to Kafka for lag
tools. On assignment a partition resumes from its stored checkpoint, so after
any crash, restart or rebalance its state equals one uninterrupted run's.
Dead letters are delivered (and checked) before the checkpoint that moves
past them. The rules are the core's (agent/core/partitions.py).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence

from kafka import TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from opentelemetry.trace import Tracer

from agent.core import partitions
from agent.core.partitions import NO_OFFSET, Owned
from agent.core.snapshot import NEWER_RELEASE
from agent.core.state import NewerState, PartitionState, StateError
from agent.io.features import FeatureAdapter
from agent.io.kafka import broker
from agent.io.kafka.dead_letters import DeadLetters
from agent.io.settings.agent import Settings
from agent.io.store.database import Checkpoint, Store, StoreError

log = logging.getLogger("ragdrift.agent")
IO_TIMEOUT_MS = 3000  # the longest a Kafka call may block the loop or a rebalance callback


class Ownership:
    def __init__(self, *, settings: Settings, store: Store, consumer, letters: DeadLetters, tracer: Tracer,
                 budget: Callable[[float], float], features: Sequence[FeatureAdapter] = ()):
        self.kafka = settings.kafka
        self.core = settings.core()
        self.features = features  # each partition's features beside the metric families, and their rows
        self.store = store
        self.consumer = consumer
        self.letters = letters
        self.tracer = tracer
        self.budget = budget  # seconds an I/O step may take, given its usual cap
        self.owned: dict[TopicPartition, Owned] = {}
        self.checkpoints: Counter[str] = Counter()
        self.resets = 0  # partitions started afresh
        self.set_aside = 0  # damaged checkpoints moved aside, their partitions started afresh
        # Assigned partitions whose checkpoint this release must not read nor overwrite, and why:
        # paused, never processed nor checkpointed, until a rebalance hands them to a replica that can.
        self.unreadable: dict[TopicPartition, str] = {}
        self.last_checkpoint: float | None = None
        self.store_ok = True
        self.failures = 0  # failed checkpoints in a row

    def resolve_starts(self, polled: dict) -> bool:
        """Pin where partitions without a checkpoint start, before processing.

        Without this, a crash before their first checkpoint would resolve
        `auto_offset_reset` again and, with `latest`, skip events.
        """
        fresh = [tp for tp, owned in self.owned.items() if owned.next_offset == NO_OFFSET]
        for tp in fresh:
            records = polled.get(tp)
            start = records[0].offset if records else self.consumer.position(tp, timeout_ms=IO_TIMEOUT_MS)
            if start is not None:  # not yet resolvable: try again after the next poll
                self.owned[tp].next_offset = start
        return bool(fresh)

    def verify_logs(self) -> list[TopicPartition]:
        """Start afresh each owned partition whose log was recreated; return them."""
        now = time.monotonic()
        restarted = []
        for tp, owned in list(self.owned.items()):
            current = broker.topic_id(self.consumer, tp.topic)
            high = None if owned.verified else self.consumer.highwater(tp)
            if partitions.recreated(owned, current, high, now):
                self.restart(tp, owned, None, current)
                restarted.append(tp)
        return restarted

    def restart(self, tp: TopicPartition, owned: Owned, offset: int | None, topic_id: str | None = None) -> Owned:
        """The partition's log is not the one its state describes: the topic was
        recreated or the broker lost its data. Start afresh (at `offset`, or
        from the beginning) rather than skip every new record."""
        log.error("partition log recreated or restarted below its checkpoint; starting a fresh state",
                  extra={"topic": tp.topic, "partition": tp.partition, "checkpoint": owned.next_offset,
                         "topic_id": topic_id, "previous_topic_id": owned.topic_id})
        self.resets += 1
        self._reset(tp)
        if offset is None:
            self.consumer.seek_to_beginning(tp)
        fresh = Owned.fresh(self._state(tp), NO_OFFSET if offset is None else offset, topic_id or owned.topic_id)
        self.owned[tp] = fresh
        return fresh

    def checkpoint(self, only: list[TopicPartition] | None = None) -> bool:
        """Write state + offsets in one transaction, then commit them to Kafka."""
        dirty = [tp for tp in (list(self.owned) if only is None else only) if tp in self.owned and self.owned[tp].dirty]
        if not dirty:
            self.last_checkpoint = time.time()  # nothing unsaved: the state is durable as of now
            return True
        with self.tracer.start_as_current_span("ragdrift.checkpoint") as span:
            span.set_attribute("ragdrift.partitions", len(dirty))
            try:
                self.letters.deliver(self.budget(IO_TIMEOUT_MS / 1000))
                checkpoints = [self._checkpoint_of(tp) for tp in dirty]
                self.store.save(self.kafka.group_id, checkpoints, self._joined(dirty))
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

    def _joined(self, dirty: list[TopicPartition]) -> list:
        """What the checkpoint writes beside the offsets: each feature's rows from the partitions'
        outbox holders (taken first: see `_checkpoint_of`); a feature without a partition part has none."""
        group = self.kafka.group_id
        joined = []
        for f in self.features:
            held = [(tp, holder) for tp in dirty if (holder := self.owned[tp].outbox.held.get(f.name)) is not None]
            if held:
                joined += f.writes(group, held)
        return joined

    def _checkpoint_of(self, tp: TopicPartition) -> Checkpoint:
        owned = self.owned[tp]
        state = owned.state
        owned.outbox.take(state)
        return Checkpoint(
            topic=tp.topic, partition=tp.partition, next_offset=owned.next_offset,
            state=state.to_dict(sealed_elsewhere=True),
            sealed=state.sealed_items(owned.stored_before), keep_from=state.keep_from(), topic_id=owned.topic_id,
        )

    def assign(self, assigned: list[TopicPartition]) -> None:
        """Load each new partition's checkpoint and seek to it; a store that
        cannot be read raises `StoreError`."""
        for tp in assigned:
            if tp in self.owned or tp in self.unreadable:
                continue
            stored = self.store.load(self.kafka.group_id, tp.topic, tp.partition)
            current = broker.topic_id(self.consumer, tp.topic)
            if stored is None:
                self._seek_start(tp)
                self.owned[tp] = Owned.fresh(self._state(tp), topic_id=current)
            else:
                try:
                    self.owned[tp] = self._restore(tp, stored)
                except NewerState as exc:
                    self.unreadable[tp] = NEWER_RELEASE
                    self.consumer.pause(tp)
                    log.error("checkpoint written by a newer release; partition paused and left as stored "
                              "for a replica of that release", extra={"topic": tp.topic, "partition": tp.partition,
                                                                      "offset": stored.next_offset, "error": str(exc)})
                    continue
            log.info("partition assigned", extra={"topic": tp.topic, "partition": tp.partition,
                                                  "offset": self.owned[tp].next_offset})

    def _restore(self, tp: TopicPartition, stored: Checkpoint) -> Owned:
        """The partition's state from its checkpoint and its features' rows; a store that cannot be
        read raises `StoreError` (never a reset: the state is there, only unread), and a state of a
        newer release `NewerState` (never a reset either: this release cannot tell what it would lose)."""
        self.consumer.seek(tp, stored.next_offset)
        context: dict = {}
        for feature in self.features:
            context.update(feature.restore_context(stored.state))
        try:
            state = PartitionState.from_dict(self.core, stored.state, stored.sealed,
                                             features=self._features(tp, restore=True), **context)
        except NewerState:
            raise
        except StateError as exc:
            # Damaged: keep it aside and start afresh where it stopped rather than crash-loop.
            log.error("stored state damaged; set aside in the store, starting a fresh state at its offset",
                      extra={"topic": tp.topic, "partition": tp.partition, "offset": stored.next_offset,
                             "error": str(exc)})
            self.store.set_aside(self.kafka.group_id, tp.topic, tp.partition, str(exc))
            self.set_aside += 1
            return Owned.fresh(self._state(tp), stored.next_offset, stored.topic_id)
        return Owned.restored(self._attach(state), stored.next_offset, stored.topic_id)

    def _features(self, tp: TopicPartition, restore: bool = False) -> list:
        built = (f.partition(self.kafka.group_id, tp, restore) for f in self.features)
        return [feature for feature in built if feature is not None]

    def _state(self, tp: TopicPartition) -> PartitionState:
        return self._attach(PartitionState(self.core, features=self._features(tp)))

    def _attach(self, state: PartitionState) -> PartitionState:
        for feature in self.features:
            feature.attach(state)
        return state

    def _reset(self, tp: TopicPartition) -> None:
        """Forget the partition's checkpoint and the rows its features forget with it."""
        forget = [rows for f in self.features for rows in f.forget(self.kafka.group_id, tp)]
        self.store.reset(self.kafka.group_id, tp.topic, tp.partition, forget)

    def _seek_start(self, tp: TopicPartition) -> None:
        if self.kafka.auto_offset_reset == "earliest":
            self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek_to_end(tp)

    def revoke(self, revoked: list[TopicPartition], lost: bool = False) -> None:
        for tp in revoked:
            self.unreadable.pop(tp, None)
        mine = [tp for tp in revoked if tp in self.owned]
        if not lost and mine:
            self.checkpoint(mine)
        for tp in mine:
            del self.owned[tp]
            log.info("partition released", extra={"topic": tp.topic, "partition": tp.partition, "lost": lost})

    def lag(self, log_end: dict[TopicPartition, int]) -> dict[tuple[str, int], int]:
        """Messages waiting per partition, from the fetcher's high watermark and a probe's `log_end`."""
        out = {}
        for tp, owned in sorted(self.owned.items()):
            waiting = partitions.lag(owned, self.consumer.highwater(tp), log_end.get(tp))
            if waiting is not None:
                out[(tp.topic, tp.partition)] = waiting
        return out


def _log_commit_error(offsets, response) -> None:
    if isinstance(response, Exception):
        log.warning("kafka offset commit failed", extra={"error": str(response)})
