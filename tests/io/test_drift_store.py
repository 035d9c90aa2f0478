"""Daily drift counts join the checkpoint: added exactly once, on SQLite and PostgreSQL; baselines immutable."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from sqlalchemy import delete

from agent import synth
from agent.core.config import CoreConfig
from agent.core.drift import DEFAULT_GRIDS, Grid, Grids, freeze
from agent.core.drift.days import DriftConfig, DriftDays, counts_of, window
from agent.core.drift.features import CONTENT_AGE, GRIDS, MIXED_GRID, TOP1_SCORE
from agent.core.feature import alone
from agent.core.partitions import Outbox
from agent.core.state import PartitionState
from agent.io.store.database import Checkpoint, Store, StoreError
from agent.io.store.drift import TABLES, DriftStore

GROUP = "ragdrift"
START = datetime(2026, 3, 1, 22, tzinfo=UTC)
LINES = list(synth.generate(400, seed=5, start=START, rate=400 / 4 / 3600))  # 4 hours over midnight


@pytest.fixture
def drift(url):
    with Store(url, tables=TABLES) as store:
        yield DriftStore(store)


def expected(lines) -> dict:
    days = DriftDays()
    state = PartitionState(CoreConfig())
    for line in lines:
        days.observe(facts := state.process(line), alone(facts))
    return counts_of(days.take())


def checkpoint(drift: DriftStore, partition: int, offset: int, box: Outbox) -> None:
    """What Ownership.checkpoint does: the partition's offset and its outbox's drift rows in one transaction."""
    joined = [drift.writes(GROUP, [box.held["drift"]])]
    drift.store.save(GROUP, [Checkpoint(topic="t", partition=partition, next_offset=offset, state={"v": 1})], joined)
    box.clear()


def test_two_partitions_add_up_to_one_stream_exactly_once(drift):
    states = [PartitionState(CoreConfig(), drift=DriftConfig()) for _ in range(2)]
    boxes = [Outbox(), Outbox()]
    for i, line in enumerate(LINES):
        states[i % 2].process(line)
        if i % 97 == 96:  # checkpoints of one partition at a time, at different points
            p = (i // 97) % 2
            boxes[p].take(states[p])
            checkpoint(drift, p, i, boxes[p])
    for p in (0, 1):
        boxes[p].take(states[p])
        checkpoint(drift, p, len(LINES), boxes[p])
    assert drift.stored_days(GROUP) == expected(LINES)
    assert set(drift.stored_days(GROUP, "2026-03-02", "2026-03-02")) == {"2026-03-02"}
    assert drift.last_day(GROUP) == "2026-03-02"


def test_a_failed_checkpoint_writes_nothing_and_its_outbox_keeps_the_deltas(drift):
    state = PartitionState(CoreConfig(), drift=DriftConfig())
    box = Outbox()
    for line in LINES[:200]:
        state.process(line)
    box.take(state)
    with pytest.raises(StoreError):
        drift.store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=200, state={"v": 1})],
                         [drift.writes(GROUP, [box.held["drift"]]), _refuse])
    assert drift.stored_days(GROUP) == {}
    assert box.held["drift"]  # the next checkpoint writes them
    for line in LINES[200:]:
        state.process(line)
    box.take(state)
    checkpoint(drift, 0, len(LINES), box)
    assert drift.stored_days(GROUP) == expected(LINES)


def test_baselines_are_stored_once_per_version_and_never_changed(drift):
    days = {f"2026-03-0{d + 1}": window(expected(LINES[d * 100:(d + 1) * 100])) for d in range(3)}
    first = freeze(days, name="launch")
    assert drift.save_baseline(first, now=1.0)
    assert not drift.save_baseline(first, now=2.0)  # the same days: the same version, stored once
    other = freeze({**days, "2026-03-04": window(expected(LINES[300:]))}, name="launch")
    assert other.version != first.version
    assert drift.save_baseline(other, now=3.0)
    listed, bad = drift.list_baselines()
    assert [(b.name, b.version) for b in listed] == [("launch", first.version), ("launch", other.version)]
    assert bad == 0
    assert drift.load_baseline("launch") == other  # the newest version of the name
    assert drift.load_baseline("launch", first.version) == first
    assert drift.load_baseline("nope") is None


def _refuse(conn):
    raise StoreError("refused")


def test_a_corrupt_stored_baseline_is_skipped_and_counted_and_never_loaded(drift):
    days = {f"2026-03-0{d + 1}": window(expected(LINES[d * 100:(d + 1) * 100])) for d in range(3)}
    good = freeze(days, name="good")
    drift.save_baseline(good, now=1.0)
    edited = good.to_dict() | {"n_bins": 99}  # content that no longer matches its version
    rows = [("notjson", "0" * 16, b"{not json"), ("edited", good.version, orjson.dumps(edited)),
            ("renamed", good.version, good.to_json()), ("partial", "1" * 16, b'{"format": 1}')]
    with drift.store.engine.begin() as conn:
        conn.execute(drift.baselines.insert(), [{"name": n, "version": v, "created_at": 2.0, "baseline": doc}
                                                for n, v, doc in rows])
    listed, bad = drift.list_baselines()
    assert [b.name for b in listed] == ["good"] and bad == len(rows)
    for name, version, _ in rows:
        with pytest.raises(ValueError, match=f"stored baseline '{name}' {version} is corrupt"):
            drift.load_baseline(name, version)


def test_days_record_their_grids_and_days_stored_without_them_still_load(drift):
    box = Outbox()
    narrow = Grids(by_feature={TOP1_SCORE: Grid(0.0, 1.0, 100)})
    for config, lines in ((DriftConfig(), LINES[:100]), (DriftConfig(narrow), LINES[100:200])):
        state = PartitionState(CoreConfig(), drift=config)
        for line in lines:
            state.process(line)
        box.take(state)
        checkpoint(drift, 0, 100, box)
    (day,) = set(drift.stored_days(GROUP))
    counted = drift.stored_days(GROUP)[day]
    assert counted and all(c.grids[TOP1_SCORE] == MIXED_GRID for c in counted.values())  # two grids in one day
    assert all(c.grids[CONTENT_AGE] == DEFAULT_GRIDS[CONTENT_AGE].digest for c in counted.values())
    with drift.store.engine.begin() as conn:  # as a store written before grids were recorded holds them
        conn.execute(delete(drift.days).where(drift.days.c.feature == GRIDS))
    legacy = drift.stored_days(GROUP)[day]
    assert {a: (c.numeric, c.mixes) for a, c in legacy.items()} == {a: (c.numeric, c.mixes) for a, c in counted.items()}
    assert all(c.grids == {} for c in legacy.values())


def test_a_checkpoint_writes_its_rows_in_three_statements_whatever_their_number(drift):
    from sqlalchemy import event

    statements = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if "ragdrift_drift_days" in statement:
            statements.append(statement)

    event.listen(drift.store.engine, "before_cursor_execute", count)
    used, rows = [], []
    for lines in (LINES[:5], LINES[5:], LINES):  # few rows, many rows, then all of them again onto stored ones
        state = PartitionState(CoreConfig(), drift=DriftConfig())
        box = Outbox()
        for line in lines:
            state.process(line)
        box.take(state)
        rows.append(len(box.held["drift"]))
        statements.clear()
        checkpoint(drift, 0, len(lines), box)
        used.append(len(statements))
    event.remove(drift.store.engine, "before_cursor_execute", count)
    assert rows[1] > rows[0] and used == [3, 3, 3]
    twice = expected(LINES)
    for apps in twice.values():  # each event was counted twice: once in the first two checkpoints, once in the third
        for counts in apps.values():
            for cells in (*counts.numeric.values(), *counts.mixes.values()):
                for key in cells:
                    cells[key] *= 2
    assert drift.stored_days(GROUP) == twice
