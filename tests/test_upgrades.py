"""Upgrades and rollbacks on the real thing: the agent of an earlier commit, installed in a venv of
its own (tests/releases.py), runs beside today's in one consumer group, on one broker and one
PostgreSQL store, while traffic flows; replicas are replaced one at a time as a rolling update does
(SIGTERM, then a replica of the other release), and at the end every figure equals a replay of
exactly the traffic produced, no partition was reset or set aside, and the judgment candidates
and drift days are what a replay holds (docs/operations.md, "Upgrading and rolling back").

Not tested: rolling back to OLD_V1. That release predates the rule "never reset a newer state":
it raises on a version-2 checkpoint when a partition is assigned to it (the releases after it
and before the rule started such a partition afresh), so a rollback to it cannot be lossless.
For the same reason the roll forward stops an old replica before it starts a new one (Kubernetes'
surge does the reverse): a new replica joining while two old ones run would see the partitions it
checkpointed handed to an old replica at the next rebalance.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path

import orjson
import pytest
from kafka import KafkaProducer
from sqlalchemy import func, select

from agent import __version__, synth
from agent.core.decoder import decode
from agent.core.drift.days import counts_of, merge
from agent.core.partitions import Outbox
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState
from agent.demo.process import wait_until
from agent.io.kafka.broker import written_at
from agent.io.settings.agent import load
from agent.io.settings.drift import drift_config
from agent.io.settings.judgment import judgment_config
from agent.io.store import drift, queue
from agent.io.store.database import Store
from tests import releases
from tests.agentctl import (
    CORE,
    AgentProcess,
    agent_config,
    assert_exactly_once,
    caught_up,
    new_port,
    read_partitions,
    store_states,
    uninterrupted,
)
from tests.services import unique_name

pytestmark = pytest.mark.broker

# b0afefe^: the last commit whose checkpoint state is version 1 (b0afefe introduced version 2 and its migration).
OLD_V1 = "08cfc494212682e5734ed48f34873356a6ba33f8"
# The previous release: checkpoint state version 2 as today, and it already pauses a newer state instead of resetting it.
PREVIOUS = "b61d51f4131604b48d054291440a7ff194d1e098"

PARTITIONS = 4
# Per-app figures on /metrics that every release here computes, compared with a replay.
FIGURES = ("retrievals", "zero_result_retrievals", "filter_zero_retrievals", "unauthorized_retrievals",
           "unauthorized_results", "stale_results", "results")
# Log lines that mean a partition lost its state (or could not be read). Not any traceback: kafka-python may
# log one for a socket it closes while stopping; a replica that fails exits non-zero on SIGTERM, which is checked.
LOST = ("fresh state", "starting afresh", "set aside", "newer release")
BATCH, PAUSE = 50, 0.25  # the traffic: 50 events every quarter second while the rollout goes on


@pytest.fixture(scope="module")
def old_v1() -> Path:
    return releases.installed(OLD_V1)


@pytest.fixture(scope="module")
def previous() -> Path:
    return releases.installed(PREVIOUS)


class Traffic(threading.Thread):
    """Retrievals (a leak, stale content, 1 % invalid messages) produced in small batches until
    `stop`, which returns exactly what was sent."""

    def __init__(self, bootstrap: str, topic: str, seed: int):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        start = datetime.now(UTC) - timedelta(minutes=20)  # in the past (so in the 1h window) whatever it takes
        self.lines = synth.generate(30_000, seed=seed, start=start, rate=40, invalid_rate=0.01,
                                    incidents=[synth.parse_incident("leak@0.2"), synth.parse_incident("stale@0.4")])
        self.sent: list[bytes] = []
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        try:
            while not self.done.is_set():
                batch = list(islice(self.lines, BATCH))
                assert batch, "the traffic ran dry before the rollout ended"
                for line in batch:
                    producer.send(self.topic, line)
                producer.flush()
                self.sent += batch
                self.done.wait(PAUSE)
        except BaseException as exc:  # handed to the test by stop()
            self.error = exc
        finally:
            producer.close()

    def stop(self) -> list[bytes]:
        self.done.set()
        self.join(60)
        if self.error is not None:
            raise self.error
        return self.sent


class Group:
    """Replicas of several releases in one consumer group, over one topic and one PostgreSQL store."""

    def __init__(self, broker, url: str):
        self.bootstrap, self.url = broker.bootstrap, url
        self.topic = broker.create_topic(unique_name("retrievals"), PARTITIONS)
        self.dlq = broker.create_topic(unique_name("dlq"), 1)
        self.group = unique_name("g")
        self.live: list[AgentProcess] = []
        self.started: list[AgentProcess] = []
        self.release: dict[AgentProcess, str] = {}
        self.health: list[tuple[str, dict[str, float]]] = []  # each replica's loss counters, read before it stopped

    def config(self) -> dict:
        """What every release here accepts: the test config without the Kafka library (later releases' key)."""
        config = agent_config(self.bootstrap, self.topic, self.dlq, self.group, self.url, new_port())
        del config["kafka"]["library"]
        return config

    def start(self, python: Path | None = None, release: str = "today") -> AgentProcess:
        agent = AgentProcess(self.config(), python)
        self.started.append(agent)
        self.release[agent] = release
        agent.start()
        self.live.append(agent)
        built = {dict(labels).get("version") for name, labels in agent.metrics() if name == "ragdrift_build_info"}
        assert (built == {__version__}) == (python is None), f"the {release} replica runs version {built}"
        return agent

    def settle(self) -> None:
        """Wait until the partitions are shared evenly among the live replicas."""
        share = PARTITIONS // len(self.live)
        wait_until(lambda: all(a.value("ragdrift_assigned_partitions") == share for a in self.live), 90, 0.2,
                   f"{len(self.live)} replicas owning {share} partitions each")

    def flowing(self) -> None:
        """Wait until the group settled and each replica processes new traffic."""
        self.settle()
        before = {a: a.value("ragdrift_events_total") for a in self.live}
        wait_until(lambda: all(a.value("ragdrift_events_total") > before[a] for a in self.live), 90, 0.2,
                   "every replica processing traffic")

    def replace(self, agent: AgentProcess, python: Path | None, release: str) -> AgentProcess:
        """A rolling update's step: the replica leaves (SIGTERM: final checkpoint, leaves the group), then one
        of the other release joins."""
        self.health.append((self.release[agent], self.losses(agent)))
        assert agent.terminate(30) == 0, agent.log()
        self.live.remove(agent)
        self.flowing()
        new = self.start(python, release)
        self.flowing()
        return new

    @staticmethod
    def losses(agent: AgentProcess) -> dict[str, float]:
        return {name: agent.value(name) for name in (
            "ragdrift_offset_resets_total", "ragdrift_checkpoints_set_aside_total", "ragdrift_unreadable_partitions")}

    def stop(self) -> None:
        for agent in self.started:
            agent.stop()


@pytest.fixture
def group(broker, pg_url):
    made = Group(broker, pg_url)
    yield made
    made.stop()


def _valid(records) -> int:
    """How many of `records` are events (not rejected)."""
    count = 0
    for record in records:
        try:
            decode(record.value)
        except RejectedEvent:
            continue
        count += 1
    return count


def _rows_of(records: list, start: int, settings) -> tuple[dict, Outbox]:
    """One partition's state and rows as today's agent leaves them when the events before offset
    `start` were counted by a release that kept no rows: a state of those, restored by today's
    release with its features (which start empty), then the rest."""
    state = PartitionState(CORE)
    for record in records[:start]:
        _process(state, record)
    stored = orjson.loads(orjson.dumps(state.to_dict()))
    state = PartitionState.from_dict(CORE, stored, **_features(settings))
    for record in records[start:]:
        _process(state, record)
    rows = Outbox()
    rows.take(state)
    return state.totals(), rows


def _features(settings) -> dict:
    """The configurations of the judgment queue and the drift days, by their features' names."""
    configs = (judgment_config(settings.judgment), drift_config(settings.drift))
    return {config.partition().name: config for config in configs}


def _process(state: PartitionState, record) -> None:
    try:
        state.process(record.value, now=written_at(record))
    except RejectedEvent:
        pass


def _assert_rows(group: Group, records: dict[int, list], starts: dict[int, int]) -> None:
    """Candidates per partition and drift days over the group are a replay's, counted from `starts`."""
    settings = load(group.started[-1].config_path)
    days: dict = {}
    judgment, days_of = _features(settings)  # the features' names
    with Store(group.url, None, (*queue.TABLES, *drift.TABLES)) as store:
        stored_queue = queue.Queue(store)
        for p, recs in records.items():
            _, rows = _rows_of(recs, starts[p], settings)
            merge(days, {key: dict(n) for key, n in rows.held[days_of].items()})
            want = {(c.week, c.stratum, c.event_id): c for c in rows.held[judgment].added.values()}
            got = {(c.week, c.stratum, c.event_id): c for c in stored_queue.partition_candidates(group.group,
                                                                                                 group.topic, p)}
            assert want, f"partition {p}: a replay keeps candidates"
            assert got.keys() == want.keys(), f"partition {p}: candidate rows differ from a replay's"
            assert got == want, f"partition {p}: candidates differ from a replay's"
        stored_days = drift.DriftStore(store).stored_days(group.group)
        assert stored_days == counts_of(days), "drift days differ from a replay's"
        counted = sum(n for apps in stored_days.values() for counts in apps.values()
                      for n in counts.numeric.get("result_count", {}).values())  # one per event
        assert counted == sum(_valid(recs[starts[p]:]) for p, recs in records.items())
        aside = store.read(select(func.count()).select_from(store.set_aside_states))[0][0]
        assert aside == 0, "a checkpoint was set aside"


def _assert_figures(group: Group, records: dict[int, list]) -> None:
    """The per-app figures on /metrics, summed over the final replicas, are a replay's."""
    expected: dict = defaultdict(float)
    for recs in records.values():
        for key, value in uninterrupted(recs, CORE).totals().items():
            if key[0] in FIGURES and len(key) == 2:
                expected[key] += value

    def shown() -> dict:
        found: dict = defaultdict(float)
        for agent in group.live:
            for (name, labels), value in agent.metrics().items():
                figure = name.removeprefix("ragdrift_window_")
                if figure in FIGURES and dict(labels).get("window") == "1h" and set(dict(labels)) == {"app", "window"}:
                    found[(figure, dict(labels)["app"])] += value
        return {k: v for k, v in found.items() if v}

    # The gauges come from the snapshot each replica publishes after its checkpoint: wait for the last one.
    wanted = {k: v for k, v in expected.items() if v}
    assert {k[0] for k in wanted} == set(FIGURES), "the traffic should give every figure"
    wait_until(lambda: shown() == wanted, 30, 0.2, "the final replicas' figures equal the replay's")


def _assert_nothing_lost(group: Group) -> None:
    for agent in group.live:
        group.health.append((group.release[agent], group.losses(agent)))
    for release, losses in group.health:
        assert not any(losses.values()), f"a {release} replica lost state: {losses}"
    for agent in group.started:
        log = agent.log_path.read_text(errors="replace")
        found = [text for text in LOST if text in log]
        assert not found, f"a {group.release[agent]} replica logged {found}:\n{agent.log()}"


def _switch_offsets(group: Group, release: str) -> dict[int, int]:
    """Per partition, the first offset a replica of `release` processed: where it took the partition over."""
    starts: dict[int, int] = {}
    for agent in group.started:
        if group.release[agent] != release:
            continue
        for line in agent.log_path.read_text(errors="replace").splitlines():
            doc = json.loads(line) if line.startswith("{") else {}
            if doc.get("msg") == "partition assigned" and doc.get("topic") == group.topic:
                starts[doc["partition"]] = min(starts.get(doc["partition"], doc["offset"]), doc["offset"])
    return starts


# Run by an earlier release's python: each partition's totals as that release computes them.
_OLD_TOTALS = """
import base64, json, sys
from agent.core.config import CoreConfig
from agent.core.state import PartitionState
data = json.load(open(sys.argv[1]))
config = CoreConfig(lateness_seconds=data["lateness"], windows=tuple(map(tuple, data["windows"])))
out = {}
for p, recs in data["partitions"].items():
    state = PartitionState(config)
    for value, now in recs:
        try:
            state.process(base64.b64decode(value), now=now)
        except Exception:
            pass
    out[p] = [[list(k), v] for k, v in state.totals().items()]
print(json.dumps(out))
"""


def _old_totals(python: Path, records: dict[int, list], tmp: Path) -> dict[int, dict]:
    """Each partition's totals as an earlier release computes them, in its own venv."""
    data = tmp / "records.json"
    data.write_bytes(orjson.dumps({
        "lateness": CORE.lateness_seconds, "windows": CORE.windows,
        "partitions": {str(p): [[base64.b64encode(r.value).decode(), written_at(r)] for r in recs]
                       for p, recs in records.items()},
    }))
    done = subprocess.run([str(python), "-c", _OLD_TOTALS, str(data)], capture_output=True, text=True, cwd=tmp,
                          env={"PATH": "/usr/bin:/bin"}, check=True)
    return {int(p): {tuple(k): v for k, v in items} for p, items in json.loads(done.stdout).items()}


def _flow_until_caught_up(group: Group, traffic: Traffic) -> dict[int, list]:
    sent = traffic.stop()
    records = read_partitions(group.bootstrap, group.topic, len(sent))
    assert sum(map(len, records.values())) == len(sent)
    wait_until(lambda: caught_up(group.url, group.group, group.topic, records), 120, 0.2,
               "every event processed and checkpointed")
    return records


def test_roll_forward_from_the_last_state_version_1(group, old_v1, tmp_path):
    """Two replicas of OLD_V1, replaced one at a time by today's while traffic flows: today's agent
    migrates each version-1 checkpoint and goes on where it stopped. The figures both releases
    count equal a replay; the judgment candidates and drift days, which OLD_V1 did not keep, are
    a replay's from where today's replicas took each partition over."""
    old = [group.start(old_v1, "OLD_V1"), group.start(old_v1, "OLD_V1")]
    group.settle()
    traffic = Traffic(group.bootstrap, group.topic, seed=101)
    traffic.start()
    try:
        for agent in old:
            group.replace(agent, None, "today")
    finally:
        records = _flow_until_caught_up(group, traffic)
    assert {group.release[a] for a in group.live} == {"today"}
    _assert_nothing_lost(group)

    starts = _switch_offsets(group, "today")
    assert sorted(starts) == list(range(PARTITIONS))
    assert all(0 < starts[p] < len(records[p]) for p in starts), f"each partition was counted by both: {starts}"
    # Every figure the old release counts, as it counts them, in the stored states.
    old_totals = _old_totals(old_v1, records, tmp_path)
    stored = store_states(group.url, group.group, group.topic, PARTITIONS)
    for p, recs in records.items():
        state = PartitionState.from_dict(CORE, stored[p][1])
        assert stored[p][0] == len(recs)
        want = uninterrupted(recs, CORE).totals()
        names = {k[0] for k in old_totals[p]}
        same = {k: v for k, v in want.items() if k[0] in names}
        # Sums of floats to rounding: a release may add a batch of values at once, another one by one.
        assert same == pytest.approx(old_totals[p], rel=1e-9), f"partition {p}: the releases count differently"
        got = {k: v for k, v in state.totals().items() if k[0] in names}
        assert got == pytest.approx(same, rel=1e-9), f"partition {p}: the figures both count differ from a replay's"
    _assert_figures(group, records)
    _assert_rows(group, records, starts)


def test_roll_back_to_the_previous_release_and_forward_again(group, previous):
    """Two of today's replicas replaced one at a time by PREVIOUS (a rollback), then by today's
    again, with traffic throughout. Same state version: every stored state, figure, candidate
    and drift day is exactly a replay's."""
    group.start(), group.start()
    group.settle()
    traffic = Traffic(group.bootstrap, group.topic, seed=102)
    traffic.start()
    try:
        for agent in list(group.live):
            group.replace(agent, previous, "PREVIOUS")
        for agent in list(group.live):
            group.replace(agent, None, "today")
    finally:
        records = _flow_until_caught_up(group, traffic)
    assert {group.release[a] for a in group.live} == {"today"}
    _assert_nothing_lost(group)
    assert_exactly_once(group.url, group.group, group.topic, records)
    _assert_figures(group, records)
    _assert_rows(group, records, dict.fromkeys(records, 0))
