"""A feature's io side through `Ownership`, on a real SQLite store and a real broker's consumer
(agent/ownership.py, agent/io/features/)."""

from __future__ import annotations

import dataclasses

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from opentelemetry.trace import NoOpTracer
from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, delete, func, select, text

from agent.core.config import CoreConfig
from agent.core.drift import freeze
from agent.core.feature import KeptAsRows
from agent.core.state import ActiveBaseline, PartitionState
from agent.io.background.periodic import new_scheduler
from agent.io.features import FeatureAdapter, Wiring, built, tables_of
from agent.io.features.drift import Drift
from agent.io.kafka.dead_letters import DeadLetters
from agent.io.settings.agent import Settings
from agent.io.store.database import Checkpoint, Store, StoreError
from agent.ownership import Ownership
from agent.synth import generate
from tests.core.test_feature import Added
from tests.generated_days import generated_days

pytestmark = pytest.mark.broker


@pytest.fixture
def kafka(broker, make_topic, group_id):
    """A consumer holding the topic's one partition (assigned by hand), and a dead-letter producer."""
    topic = make_topic(1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group_id, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    settings = Settings()
    settings = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, group_id=group_id,
                                                                       topics=[topic]))
    yield settings, consumer, producer
    consumer.close()
    producer.close()


def ownership(settings: Settings, store: Store, consumer, producer, features) -> Ownership:
    return Ownership(settings=settings, store=store, consumer=consumer, letters=DeadLetters(producer, "dlq"),
                     tracer=NoOpTracer(), budget=lambda cap: cap, features=features)


def test_a_store_that_cannot_read_the_named_baseline_stops_the_restore_and_keeps_the_checkpoint(kafka, tmp_path):
    settings, consumer, producer = kafka
    group, tp = settings.kafka.group_id, TopicPartition(settings.kafka.topics[0], 0)
    features = [Drift]
    with Store(f"sqlite:///{tmp_path}/s.db", None, tables_of(features)) as store:
        features = built(features, Wiring(settings, store, new_scheduler()))
        baseline = freeze(generated_days(7, 400), "vocab")
        features[0].store.save_baseline(baseline)
        state = PartitionState(CoreConfig(), ActiveBaseline(baseline.version, baseline.queries.vocabulary))
        for line in generate(50, seed=5):
            state.process(line)
        store.save(group, [Checkpoint(topic=tp.topic, partition=tp.partition, next_offset=50, state=state.to_dict())])
        with store.engine.begin() as conn:  # the baselines can no longer be read: a transient store error
            conn.execute(text("DROP TABLE ragdrift_baselines"))
        parts = ownership(settings, store, consumer, producer, features)
        with pytest.raises(StoreError):
            parts.assign([tp])  # the agent stops (and restarts) rather than start the partition afresh
        assert parts.resets == 0 and tp not in parts.owned
        kept = store.load(group, tp.topic, tp.partition)
        assert kept is not None and kept.next_offset == 50 and kept.state["baseline"] == baseline.version


class PerApp(KeptAsRows):
    """Events per app label since the last `take`; `stored` is what its rows held when it was built."""

    name = "per_app"
    reads = frozenset({"app"})
    writes = frozenset()

    def __init__(self, stored: dict):
        self.stored = stored
        self.counts: dict = {}

    def observe(self, facts, ctx) -> None:
        self.counts[ctx.app] = self.counts.get(ctx.app, 0) + 1

    def take(self) -> dict:
        counts, self.counts = self.counts, {}
        return counts

    def outbox(self) -> Added:
        return Added()

    def flush_due(self, held: Added) -> bool:
        return False


def per_app_table(metadata: MetaData) -> Table:
    return Table("test_per_app", metadata, Column("group_id", String(64), primary_key=True),
                 Column("topic", String(255), primary_key=True), Column("partition", Integer, primary_key=True),
                 Column("app", String(255), primary_key=True), Column("n", BigInteger, nullable=False))


class PerAppRows(FeatureAdapter):
    """The io side: its rows add up in each checkpoint's transaction and come back on a restore."""

    name = PerApp.name
    tables = (per_app_table,)

    @staticmethod
    def enabled(settings) -> bool:
        return True

    def __init__(self, wiring: Wiring):
        self.store = wiring.store
        self.table = wiring.store.joined("test_per_app")
        self.forgotten_with: list[int] = []  # checkpoints of the partition its forget saw, inside the reset

    def _of(self, group: str, tp: TopicPartition):
        c = self.table.c
        return c.group_id == group, c.topic == tp.topic, c.partition == tp.partition

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> PerApp:
        rows = self.store.read(select(self.table.c.app, self.table.c.n).where(*self._of(group, tp))) if restore else []
        return PerApp({row.app: row.n for row in rows})

    def writes(self, group: str, held) -> list:
        def write(conn) -> None:
            for tp, added in held:
                for app, n in added.items():
                    stmt = self.store.insert(self.table).values(group_id=group, topic=tp.topic, partition=tp.partition,
                                                                app=app, n=n)
                    conn.execute(stmt.on_conflict_do_update(index_elements=["group_id", "topic", "partition", "app"],
                                                            set_={"n": self.table.c.n + stmt.excluded.n}))
        return [write]

    def forget(self, group: str, tp: TopicPartition) -> list:
        def drop(conn) -> None:
            conn.execute(delete(self.table).where(*self._of(group, tp)))
            checkpoints = self.store.checkpoints.c
            self.forgotten_with.append(conn.execute(select(func.count()).where(
                checkpoints.group_id == group, checkpoints.topic == tp.topic, checkpoints.partition == tp.partition,
            )).scalar())
        return [drop]


def stored(store: Store) -> dict:
    table = store.joined("test_per_app")
    return {row.app: row.n for row in store.read(select(table.c.app, table.c.n))}


def test_a_feature_s_rows_go_with_the_offsets_come_back_on_a_restore_and_go_with_a_reset(kafka, tmp_path):
    settings, consumer, producer = kafka
    group, tp = settings.kafka.group_id, TopicPartition(settings.kafka.topics[0], 0)
    lines = list(generate(200, seed=8))
    with Store(f"sqlite:///{tmp_path}/s.db", None, tables_of([PerAppRows])) as store:
        features = built([PerAppRows], Wiring(settings, store, new_scheduler()))
        parts = ownership(settings, store, consumer, producer, features)
        parts.assign([tp])
        owned = parts.owned[tp]
        owned.next_offset = 0  # where the partition starts, as the loop pins it
        for offset, line in enumerate(lines):
            owned.state.process(line)
            owned.next_offset = offset + 1
        counts = dict(owned.state.feature("per_app").counts)
        assert sum(counts.values()) == len(lines)

        store.save(group, [Checkpoint(topic=tp.topic, partition=tp.partition, next_offset=10_000,
                                      state={})])  # another replica is ahead
        assert not parts.checkpoint()
        assert stored(store) == {} and owned.outbox.held["per_app"] == counts  # not written, held for the next one
        store.reset(group, tp.topic, tp.partition)
        assert parts.checkpoint()
        assert stored(store) == counts and owned.outbox.held["per_app"] == {}
        assert store.load(group, tp.topic, tp.partition).next_offset == len(lines)

        again = ownership(settings, store, consumer, producer, features)  # a restart: the partition restored
        again.assign([tp])
        assert again.owned[tp].state.feature("per_app").stored == counts

        again.restart(tp, again.owned[tp], len(lines))  # its log was recreated: start afresh
        assert features[0].forgotten_with == [0]  # its forget ran in the reset, after the checkpoint's delete
        assert stored(store) == {} and store.load(group, tp.topic, tp.partition) is None
