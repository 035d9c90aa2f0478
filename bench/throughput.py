"""Agent throughput on the real broker beside raw kafka-python consumption.

One tansu broker, one topic filled with generated events; then, in the same
run, a plain kafka-python consumer reads the topic (the baseline), and the
agent consumes it in its own consumer group with checkpoints and exposition
on (`--library confluent-kafka`: the agent on librdkafka; the baseline stays
raw kafka-python). Each rate counts from the first record received to the last, so the
group join is not measured (nor the raw consumer's first poll, received before its
clock started). The two take turns for `--rounds` rounds, each in a new consumer
group (the agent with a new store), and each keeps its best rate: both get their
chance at the shared machine's quieter spells, which one run of each, one after
the other, does not give. Target: agent >= 0.35 of raw
consumption.

It also prints where the agent's consumer thread spent its CPU time per event
(processing, polling, checkpoints), and what the same processing costs in the
same process away from the loop (a fresh partition state, configured as the
agent's, over the same events): what the target leaves for each part, and
whether the loop adds to the processing, are read off there
(docs/operations.md, Capacity).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from collections.abc import Callable

from common import agent, consume, fill, interpreter  # bench/ is the script's directory
from kafka import KafkaConsumer, TopicPartition
from peer_runs import Clock

from agent.core.reasons import RejectedEvent
from agent.demo.broker import Tansu
from agent.io.kafka.options import KAFKA_PYTHON, LIBRARIES
from agent.synth import generate

TOPIC = "bench.retrieval.v1"


def raw_rate(bootstrap: str, count: int, group_id: str, topic: str = TOPIC) -> float:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group_id, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=2000, heartbeat_interval_ms=500)
    clock = Clock(count)
    while clock.last is None:
        polled = sum(map(len, consumer.poll(timeout_ms=500, max_records=2000).values()))
        if polled:
            clock.tick(polled)
    consumer.close()
    return clock.rate


def cpu_timed(spent: Counter, name: str, call: Callable) -> Callable:
    """`call`, adding the CPU time of the calling thread it takes to `spent[name]`."""

    def timed(*args, **kwargs):
        began = time.thread_time()
        try:
            return call(*args, **kwargs)
        finally:
            spent[name] += time.thread_time() - began

    return timed


def agent_rate(bootstrap: str, lines: list[bytes], workdir: str, group_id: str,
               library: str) -> tuple[float, dict[str, float]]:
    """The agent's rate over the topic holding `lines`, and per event: its
    consumer thread's CPU time by activity, and the same processing of `lines`
    away from the loop."""
    count = len(lines)
    running = agent(bootstrap, TOPIC, group_id, workdir, library)
    spent: Counter = Counter()
    measured: dict[str, float] = {}
    at_first: list[float] = []  # the consumer thread's CPU time at the first record

    def first():
        at_first.append(time.thread_time())
        spent.clear()  # the group join is not measured

    def last():
        spent["thread"] = time.thread_time() - at_first[0]
        measured.update(spent)  # not the checkpoint on stopping, nor idle polls

    process = cpu_timed(spent, "processing", running.agent._process_poll)  # the real polls, nothing else
    running.agent.consumer.poll = cpu_timed(spent, "polling", running.agent.consumer.poll)
    running.agent.parts.checkpoint = cpu_timed(  # type: ignore[method-assign]  # wrapped to time it
        spent, "checkpoints", running.agent.parts.checkpoint)
    rate = consume(running, count, process, first, last)
    state = running.agent.parts._state(TopicPartition(TOPIC, 0))  # a fresh state, as the agent configures them
    running.close()
    began = time.thread_time()
    for line in lines:
        try:
            state.process(line)
        except RejectedEvent:
            pass
    measured["away from the loop"] = time.thread_time() - began
    return rate, {name: 1e6 * seconds / count for name, seconds in measured.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--library", choices=LIBRARIES, default=KAFKA_PYTHON, help="the agent's Kafka client")
    args = parser.parse_args()
    baseline = agent = 0.0
    cpu: dict[str, float] = {}
    with Tansu() as broker:
        broker.create_topic(TOPIC, 3)
        broker.create_topic(TOPIC + ".dlq", 1)
        lines = list(generate(args.events, seed=7))
        fill(broker.bootstrap, lines, TOPIC)
        for i in range(args.rounds):
            baseline = max(baseline, raw_rate(broker.bootstrap, args.events, f"bench-raw-{i}"))
            with tempfile.TemporaryDirectory() as workdir:
                rate, breakdown = agent_rate(broker.bootstrap, lines, workdir, f"bench-agent-{i}", args.library)
            if rate > agent:
                agent, cpu = rate, breakdown
    print(f"{args.events} generated events on tansu, {sum(map(len, lines)) // len(lines)} bytes each on average, "
          f"best of {args.rounds} rounds, on {interpreter()}")
    print(f"{'raw kafka-python consume (baseline)':<38} {baseline:>10,.0f} events/s   ratio 1.00")
    print(f"{'agent on ' + args.library + ' (decode, core, DLQ, checkpoints)':<38} {agent:>10,.0f} events/s"
          f"   ratio {agent / baseline:.2f}")
    print("target: agent >= 0.35 of raw consumption")
    print(f"agent's best round: {1e6 / agent:.1f} us/event elapsed, {cpu['thread']:.1f} us/event CPU in its consumer thread:"
          f" processing {cpu['processing']:.1f}, polling {cpu['polling']:.1f}, checkpoints {cpu['checkpoints']:.1f};"
          f" the same processing away from the loop: {cpu['away from the loop']:.1f}")


if __name__ == "__main__":
    main()
