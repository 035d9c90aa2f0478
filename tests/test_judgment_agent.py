"""The judgment queue through real agents: the stored sample equals a replay's
across SIGKILLs and replicas, every incident is queued once, the weekly batch
is built once for all replicas."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import yaml
from kafka import KafkaProducer
from sqlalchemy import func
from sqlalchemy import select as sql_select

from agent import synth
from agent.cli import main
from agent.core import batch as batches
from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.core.judgment import JudgmentIntake, samples
from agent.core.reasons import RejectedEvent
from agent.core.sampling import select
from agent.core.state import PartitionState
from agent.demo.process import wait_until
from agent.io.background.judgment import JudgmentJobs
from agent.io.background.periodic import new_scheduler
from agent.io.kafka.broker import written_at
from agent.io.settings.agent import load
from agent.io.settings.judgment import judgment_config
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES, Queue
from agent.jobs.batch import build, config_of, last_week, scheduled, weekly
from tests.agentctl import (
    CORE,
    AgentProcess,
    agent_config,
    caught_up,
    new_port,
    read_partitions,
)
from tests.services import unique_name

pytestmark = pytest.mark.broker
JUDGMENT = {"budget": 5, "uniform_budget": 10, "salt": "judgment-test-salt"}  # small K: a sensitive selection


def _ago(**delta) -> datetime:
    return datetime.now(UTC) - timedelta(**delta)


def _lines(n: int, seed: int, start: datetime, rate: float = 20) -> list[bytes]:
    """Several apps and query types, 2 % invalid lines, a leak (unauthorized results, missing claims) and stale content."""
    return list(synth.generate(n, seed=seed, start=start, rate=rate, invalid_rate=0.02,
                               incidents=[synth.parse_incident("leak@0.2"), synth.parse_incident("stale@0.5")]))


def _config(bootstrap, topic, dlq, group, url, tmp) -> dict:
    config = agent_config(bootstrap, topic, dlq, group, url, new_port())
    config["judgment"] = {**JUDGMENT, "export_dir": str(tmp / "agent-batches")}
    return config


def _replay(items, config):
    """Candidate rows and incidents of one uninterrupted run over raw lines or records."""
    state = PartitionState(CORE, judgment=config)
    for item in items:
        raw, now = (item, None) if isinstance(item, bytes) else (item.value, written_at(item))
        try:
            state.process(raw, now=now)
        except RejectedEvent:
            pass
    changes, incidents = state.feature("judgment").take()
    assert not changes.evicted
    return list(changes.added), incidents


def _rows(candidates) -> dict:
    return {(c.week, c.stratum, c.event_id): c for c in candidates}


def _assert_mirrors(queue: Queue, group: str, topic: str, records: dict, config) -> None:
    """Each partition's stored rows are exactly what its sampler keeps in one uninterrupted run."""
    for p, recs in records.items():
        want, got = _rows(_replay(recs, config)[0]), _rows(queue.partition_candidates(group, topic, p))
        missing = Counter(k[0] for k in want.keys() - got.keys())
        extra = Counter(k[0] for k in got.keys() - want.keys())
        assert not missing and not extra, f"partition {p}: rows missing by week {dict(missing)}, extra {dict(extra)}"
        assert got == want, f"partition {p}: stored candidates differ"


def _assert_same_sample(queue: Queue, group: str, single: list, config) -> None:
    """Per (week, stratum), select over every stored row == select over a single-stream replay."""
    expected: dict[tuple[str, str], list] = defaultdict(list)
    for c in single:
        expected[(c.week, c.stratum)].append(c)
    sampled = 0
    for week in sorted({w for w, _ in expected}):
        stored: dict[str, list] = defaultdict(list)
        for c in queue.week_candidates(group, week):
            stored[c.stratum].append(c)
        assert sorted(stored) == sorted(s for w, s in expected if w == week), week
        for stratum, rows in stored.items():
            k = config.budgets.k_for(stratum)
            got, want = select(rows, k), select(expected[(week, stratum)], k)
            assert [c.event_id for c in got.items] == [c.event_id for c in want.items], (week, stratum)
            assert got.tau == want.tau, (week, stratum)
            sampled += got.tau > 0
    assert sampled >= 3, "the budgets should leave some strata with more candidates than K"


class _Producer(threading.Thread):
    """Produce a fixed list of lines in small steps (about 1000/s), so agents are killed while working."""

    def __init__(self, bootstrap: str, topic: str, lines: list[bytes]):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.lines = bootstrap, topic, lines

    def run(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        for i in range(0, len(self.lines), 50):
            for line in self.lines[i:i + 50]:
                producer.send(self.topic, line)
            producer.flush()
            time.sleep(0.05)
        producer.close()


@pytest.fixture(scope="module")
def killed_run(broker, tmp_path_factory):
    """One agent on 3 partitions, SIGKILLed 4 times while it works, restarted, caught up."""
    tmp = tmp_path_factory.mktemp("judgment")
    topic, dlq = broker.create_topic(unique_name("retrievals"), 3), broker.create_topic(unique_name("dlq"), 1)
    group, url = unique_name("g"), f"sqlite:///{tmp}/s.db"
    config = _config(broker.bootstrap, topic, dlq, group, url, tmp)
    # Last week's events, then this week's: two weeks of samples.
    lines = _lines(2000, 31, _ago(days=7)) + _lines(2000, 32, _ago(minutes=3))
    rng = random.Random(42)
    started = [AgentProcess(config).start()]
    flow = _Producer(broker.bootstrap, topic, lines)
    flow.start()
    try:
        for _ in range(4):
            wait_until(lambda: started[-1].value("ragdrift_assigned_partitions") == 3, 60, 0.1, "agent owns all")
            time.sleep(rng.uniform(0.2, 1.2))  # a random point of its work
            started[-1].kill()
            started.append(AgentProcess(config).start())
        flow.join(60)
        records = read_partitions(broker.bootstrap, topic, len(lines))
        wait_until(lambda: caught_up(url, group, topic, records), 120, 0.2, "agent caught up")
        store = Store(url, None, TABLES)
        yield SimpleNamespace(lines=lines, records=records, topic=topic, group=group, queue=Queue(store),
                              config=judgment_config(load(started[-1].config_path).judgment),
                              config_path=started[-1].config_path)
        store.close()
    finally:
        for agent in started:
            agent.stop()


def test_agent_sample_equals_replay_across_sigkills(killed_run, tmp_path, capsys):
    run = killed_run
    single, _ = _replay(run.lines, run.config)
    assert len({c.week for c in single}) >= 2
    _assert_same_sample(run.queue, run.group, single, run.config)
    _assert_mirrors(run.queue, run.group, run.topic, run.records, run.config)
    # `ragdrift replay --sample` over the same lines takes the same sample.
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(run.lines) + b"\n")
    assert main(["replay", str(path), "--sample", "--format", "json", "--config", str(run.config_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    stored = samples([c for week in printed["sample"] for c in run.queue.week_candidates(run.group, week)],
                     run.config.budgets)
    assert {(w, s): (x["tau"], x["event_ids"]) for w, strata in printed["sample"].items() for s, x in strata.items()} \
        == {key: (sel.tau, [c.event_id for c in sel.items]) for key, sel in stored.items()}
    assert printed["security_incidents"] == run.queue.security_size(run.group)


def test_every_unauthorized_event_is_queued_once(killed_run):
    run = killed_run
    expected = set()
    for line in run.lines:
        try:
            facts = facts_of(decode(line).event)
        except RejectedEvent:
            continue
        if facts.unauthorized or facts.unauthorized_risk:
            expected.add(facts.event.event_id)
    queued, unreadable = run.queue.incidents(run.group)
    assert not unreadable
    ids = [i.event_id for i in queued]
    assert expected and any(not i.claims_present for i in queued) and any(i.unauthorized for i in queued)
    assert len(ids) == len(set(ids)) == run.queue.security_size(run.group)
    assert set(ids) == expected
    _, incidents = _replay(run.lines, run.config)
    assert {i.event_id: i for i in queued} == {i.event_id: i for i in incidents}


def test_two_agents_on_postgres_build_the_batch_one_agent_would(broker, make_topic, group_id, pg_url, tmp_path):
    topic, dlq = make_topic(3, "retrievals"), make_topic(1, "dlq")
    agents = [AgentProcess(_config(broker.bootstrap, topic, dlq, group_id, pg_url, tmp_path)) for _ in range(2)]
    try:
        for agent in agents:
            agent.launch()
        for agent in agents:
            agent.wait_serving()

        def owned(a):
            return a.value("ragdrift_assigned_partitions")

        wait_until(lambda: owned(agents[0]) + owned(agents[1]) == 3 and owned(agents[0]) * owned(agents[1]) > 0,
                   60, 0.2, "partitions split between both agents")
        lines = _lines(2000, 41, _ago(days=7)) + _lines(1000, 42, _ago(minutes=3))
        _Producer(broker.bootstrap, topic, lines).run()
        records = read_partitions(broker.bootstrap, topic, len(lines))
        wait_until(lambda: caught_up(pg_url, group_id, topic, records), 90, 0.2, "both agents caught up")
        settings = load(agents[0].config_path)
    finally:
        for agent in agents:
            agent.stop()
    with Store(pg_url, None, TABLES) as store:
        queue, config = Queue(store), judgment_config(settings.judgment)
        _assert_mirrors(queue, group_id, topic, records, config)
        _assert_same_sample(queue, group_id, _replay(lines, config)[0], config)
        week = last_week(time.time())
        built = build(settings, queue, week, out=str(tmp_path / "out"))
        replayed = [c for recs in records.values() for c in _replay(recs, config)[0]]
        expected = batches.build(week, replayed, config_of(settings))
        assert built.items > 0 and built.batch_id == expected.batch_id
        assert json.loads((built.directory / "manifest.json").read_text()) == expected.manifest
        key = [json.loads(line) for line in (built.directory / "key.jsonl").read_text().splitlines()]
        assert key == json.loads(json.dumps(expected.key))
        strata = expected.manifest["strata"]
        for stratum, rows in {s: [c for c in replayed if c.stratum == s and c.week == week] for s in strata}.items():
            chosen = select(rows, strata[stratum]["k"])
            assert {k["event_id"] for k in key if k["stratum"] == stratum} == {c.event_id for c in chosen.items}
            assert strata[stratum]["tau"] == chosen.tau


def _weekly_store(url: str, tmp, group: str):
    """Settings for `group` and a store holding candidates of last week."""
    path = tmp / f"{group}.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"group_id": group}, "store": {"url": url},
                                    "judgment": {**JUDGMENT, "export_dir": str(tmp / group)}}))
    settings = load(path)
    rows, _ = _replay(_lines(1500, 51, _ago(days=7)), judgment_config(settings.judgment))
    store = Store(url, None, (*TABLES, *QRELS))
    queue = Queue(store)
    with store.engine.begin() as conn:
        queue.writes(group, "t", 0, rows, (), ())(conn)
    return settings, store, queue


def _weekly_runs_once(url: str, tmp) -> None:
    group = unique_name("g")
    settings, store, queue = _weekly_store(url, tmp, group)
    now = time.time()
    barrier, results, errors = threading.Barrier(2), [], []

    def run() -> None:
        own = Store(url, None, TABLES)  # a replica of its own
        try:
            barrier.wait(10)
            results.append(weekly(settings, Queue(own), now=now))
        except Exception as exc:
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert not errors, errors
        built = [b for b in results if b is not None]
        assert len(results) == 2 and len(built) == 1
        assert [p.name for p in (tmp / group).iterdir()] == [built[0].batch_id]
        b = queue.batches.c
        with store.engine.connect() as conn:
            assert conn.execute(sql_select(func.count()).where(b.group_id == group)).scalar_one() == 1
        assert queue.batch_of(group, last_week(now))["batch_id"] == built[0].batch_id
        assert weekly(settings, queue, now=now) is None
        assert len(list((tmp / group).iterdir())) == 1
    finally:
        store.close()


def test_weekly_batch_runs_once_on_postgres(pg_url, tmp_path):
    _weekly_runs_once(pg_url, tmp_path)


def test_weekly_batch_runs_once_on_sqlite(tmp_path):
    _weekly_runs_once(f"sqlite:///{tmp_path}/s.db", tmp_path)


def test_the_scheduler_builds_last_weeks_batch(pg_url, tmp_path):
    group = unique_name("g")
    settings, store, queue = _weekly_store(pg_url, tmp_path, group)
    scheduler = new_scheduler()
    judging = JudgmentJobs(settings, queue, Qrels(store), top_n=10, scheduler=scheduler, weekly=scheduled).start()
    scheduler.start()
    try:
        # The real job, fired now rather than next Monday at 06:00.
        judging.scheduler.modify_job("weekly-batch", next_run_time=datetime.now(UTC))
        row = wait_until(lambda: queue.batch_of(group, last_week(time.time())), 30, 0.1, "weekly batch recorded")
        assert (tmp_path / group / row["batch_id"] / "manifest.json").exists()
        wait_until(lambda: judging.status.last_batch_items == row["items"] > 0, 10, 0.1, "status refreshed")
        assert judging.failures == 0
    finally:
        scheduler.shutdown(wait=False)
        store.close()


def test_a_restart_keeps_the_rows_of_every_week(broker, make_topic, group_id, tmp_path):
    """A partition whose store holds rows of more weeks than its sampler holds
    (keep_weeks + 1 = 3) must neither delete them nor lose the current week's."""
    topic, dlq = make_topic(3, "retrievals"), make_topic(1, "dlq")
    url = f"sqlite:///{tmp_path}/s.db"
    config = _config(broker.bootstrap, topic, dlq, group_id, url, tmp_path)
    lines = [line for i in range(5) for line in _lines(400, 60 + i, _ago(weeks=4 - i, minutes=40))]
    tail = _lines(600, 70, _ago(minutes=3))
    agent = AgentProcess(config).start()
    try:
        _Producer(broker.bootstrap, topic, lines).run()
        records = read_partitions(broker.bootstrap, topic, len(lines))
        wait_until(lambda: caught_up(url, group_id, topic, records), 60, 0.2, "five weeks processed")
        agent.kill()
        agent = AgentProcess(config).start()
        _Producer(broker.bootstrap, topic, tail).run()
        records = read_partitions(broker.bootstrap, topic, len(lines) + len(tail))
        wait_until(lambda: caught_up(url, group_id, topic, records), 60, 0.2, "restarted agent caught up")
    finally:
        agent.stop()
    with Store(url, None, TABLES) as store:
        queue, judging = Queue(store), judgment_config(load(agent.config_path).judgment)
        _assert_mirrors(queue, group_id, topic, records, judging)
        _assert_same_sample(queue, group_id, _replay(lines + tail, judging)[0], judging)


def test_restored_sampler_keeps_rows_of_older_weeks():
    """The same, in process: a partition restored from rows of 5 weeks."""
    config = judgment_config(load(None, {"RAGDRIFT_JUDGMENT__BUDGET": "5"}).judgment)
    lines = [line for i in range(5) for line in _lines(300, 80 + i, _ago(weeks=4 - i, minutes=40))]
    rows, _ = _replay(lines, config)
    assert len({c.week for c in rows}) == 5
    # In store order (the primary key's): oldest week first.
    changes, _ = JudgmentIntake(config, sorted(rows, key=lambda c: (c.week, c.stratum, c.event_id))).take()
    assert Counter(week for week, _, _ in changes.evicted) == Counter(), "rows deleted on restore"
