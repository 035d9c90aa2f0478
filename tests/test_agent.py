"""The Kafka agent against a real broker: replay parity, exactly-once under
SIGKILL, two replicas, dead letters, graceful shutdown."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from kafka import KafkaConsumer

from agent import synth
from agent.core.config import CoreConfig
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState
from agent.core.summary import summarize
from agent.demo.process import wait_until
from agent.io.store.database import Store
from tests.agentctl import (
    KAFKA_PYTHON,
    LIBRARIES,
    AgentProcess,
    agent_config,
    assert_exactly_once,
    caught_up,
    new_port,
    produce,
    read_partitions,
    store_states,
)

pytestmark = pytest.mark.broker


def _now() -> datetime:
    return datetime.now(UTC) - timedelta(minutes=3)


def _replay(lines: list[bytes]) -> dict:
    state = PartitionState(CoreConfig())
    rejected: Counter[str] = Counter()
    for line in lines:
        try:
            state.process(line)
        except RejectedEvent as exc:
            rejected[exc.kind] += 1
    return summarize(state.totals(), dict(rejected))


@pytest.fixture
def topics(make_topic):
    return make_topic(3, "retrievals"), make_topic(1, "dlq")


@pytest.fixture
def agents():
    started: list[AgentProcess] = []

    def start(config: dict) -> AgentProcess:
        agent = AgentProcess(config)
        started.append(agent)
        return agent.start()

    yield start
    for agent in started:
        agent.stop()


def test_metrics_equal_replay(broker, topics, agents, group_id, tmp_path):
    topic, dlq = topics
    lines = list(synth.generate(3000, seed=11, start=_now(), rate=50, invalid_rate=0.02,
                                incidents=[synth.parse_incident("leak@0.2"), synth.parse_incident("stale@0.5")]))
    produce(broker.bootstrap, topic, lines)
    agent = agents(agent_config(broker.bootstrap, topic, dlq, group_id, f"sqlite:///{tmp_path}/s.db", new_port()))
    wait_until(lambda: agent.value("ragdrift_events_total") >= len(lines), 90, 0.2, "all events processed")

    expected = _replay(lines)
    assert agent.value("ragdrift_events_total", outcome="processed") == expected["events"]["processed"]
    for reason, count in expected["events"]["rejected"].items():
        assert agent.value("ragdrift_dead_letters_total", reason=reason) == count
    assert expected["unauthorized_results"] > 0 and expected["stale_results"] > 0
    pairs = {
        "ragdrift_unauthorized_results_total": "unauthorized_results",
        "ragdrift_unauthorized_retrievals_total": "unauthorized_events",
        "ragdrift_unauthorized_risk_retrievals_total": "unauthorized_risk_events",
        "ragdrift_stale_results_total": "stale_results",
        "ragdrift_stale_conflict_retrievals_total": "stale_conflict_events",
        "ragdrift_admitted_results_total": "admitted_results",
        "ragdrift_duplicate_fingerprint_results_total": "duplicate_fingerprint_results",
    }
    for metric, key in pairs.items():
        assert agent.value(metric) == expected[key], metric
    processed = expected["events"]["processed"]
    assert agent.value("ragdrift_zero_result_retrievals_total") == pytest.approx(expected["zero_result_rate"] * processed)
    assert agent.value("ragdrift_filter_zero_retrievals_total") == pytest.approx(expected["filter_zero_rate"] * processed)
    top1 = agent.value("ragdrift_top1_score_sum") / agent.value("ragdrift_top1_score_count")
    assert top1 == pytest.approx(expected["mean_top1_score"])
    age = agent.value("ragdrift_content_age_days_sum") / agent.value("ragdrift_content_age_days_count")
    assert age == pytest.approx(expected["mean_content_age_days"])
    for name, outcome in expected["filters"].items():
        for status in ("applied", "skipped", "error"):
            assert agent.value("ragdrift_filter_outcomes_total", filter=name, status=status) == outcome[status]
        assert agent.value("ragdrift_filter_removed_chunks_total", filter=name) == outcome["removed"]
    # The rolling windows hold the same events (all within the last hour).
    assert agent.value("ragdrift_window_retrievals", window="1h") == processed
    assert agent.value("ragdrift_window_unauthorized_results", window="1h") == expected["unauthorized_results"]
    wait_until(agent.ready, 10, 0.1, "readyz")


# On kafka-python only, for the suite's time: on librdkafka, the two-replica test
# below kills a replica mid-stream and checks the same exactly-once totals.
@pytest.mark.parametrize("library", [KAFKA_PYTHON])
def test_exactly_once_across_sigkills(broker, topics, agents, group_id, tmp_path, library):
    topic, dlq = topics
    url = f"sqlite:///{tmp_path}/s.db"
    config = agent_config(broker.bootstrap, topic, dlq, group_id, url, new_port(), library)
    # Two events per second of event time: the run spans many minutes of event
    # time, so buckets get sealed, stored apart and retired along the way.
    flow = _Flow(broker.bootstrap, topic, synth.generate(
        10**6, seed=5, start=_now() - timedelta(minutes=30), rate=2, invalid_rate=0.01,
        incidents=[synth.parse_incident("leak@5")]))
    flow.start()
    rng = random.Random(42)
    agent = agents(config)
    for _ in range(10):
        # The restarted agent is consuming again; kill it at a random point.
        wait_until(lambda: agent.value("ragdrift_events_total") > 0, 60, 0.05, "restarted agent consuming")  # noqa: B023 - waited on here
        flow.wait_more(rng.randint(1, 400))
        agent.kill()
        agent = agents(config)
    produced = flow.finish()
    records = read_partitions(broker.bootstrap, topic, produced)
    wait_until(lambda: caught_up(url, group_id, topic, records), 120, 0.2, "agent caught up")
    assert_exactly_once(url, group_id, topic, records)
    assert sum(map(len, records.values())) == produced
    # The run went through every kind of bucket the checkpoint stores.
    with Store(url) as store:
        stored = [store.load(group_id, topic, p) for p in records]
    assert any(c.sealed for c in stored), "sealed buckets stored apart"
    assert any(c.state["windows"]["retired"] for c in stored), "buckets retired"


class _Flow(threading.Thread):
    """Produce events steadily (about 500/s) until told to finish."""

    def __init__(self, bootstrap: str, topic: str, lines):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.lines = bootstrap, topic, lines
        self.produced = 0
        self.done = threading.Event()
        self.progress = threading.Condition()

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        while not self.done.is_set():
            for _ in range(25):
                producer.send(self.topic, next(self.lines))
            producer.flush()
            with self.progress:
                self.produced += 25
                self.progress.notify_all()
            self.done.wait(0.05)
        producer.close()

    def wait_more(self, count: int) -> None:
        """Return once `count` more events were produced: a random point in the stream."""
        with self.progress:
            target = self.produced + count
            assert self.progress.wait_for(lambda: self.produced >= target, 30), "producer stalled"

    def finish(self) -> int:
        self.done.set()
        self.join(30)
        return self.produced


@pytest.mark.parametrize("library", LIBRARIES)
def test_two_agents_split_partitions_and_hand_over(broker, topics, agents, group_id, pg_url, library):
    topic, dlq = topics
    first = agents(agent_config(broker.bootstrap, topic, dlq, group_id, pg_url, new_port(), library))
    second = agents(agent_config(broker.bootstrap, topic, dlq, group_id, pg_url, new_port(), library))
    wait_until(
        lambda: first.value("ragdrift_assigned_partitions") + second.value("ragdrift_assigned_partitions") == 3
        and first.value("ragdrift_assigned_partitions") > 0 and second.value("ragdrift_assigned_partitions") > 0,
        60, 0.2, "partitions split between both agents",
    )
    lines = list(synth.generate(2000, seed=9, start=_now(), rate=50))
    produce(broker.bootstrap, topic, lines)
    total = lambda: first.value("ragdrift_events_total") + second.value("ragdrift_events_total")  # noqa: E731
    wait_until(lambda: total() >= len(lines), 60, 0.2, "both agents processed everything")
    assert total() == len(lines)

    # Kill one: the survivor takes over its partitions and their stored state.
    first.kill()
    wait_until(lambda: second.value("ragdrift_assigned_partitions") == 3, 60, 0.2, "survivor owns all partitions")
    more = list(synth.generate(1000, seed=10, start=_now(), rate=50))
    produce(broker.bootstrap, topic, more)
    records = read_partitions(broker.bootstrap, topic, len(lines) + len(more))
    wait_until(lambda: caught_up(pg_url, group_id, topic, records), 60, 0.2, "survivor caught up")
    assert_exactly_once(pg_url, group_id, topic, records)
    assert second.value("ragdrift_window_retrievals", window="1h") == len(lines) + len(more)


def test_poison_messages_are_dead_lettered(broker, topics, agents, group_id, tmp_path):
    topic, dlq = topics
    good = list(synth.generate(200, seed=3, start=_now()))
    base = orjson.loads(good[0])
    pii = dict(base, query=dict(base["query"], id="jane.doe@example.com"))
    bad_field = dict(base, cutoff_k=0)
    near_limit = b"{" + b" " * 99_990  # bad JSON just under the limit: forwarded whole, with headers
    poison = [b"{not json", orjson.dumps(bad_field), orjson.dumps(pii), orjson.dumps(dict(base, schema="retrieval.v2")),
              b"x" * 200_000, near_limit]
    expected_reasons = ["invalid_json", "invalid_field:cutoff_k", "pii_suspected", "unsupported_schema", "too_large",
                        "invalid_json"]
    produce(broker.bootstrap, topic, good[:100] + poison + good[100:])
    config = agent_config(broker.bootstrap, topic, dlq, group_id, f"sqlite:///{tmp_path}/s.db", new_port())
    config["kafka"]["max_message_bytes"] = 100_000
    agent = agents(config)
    wait_until(lambda: agent.value("ragdrift_events_total") >= 206, 60, 0.2, "all messages handled")
    assert agent.value("ragdrift_events_total", outcome="processed") == 200
    assert agent.value("ragdrift_events_total", outcome="rejected") == 6

    consumer = KafkaConsumer(dlq, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    letters = []
    for record in consumer:
        letters.append(record)
        if len(letters) == 6:
            break
    consumer.close()
    assert sorted(dict(r.headers)["ragdrift-reason"].decode() for r in letters) == sorted(expected_reasons)
    assert [r.value for r in letters].count(near_limit) == 1
    by_reason = {dict(r.headers)["ragdrift-reason"].decode(): r for r in letters if r.value != near_limit}
    for record in by_reason.values():
        headers = dict(record.headers)
        assert headers["ragdrift-source-topic"].decode() == topic
        assert int(headers["ragdrift-source-offset"]) >= 0
        assert headers["ragdrift-source-partition"].decode().isdigit()
    for withheld in ("pii_suspected", "too_large"):
        assert by_reason[withheld].value == b""
        assert dict(by_reason[withheld].headers)["ragdrift-payload"] == b"withheld"
    assert by_reason["invalid_json"].value == b"{not json"
    assert b"jane.doe" not in (agent.log_path.read_bytes())


def test_sigterm_exits_cleanly_and_never_reprocesses(broker, topics, agents, group_id, tmp_path):
    topic, dlq = topics
    config = agent_config(broker.bootstrap, topic, dlq, group_id, f"sqlite:///{tmp_path}/s.db", new_port())
    first_batch = list(synth.generate(1500, seed=21, start=_now()))
    produce(broker.bootstrap, topic, first_batch)
    agent = agents(config)
    wait_until(lambda: agent.value("ragdrift_events_total") >= len(first_batch), 60, 0.2, "first batch")
    started = time.monotonic()
    assert agent.terminate(timeout=10) == 0
    assert time.monotonic() - started < 10
    # A restarted agent resumes exactly after the last event: nothing twice.
    # After the first batch in event time, so that none of it is late.
    second_batch = list(synth.generate(500, seed=22, start=_now() + timedelta(seconds=90)))
    produce(broker.bootstrap, topic, second_batch)
    agent = agents(config)
    wait_until(lambda: agent.value("ragdrift_events_total") >= len(second_batch), 60, 0.2, "second batch")
    wait_until(agent.ready, 10, 0.1, "readyz")
    assert agent.value("ragdrift_events_total") == len(second_batch)
    assert agent.value("ragdrift_window_retrievals", window="1h") == len(first_batch) + len(second_batch)



def test_a_recreated_log_is_started_afresh_not_skipped(tmp_path, tansu_bin):
    """The broker lost its data (or the topic was recreated): the stored offset
    is beyond the new log. The agent must process the new events, not skip them."""
    from agent.demo.broker import Tansu

    url = f"sqlite:///{tmp_path}/s.db"
    port = new_port()
    broker = Tansu(binary=tansu_bin).start()
    try:
        broker.create_topic("r", 1)
        broker.create_topic("r.dlq", 1)
        config = agent_config(broker.bootstrap, "r", "r.dlq", "g", url, port)
        produce(broker.bootstrap, "r", list(synth.generate(300, seed=31, start=_now())))
        agent = AgentProcess(config).start()
        try:
            wait_until(lambda: agent.value("ragdrift_events_total") >= 300, 60, 0.2, "first log processed")
            assert agent.terminate() == 0
        finally:
            agent.stop()
        broker.stop()  # memory storage: the log is gone
        broker = Tansu(port=int(broker.bootstrap.rsplit(":", 1)[1]), binary=tansu_bin).start()
        broker.create_topic("r", 1)
        broker.create_topic("r.dlq", 1)
        produce(broker.bootstrap, "r", list(synth.generate(40, seed=32, start=_now() + timedelta(minutes=2))))
        agent = AgentProcess(config).start()
        try:
            wait_until(lambda: agent.value("ragdrift_events_total") >= 40, 60, 0.2, "new log processed")
            assert agent.value("ragdrift_offset_resets_total") == 1
            assert agent.value("ragdrift_events_total") == 40
            wait_until(lambda: store_states(url, "g", "r", 1).get(0, (0,))[0] == 40, 30, 0.2, "fresh checkpoint")
        finally:
            agent.stop()
    finally:
        broker.stop()


def test_consumption_pauses_while_checkpoints_fail(broker, topics, agents, group_id, pg_url):
    """A store that cannot take checkpoints stops consumption (bounded work to
    redo after a crash); when it recovers, consumption resumes, nothing lost."""
    from sqlalchemy import create_engine, text

    topic, dlq = topics
    agent = agents(agent_config(broker.bootstrap, topic, dlq, group_id, pg_url, new_port()))
    produce(broker.bootstrap, topic, list(synth.generate(200, seed=41, start=_now())))
    wait_until(lambda: agent.value("ragdrift_events_total") >= 200, 60, 0.2, "first events")
    wait_until(lambda: agent.value("ragdrift_checkpoints_total", outcome="ok") > 0, 30, 0.2, "a checkpoint")

    engine = create_engine(pg_url)
    conn = engine.connect()
    locked = conn.begin()
    conn.execute(text("LOCK TABLE ragdrift_checkpoints IN ACCESS EXCLUSIVE MODE"))
    try:
        produce(broker.bootstrap, topic, list(synth.generate(50, seed=42, start=_now() + timedelta(seconds=30))))
        wait_until(lambda: agent.value("ragdrift_events_total") >= 250, 60, 0.2, "events before the pause")
        wait_until(lambda: "consumption paused" in agent.log(), 90, 0.2, "consumption paused")
        produce(broker.bootstrap, topic, list(synth.generate(100, seed=43, start=_now() + timedelta(seconds=60))))
        failed = agent.value("ragdrift_checkpoints_total", outcome="error")
        # Two more failed attempts while paused: the new events stay unread.
        wait_until(lambda: agent.value("ragdrift_checkpoints_total", outcome="error") >= failed + 2, 60, 0.2,
                   "checkpoints still failing")
        assert agent.value("ragdrift_events_total") == 250
        assert not agent.ready()
    finally:
        locked.rollback()
        conn.close()
        engine.dispose()
    wait_until(lambda: agent.value("ragdrift_events_total") >= 350, 60, 0.2, "consumption resumed")
    records = read_partitions(broker.bootstrap, topic, 350)
    wait_until(lambda: caught_up(pg_url, group_id, topic, records), 60, 0.2, "caught up")
    assert_exactly_once(pg_url, group_id, topic, records)
