"""Drive real `ragdrift run` processes and read back what they did.

`AgentProcess` starts the agent as a child process with a YAML config (so it
can be SIGKILLed like a real crash), scrapes its `/metrics`, and stops it.
The stream helpers read a topic back with plain kafka-python, so a test can
rebuild the uninterrupted state of each partition and compare.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
from pathlib import Path

import orjson
import yaml
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from agent.core.config import CoreConfig
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState
from agent.demo.process import free_port, wait_until
from agent.io.kafka.broker import written_at
from agent.io.kafka.options import CONFLUENT, KAFKA_PYTHON
from agent.io.store.database import Store
from tests.services import http_get

ROOT = Path(__file__).resolve().parent.parent
# Short lateness and windows, so that tests see buckets sealed, stored apart
# and retired within a run.
LATENESS = 60
WINDOWS = {"5m": 300, "1h": 3600}
CORE = CoreConfig(lateness_seconds=LATENESS, windows=tuple(WINDOWS.items()))  # as agent_config sets it


# The Kafka client libraries the agent runs on. One test of each behaviour the
# docs promise of both runs on each (parametrized with `library`); the others
# run on kafka-python, the default, and cover code both share.
LIBRARIES = (KAFKA_PYTHON, CONFLUENT)


def agent_config(bootstrap: str, topic: str, dlq: str, group: str, store_url: str, port: int,
                 library: str = KAFKA_PYTHON, **store) -> dict:
    return {
        "kafka": {
            "library": library,
            "bootstrap_servers": bootstrap,
            "topics": [topic],
            "dead_letter_topic": dlq,
            "group_id": group,
            "session_timeout_ms": 2000,
            "heartbeat_interval_ms": 500,
            "poll_timeout_ms": 200,
        },
        "store": {"url": store_url, "checkpoint_interval_seconds": 0.5, **store},
        "metrics": {"address": "127.0.0.1", "port": port, "snapshot_interval_seconds": 0.2},
        "windows": {"lateness_seconds": LATENESS, "windows": WINDOWS},
        "logging": {"format": "json", "level": "INFO"},
    }


class AgentProcess:
    """One `ragdrift run` child process: this checkout's agent, or with `python` the agent installed in
    another interpreter's environment (another release's venv), run outside this checkout without its
    PYTHONPATH, so that it cannot import this checkout's code."""

    def __init__(self, config: dict, python: Path | None = None):
        self.config = config
        self.python = python
        self.port = config["metrics"]["port"]
        self.dir = Path(tempfile.mkdtemp(prefix="ragdrift-agent-"))
        self.config_path = self.dir / "ragdrift.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.log_path = self.dir / "agent.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> AgentProcess:
        return self.launch().wait_serving()

    def launch(self) -> AgentProcess:
        """Start the process without waiting for it (to start several at once)."""
        if self.python is None:
            python, cwd, env = sys.executable, ROOT, dict(os.environ, PYTHONPATH=str(ROOT))
        else:
            python, cwd = self.python, self.dir
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(python), "-m", "agent.cli", "run", "--config", str(self.config_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
            )
        return self

    def wait_serving(self) -> AgentProcess:
        wait_until(self._serving, 30, 0.05, "agent metrics endpoint")
        return self

    def _serving(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"agent exited with {self.proc.returncode}:\n{self.log()}")
        return self._answers("/healthz")

    def _answers(self, path: str) -> bool:
        """True when the endpoint says 200 (an error status or no answer is False)."""
        try:
            http_get(f"http://127.0.0.1:{self.port}{path}", timeout=1)
            return True
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def metrics(self) -> dict[tuple[str, tuple], float]:
        """Every sample on /metrics as {(name, sorted labels): value}."""
        text = http_get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels) -> float:
        """Sum of a sample over every series matching `labels`."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.metrics().items() if n == name and want <= set(ls))

    def ready(self) -> bool:
        return self._answers("/readyz")

    def endpoint(self, path: str) -> tuple[int, str]:
        """Status and text of /healthz or /readyz."""
        try:
            return 200, http_get(f"http://127.0.0.1:{self.port}{path}", timeout=2).decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 10) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def new_port() -> int:
    return free_port()


def produce(bootstrap: str, topic: str, lines, headers=None) -> int:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    count = 0
    for line in lines:
        producer.send(topic, line, headers=headers)
        count += 1
    producer.flush()
    producer.close()
    return count


def read_partitions(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> dict[int, list]:
    """All records of a topic by partition, in offset order, once `expected` arrived."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=500)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    records: dict[int, list] = {tp.partition: [] for tp in partitions}

    def all_read() -> bool:
        for batch in consumer.poll(timeout_ms=500, max_records=5000).values():
            for record in batch:
                records[record.partition].append(record)
        return sum(map(len, records.values())) >= expected

    try:
        wait_until(all_read, timeout, 0, f"{expected} records on {topic}")
    finally:
        consumer.close()
    return records


def uninterrupted(records: list, config: CoreConfig | None = None) -> PartitionState:
    """The state one uninterrupted run over these records gives."""
    state = PartitionState(config or CoreConfig())
    for record in records:
        try:
            state.process(record.value, now=written_at(record))
        except RejectedEvent:
            pass
    return state


def store_states(url: str, group: str, topic: str, partitions: int) -> dict[int, tuple[int, dict]]:
    """Each partition's stored offset and whole state (sealed buckets merged back in)."""
    with Store(url) as store:
        found = {}
        for p in range(partitions):
            checkpoint = store.load(group, topic, p)
            if checkpoint is not None:
                state = PartitionState.from_dict(CORE, checkpoint.state, checkpoint.sealed)
                found[p] = (checkpoint.next_offset, state.to_dict())
        return found


def caught_up(url: str, group: str, topic: str, records: dict[int, list]) -> bool:
    stored = store_states(url, group, topic, len(records))
    return all(
        not recs or (p in stored and stored[p][0] == recs[-1].offset + 1) for p, recs in records.items()
    )


def assert_exactly_once(url: str, group: str, topic: str, records: dict[int, list]) -> None:
    stored = store_states(url, group, topic, len(records))
    for p, recs in records.items():
        if not recs:
            continue
        expected = uninterrupted(recs, CORE).to_dict()
        # Through JSON, as the store keeps it.
        assert stored[p][1] == orjson.loads(orjson.dumps(expected)), f"partition {p} state differs"
