"""A feature's io side through `Ownership`, on a real SQLite store and a real broker's consumer
(agent/ownership.py, agent/io/features/)."""

from __future__ import annotations

import dataclasses

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from opentelemetry.trace import NoOpTracer
from sqlalchemy import text

from agent.core.config import CoreConfig
from agent.core.drift import freeze
from agent.core.state import PartitionState, SharedVocabulary
from agent.io.background.periodic import new_scheduler
from agent.io.features import Wiring, built, tables_of
from agent.io.features.drift import Drift
from agent.io.kafka.dead_letters import DeadLetters
from agent.io.settings.agent import Settings
from agent.io.store.database import Checkpoint, Store, StoreError
from agent.ownership import Ownership
from agent.synth import generate
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
        state = PartitionState(CoreConfig(), SharedVocabulary(baseline.version, baseline.queries.vocabulary))
        for line in generate(50, seed=5):
            state.process(line)
        store.save(group, [Checkpoint(tp.topic, tp.partition, 50, state.to_dict())])
        with store.engine.begin() as conn:  # the baselines can no longer be read: a transient store error
            conn.execute(text("DROP TABLE ragdrift_baselines"))
        parts = ownership(settings, store, consumer, producer, features)
        with pytest.raises(StoreError):
            parts.assign([tp])  # the agent stops (and restarts) rather than start the partition afresh
        assert parts.resets == 0 and tp not in parts.owned
        kept = store.load(group, tp.topic, tp.partition)
        assert kept is not None and kept.next_offset == 50 and kept.state["baseline"] == baseline.version
