"""What the broker benches share: filling a topic, and running the agent over it at a measured rate."""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from collections.abc import Callable

from kafka import KafkaProducer

from agent.demo.process import wait_until
from agent.io.kafka.options import KAFKA_PYTHON
from agent.io.settings.agent import KafkaSettings, MetricsSettings, Settings, StoreSettings
from agent.service import Running, build


def interpreter() -> str:
    """The Python a run measured: builds of one CPython release differ in their
    optimizations (pyenv's default build has none of the image's), so a figure names its build."""
    return f"{platform.python_implementation()} {platform.python_version()} ({os.path.realpath(sys.executable)})"


def fill(bootstrap: str, lines: list[bytes], topic: str, keys: list[bytes] | None = None,
         timestamps: list[int] | None = None) -> None:
    """Write `lines` to `topic`, with their message keys and timestamps (ms) where given."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024)
    for n, line in enumerate(lines):
        producer.send(topic, line, key=keys and keys[n], timestamp_ms=timestamps and timestamps[n])
    producer.flush()
    producer.close()


def agent(bootstrap: str, topic: str, group_id: str, workdir: str, library: str = KAFKA_PYTHON) -> Running:
    """The agent as deployed (checkpoints to SQLite in `workdir`, dead letters, exposition), not yet consuming,
    on the Kafka client `library`."""
    return build(Settings(
        kafka=KafkaSettings(bootstrap_servers=bootstrap, topics=[topic], dead_letter_topic=topic + ".dlq",
                            group_id=group_id, session_timeout_ms=2000, heartbeat_interval_ms=500, library=library),
        store=StoreSettings(url=f"sqlite:///{workdir}/state.db"),
        metrics=MetricsSettings(address="127.0.0.1", port=0),
    ))


def consume(running: Running, count: int, process: Callable | None = None, on_first: Callable = lambda: None,
            on_last: Callable = lambda: None) -> float:
    """Run the agent until it has processed `count` records, then stop it; its rate from the first record
    received to the last (the group join is not measured). `process` stands for the agent's processing of a poll
    (a timed wrapper of it, say); `on_first` and `on_last` run in its thread at those two records."""
    agent = running.agent
    process = process or agent._process_poll
    marks: dict[str, float] = {}
    seen = 0

    def timed(polled):
        nonlocal seen
        if not marks:
            marks["first"] = time.perf_counter()
            on_first()
        wanted = process(polled)
        seen += sum(len(records) for records in polled.values())
        if seen >= count and "last" not in marks:
            marks["last"] = time.perf_counter()
            on_last()
        return wanted

    agent._process_poll = timed  # type: ignore[method-assign]  # the real method, wrapped to time it
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    wait_until(lambda: "last" in marks, 1800, 0.05, "agent consumed the topic")
    agent.stop()
    thread.join(30)
    return count / (marks["last"] - marks["first"])
