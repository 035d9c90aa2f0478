"""The agent's kafka-python consumer marks every rebalance for rejoining as it starts, so a rebalance the
client starts itself (a subscribed topic's partitions changed) is awaited until it completes
(agent/io/kafka/broker.py `subscribe`). This holds the workaround to the kafka-python installed."""

from __future__ import annotations

import pytest
from kafka import ConsumerRebalanceListener, KafkaConsumer

from agent.demo.process import wait_until
from agent.io.kafka import broker as kafka_broker

pytestmark = pytest.mark.broker


class Calls(ConsumerRebalanceListener):
    def __init__(self):
        self.calls: list[tuple[str, set]] = []

    def on_partitions_revoked(self, revoked):
        self.calls.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned):
        self.calls.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost):
        self.calls.append(("lost", set(lost)))


def test_a_rebalance_stays_marked_for_rejoining_from_its_start(broker, make_topic, group_id):
    topic = make_topic(2, "joins")
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group_id, enable_auto_commit=False,
                             session_timeout_ms=2000, heartbeat_interval_ms=500)  # as the agent's tests run it
    listener = Calls()
    try:
        kafka_broker.subscribe(consumer, [topic], listener)

        def assigned() -> bool:
            consumer.poll(timeout_ms=100)
            return bool(listener.calls) and listener.calls[-1][0] == "assigned"

        wait_until(assigned, 60, 0, "the first assignment")
        coordinator = consumer._coordinator
        assert not coordinator.need_rejoin()  # joined: nothing marked, as when the metadata starts a rebalance
        # kafka-python revokes first as any rebalance starts (its `_on_join_prepare`), through the listener
        # the consumer was given: the agent's, wrapped.
        consumer._subscription.rebalance_listener.on_partitions_revoked(set(consumer.assignment()))
        assert coordinator.need_rejoin()
        assert [name for name, _ in listener.calls] == ["revoked", "assigned", "revoked"]
        wait_until(assigned, 60, 0, "the assignment after the rejoin")
        assert not coordinator.need_rejoin() and listener.calls[-1][0] == "assigned"
    finally:
        consumer.close(autocommit=False)
