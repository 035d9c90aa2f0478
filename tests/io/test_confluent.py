"""librdkafka's consumer answers as kafka-python's on the real broker, where
the agent's stored state depends on the answer."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer

from agent.demo.process import wait_until
from agent.io.kafka import broker as kafka
from agent.io.kafka.options import CONFLUENT
from agent.io.settings.agent import KafkaSettings

pytestmark = pytest.mark.broker


def test_both_libraries_give_a_topic_the_same_id(broker, make_topic):
    """Checkpoints store the topic's id: one written on either library must
    not read as a recreated topic on the other."""
    topic = make_topic(1)
    python = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    settings = KafkaSettings(library=CONFLUENT, bootstrap_servers=broker.bootstrap, topics=[topic])
    rdkafka = kafka.consumer(settings, "ids")
    try:
        assert python.partitions_for_topic(topic) == {0}
        wait_until(lambda: kafka.topic_id(rdkafka, topic) is not None, 10, 0.05, "librdkafka's topic id")
        assert kafka.topic_id(rdkafka, topic) == kafka.topic_id(python, topic) is not None
    finally:
        python.close()
        rdkafka.close()
