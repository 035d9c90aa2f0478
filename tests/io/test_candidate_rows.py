"""Each sampled result carries its content age and whether the answer cited
it, into the batch key; rows stored by the release before still load, and
give the batch they gave then, byte for byte."""

from __future__ import annotations

from pathlib import Path

import msgspec
import orjson
from sqlalchemy import insert

from agent.core.batch import BatchConfig, build
from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.core.sampling import Candidate, ResultRef, RiskConfig, assess, candidates_of
from agent.io.files import batch_files
from agent.io.store.database import Store
from agent.io.store.queue import TABLES, Queue

DATA = Path(__file__).resolve().parents[1] / "data" / "candidates"
WEEK = "2026-W02"


def test_results_carry_their_age_and_citation_into_the_key():
    doc = {
        "schema": "retrieval.v1", "event_id": "ev-1", "ts": "2026-11-25T12:00:00Z", "app": "app",
        "query": {"id": "q0000000"}, "principal": {"tenant": "t", "groups": []}, "cutoff_k": 3,
        "results": [
            {"chunk_id": "c1", "parent_id": "p", "source": "s", "rank": 1, "score": 0.9, "effective_date": "2026-11-24"},
            {"chunk_id": "c2", "parent_id": "p", "source": "s", "rank": 2, "score": 0.8},
            {"chunk_id": "c3", "parent_id": "p", "source": "s", "rank": 3, "score": 0.7,
             "effective_date": "2026-12-01"},  # not yet effective: no age
            {"chunk_id": "c4", "parent_id": "p", "source": "s", "rank": 4, "score": 0.6},  # not admitted
        ],
        "feedback": {"cited": ["c2", "c4"]},
    }  # fmt: skip
    facts = facts_of(decode(orjson.dumps(doc)).event)
    assert facts.admitted_ages == [1.5, None, None] and facts.citations == [False, True, False]
    risky, _ = candidates_of(facts, assess(facts, 0, RiskConfig()))
    assert risky.results == (ResultRef("c1", "p", "s", 1, 0.9, 1.5, False), ResultRef("c2", "p", "s", 2, 0.8, None, True),
                             ResultRef("c3", "p", "s", 3, 0.7, None, False))
    key = build(risky.week, [risky], BatchConfig(budgets={}, default_budget=1, salt="fixture")).key
    chunks = sorted(key[0]["chunks"], key=lambda c: c["rank"])
    assert [(c.get("age_days"), c.get("cited")) for c in chunks] == [(1.5, False), (None, True), (None, False)]
    uncited = candidates_of(facts_of(decode(orjson.dumps({**doc, "feedback": {"thumbs": 1}})).event),
                            assess(facts, 0, RiskConfig()))[0]
    assert [r.cited for r in uncited.results] == [None, None, None]  # the event reports no citations


def test_rows_stored_by_the_previous_release_load_and_give_the_same_batch(url, tmp_path):
    with Store(url, tables=TABLES) as store:
        rows = [orjson.loads(line) for line in (DATA / "main-rows.jsonl").read_bytes().splitlines()]
        assert all(len(r) == 5 for row in rows for r in row["results"])  # written as 5-tuples
        with store.engine.begin() as conn:
            conn.execute(insert(store.joined("ragdrift_candidates")), [
                {"group_id": "g", "topic": "t", "partition": 0, "week": row["week"], "stratum": row["stratum"],
                 "event_id": row["event_id"], "priority": row["priority"], "candidate": orjson.dumps(row)}
                for row in rows
            ])
        candidates = Queue(store).week_candidates("g", WEEK)
    assert len(candidates) == len(rows) and all(r.age_days is None and r.cited is None
                                                for c in candidates for r in c.results)
    batch = build(WEEK, candidates, BatchConfig(budgets={}, default_budget=3, salt="fixture"))
    written = batch_files.write(tmp_path, batch, batch.items)
    expected = DATA / "main-batch"
    assert sorted(p.name for p in written.iterdir()) == sorted(p.name for p in expected.iterdir())
    for path in expected.iterdir():
        assert (written / path.name).read_bytes() == path.read_bytes(), path.name


def test_a_checkpoint_deletes_exactly_the_evicted_rows_of_its_partition(url):
    store = Store(url, tables=TABLES)
    queue = Queue(store)
    rows = [orjson.loads(line) for line in (DATA / "main-rows.jsonl").read_bytes().splitlines()]
    candidates = [msgspec.convert(row, Candidate) for row in rows]
    keys = [(c.week, c.stratum, c.event_id) for c in candidates]
    try:
        with store.engine.begin() as conn:
            for partition in (0, 1):
                queue.writes("g", "t", partition, candidates, (), ())(conn)
        evicted = set(keys[::3])
        with store.engine.begin() as conn:
            queue.writes("g", "t", 0, (), evicted, ())(conn)
        kept = {(c.week, c.stratum, c.event_id) for c in queue.partition_candidates("g", "t", 0)}
        other = {(c.week, c.stratum, c.event_id) for c in queue.partition_candidates("g", "t", 1)}
    finally:
        store.close()
    assert len(evicted) > 1 and kept == set(keys) - evicted and other == set(keys)
