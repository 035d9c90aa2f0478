"""Damaged rows of counts in the store (not JSON, NaN, the wrong shape), on SQLite and PostgreSQL: the agent's
checkpoint adds the delta in their place and goes on, every read skips them, each is counted once and logged once
with its key; `compare --live`, `drift --format json` and `baseline freeze` print their result with one line
naming them, or one line and exit 2 when nothing else is left."""

from __future__ import annotations

import json
from datetime import timedelta

import orjson
import pytest
import yaml
from kafka import TopicPartition
from prometheus_client import CollectorRegistry
from sqlalchemy import Table, select, update

from agent.core.compare.live import empty_row
from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig, HeldDeltas, merge
from agent.core.drift.features import GRIDS, LANGUAGE, TOP1_SCORE
from agent.core.drift.queries import QUERIES
from agent.core.state import PartitionState
from agent.io.background.periodic import new_scheduler
from agent.io.features import Wiring, tables_of
from agent.io.features.drift import Drift
from agent.io.features.live_gate import LiveGate
from agent.io.settings.agent import Settings
from agent.io.settings.live_gate import LiveGateSettings
from agent.io.store.database import Checkpoint, Store, StoreError
from agent.service import FEATURES
from agent.synth import generate
from tests.generated_days import DAY0
from tests.io.test_live_gate_store import rows
from tests.test_cli import one_line_error, run

GROUP = "ragdrift"
TP = TopicPartition("t", 0)
DAY = "2026-11-05"
NOT_JSON, NAN = b"\x00not json", b'{"events": NaN}'
LIVE_DAMAGE = [NOT_JSON, NAN, b"[1, 2]", orjson.dumps({**empty_row(), "events": "7"}),
               orjson.dumps({**empty_row(), "top1_score": 0.5})]


def damage(store: Store, table: Table, key: dict, raw: bytes) -> None:
    with store.engine.begin() as conn:
        conn.execute(update(table).where(*[table.c[k] == v for k, v in key.items()]).values(counts=raw))


def metric(feature, table: str) -> float | None:
    registry = CollectorRegistry()
    for collector in feature.collectors():
        registry.register(collector)
    return registry.get_sample_value(f"ragdrift_{feature.name}_damaged_rows_total", {"table": table})


def checkpointing(store: Store, feature, held=lambda rows: rows):
    """A checkpoint of partition 0 at an offset, with the feature's rows of what it `held`."""
    def checkpoint(rows, offset: int) -> None:
        store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=offset, state={})],
                   feature.writes(GROUP, [(TP, held(rows))]))

    return checkpoint


def set_aside(store: Store) -> list[tuple[str, list, bytes]]:
    """The shared rows a checkpoint kept aside, as stored."""
    t = store.set_aside_rows
    with store.engine.begin() as conn:
        found = conn.execute(select(t.c.table_name, t.c.row_key, t.c.row).order_by(t.c.table_name)).all()
    return [(table, json.loads(key), bytes(row)) for table, key, row in found]


def logged(caplog, table: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"damaged row of {table}")]


@pytest.mark.parametrize("raw", LIVE_DAMAGE)
def test_a_damaged_live_gate_row_is_skipped_counted_and_logged_once_and_the_checkpoint_adds_in_its_place(
        url, raw, caplog):
    settings = Settings(live_gate=LiveGateSettings(enabled=True))
    with Store(url, None, tables_of(FEATURES)) as store:
        feature = LiveGate(Wiring(settings, store, new_scheduler()))
        gate = feature.rows
        checkpoint = checkpointing(store, feature)

        checkpoint(rows({(DAY, "shop", "a"): 3, (DAY, "shop", "b"): 4},
                        {(DAY, "shop", "a", "q1"): 1, (DAY, "shop", "a", "q2"): 1}), 1)
        gate.stored(GROUP, DAY, DAY)
        assert metric(feature, "ragdrift_live_days") is None  # a healthy store: no series
        damage(store, gate.days, {"day": DAY, "app": "shop", "version": "a"}, raw)
        damage(store, gate.queries, {"day": DAY, "app": "shop", "version": "a", "query_id": "q1"}, raw)
        for _ in range(2):  # read twice: counted and logged once
            days, queries = gate.stored(GROUP, DAY, DAY)
            assert set(days) == {(DAY, "shop", "b")} and set(queries) == {(DAY, "shop", "a", "q2")}
        checkpoint(rows({(DAY, "shop", "a"): 2}, {(DAY, "shop", "a", "q1"): 1}), 2)  # adds to the damaged rows
        days, queries = gate.stored(GROUP, DAY, DAY)
        assert {key: row["events"] for key, row in days.items()} == {(DAY, "shop", "a"): 2, (DAY, "shop", "b"): 4}
        assert {key[3]: row["events"] for key, row in queries.items()} == {"q1": 1, "q2": 1}
        assert store.load(GROUP, "t", 0).next_offset == 2
        assert set_aside(store) == [("ragdrift_live_days", [GROUP, DAY, "shop", "a"], raw),
                                    ("ragdrift_live_queries", [GROUP, DAY, "shop", "a", "q1"], raw)]
    for table, key in (("ragdrift_live_days", (DAY, "shop", "a")), ("ragdrift_live_queries", (DAY, "shop", "a", "q1"))):
        assert metric(feature, table) == 1
        assert logged(caplog, table) == [f"damaged row of {table} skipped: {key!r}"]


DRIFT_DAMAGE = [NOT_JSON, b"NaN", b'{"3": NaN}', b'{"3": -1}', b'{"3": 1.5}', b'{"x": 1}', b'["3"]',
                b'{"$format": "2", "3": 5}']


@pytest.mark.parametrize("raw", DRIFT_DAMAGE)
def test_a_damaged_drift_day_row_is_skipped_counted_and_logged_once_and_the_checkpoint_adds_in_its_place(
        url, raw, caplog):
    with Store(url, None, tables_of(FEATURES)) as store:
        feature = Drift(Wiring(Settings(), store, new_scheduler()))
        drift = feature.store
        checkpoint = checkpointing(store, feature, HeldDeltas)

        checkpoint({(DAY, "shop", TOP1_SCORE): {3: 5}, (DAY, "shop", LANGUAGE): {"en": 5},
                    (DAY, "docs", TOP1_SCORE): {4: 2}}, 1)
        damage(store, drift.days, {"day": DAY, "app": "shop", "feature": TOP1_SCORE}, raw)
        for _ in range(2):
            stored = drift.stored_days(GROUP)[DAY]
            assert stored["shop"].numeric == {} and stored["shop"].mixes == {LANGUAGE: {"en": 5}}
            assert stored["docs"].numeric == {TOP1_SCORE: {4: 2}}
        checkpoint({(DAY, "shop", TOP1_SCORE): {3: 1}}, 2)
        assert drift.stored_days(GROUP)[DAY]["shop"].numeric == {TOP1_SCORE: {3: 1}}
        assert set_aside(store) == [("ragdrift_drift_days", [GROUP, DAY, "shop", TOP1_SCORE], raw)]
    assert metric(feature, "ragdrift_drift_days") == 1
    assert logged(caplog, "ragdrift_drift_days") == [f"damaged row of ragdrift_drift_days skipped: {(DAY, 'shop', TOP1_SCORE)!r}"]


@pytest.mark.parametrize(("feature", "raw"), [(QUERIES, b'{"k": [1]}'), (GRIDS, b'{"top1_score": 3}'),
                                              (LANGUAGE, b'{"en": true}')])
def test_each_kind_of_drift_row_is_checked_for_its_own_shape(url, feature, raw):
    with Store(url, None, tables_of(FEATURES)) as store:
        drift = Drift(Wiring(Settings(), store, new_scheduler())).store
        store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=1, state={})],
                   [drift.writes(GROUP, [{(DAY, "shop", TOP1_SCORE): {3: 1}}])])
        with store.engine.begin() as conn:
            conn.execute(store.insert(drift.days), {"group_id": GROUP, "day": DAY, "app": "shop", "feature": feature,
                                                    "counts": raw})
        assert drift.stored_days(GROUP)[DAY]["shop"].numeric == {TOP1_SCORE: {3: 1}}
        assert list(drift.damaged.keys["ragdrift_drift_days"]) == [(DAY, "shop", feature)]


NEWER = orjson.dumps({"$format": 2, "3": 5, "shape": "a newer release's"})


def test_a_drift_row_of_a_newer_format_is_skipped_by_reads_and_never_rewritten(url):
    """A checkpoint adding to it fails (the replica holds, as for any failed checkpoint) rather than losing
    what it cannot read; rows of a feature this release does not know are skipped and never written."""
    with Store(url, None, tables_of(FEATURES)) as store:
        feature = Drift(Wiring(Settings(), store, new_scheduler()))
        drift = feature.store
        checkpoint = checkpointing(store, feature, HeldDeltas)

        checkpoint({(DAY, "shop", TOP1_SCORE): {3: 5}, (DAY, "shop", LANGUAGE): {"en": 5}}, 1)
        damage(store, drift.days, {"day": DAY, "app": "shop", "feature": TOP1_SCORE}, NEWER)
        with store.engine.begin() as conn:
            conn.execute(store.insert(drift.days), {"group_id": GROUP, "day": DAY, "app": "shop",
                                                    "feature": "a_future_feature", "counts": b'{"x": "y"}'})
        assert drift.stored_days(GROUP)[DAY]["shop"].numeric == {}
        with pytest.raises(StoreError, match="newer release's format"):
            checkpoint({(DAY, "shop", TOP1_SCORE): {3: 1}}, 2)
        assert store.load(GROUP, "t", 0).next_offset == 1  # the checkpoint did not pass the events
        checkpoint({(DAY, "shop", LANGUAGE): {"en": 1}}, 2)  # rows it can read: added as ever
        d = drift.days.c
        with store.engine.begin() as conn:
            stored = dict(conn.execute(select(d.feature, d.counts).where(d.day == DAY)).all())
        assert stored[TOP1_SCORE] == NEWER and stored["a_future_feature"] == b'{"x": "y"}'
        assert set_aside(store) == []
    registry = CollectorRegistry()
    for collector in feature.collectors():
        registry.register(collector)
    assert registry.get_sample_value("ragdrift_drift_newer_rows_total", {"table": "ragdrift_drift_days"}) == 2
    assert registry.get_sample_value("ragdrift_drift_damaged_rows_total", {"table": "ragdrift_drift_days"}) is None


def test_a_live_gate_row_of_a_newer_format_is_never_rewritten(url):
    settings = Settings(live_gate=LiveGateSettings(enabled=True))
    with Store(url, None, tables_of(FEATURES)) as store:
        feature = LiveGate(Wiring(settings, store, new_scheduler()))
        gate = feature.rows
        checkpoint = checkpointing(store, feature)

        checkpoint(rows({(DAY, "shop", "a"): 3}, {(DAY, "shop", "a", "q1"): 1}), 1)
        damage(store, gate.days, {"day": DAY, "app": "shop", "version": "a"}, NEWER)
        assert set(gate.stored(GROUP, DAY, DAY)[0]) == set()
        with pytest.raises(StoreError, match="newer release's format"):
            checkpoint(rows({(DAY, "shop", "a"): 2}, {}), 2)
        with store.engine.begin() as conn:
            assert conn.execute(select(gate.days.c.counts)).scalar_one() == NEWER


# -- the commands -----------------------------------------------------------


def config(tmp_path, url: str) -> str:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": url}, "live_gate": {"enabled": True}}))
    return str(path)


def test_compare_live_leaves_a_damaged_row_out_and_names_it(url, tmp_path, capsys):
    with Store(url, None, tables_of(FEATURES)) as store:
        gate = LiveGate(Wiring(Settings(live_gate=LiveGateSettings(enabled=True)), store, new_scheduler())).rows
        found = rows({(day, "shop", v): 40 for day in ("2026-11-04", DAY) for v in ("a", "b")},
                     {(DAY, "shop", v, f"q{i}"): 1 for v in ("a", "b") for i in range(20)})
        store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=1, state={})], [gate.writes(GROUP, [found])])
        damage(store, gate.days, {"day": "2026-11-04", "app": "shop", "version": "b"}, NAN)
        damage(store, gate.queries, {"day": DAY, "app": "shop", "version": "b", "query_id": "q3"}, NOT_JSON)
    path = config(tmp_path, url)
    status, out, err = run(capsys, "compare", "--live", "--pipeline", "a", "--pipeline", "b", "--config", path,
                           "--from", "2026-11-04", "--to", DAY, "--format", "json")
    assert status in (0, 1) and "Traceback" not in err
    report = json.loads(out)
    assert report["versions"]["b"]["events"] == 40  # the damaged day row left out
    assert err.splitlines() == ["ragdrift: warning: 2 damaged stored row(s) skipped: ragdrift_live_days "
                                "('2026-11-04', 'shop', 'b'), ragdrift_live_queries ('2026-11-05', 'shop', 'b', 'q3')"]
    with Store(url, None, tables_of(FEATURES)) as store:
        damage(store, LiveGate(Wiring(Settings(live_gate=LiveGateSettings(enabled=True)), store,
                                      new_scheduler())).rows.days, {"version": "b"}, b"[]")
    status, out, err = run(capsys, "compare", "--live", "--pipeline", "a", "--pipeline", "b", "--config", path,
                           "--from", "2026-11-04", "--to", DAY)
    assert status == 2 and out == ""
    message = one_line_error(err)
    assert "'b' has no events" in message and "3 damaged stored row(s) skipped" in message


@pytest.fixture
def drift_store(url, tmp_path):
    """Eight generated days in the store, one row of the last damaged: (config, first day, last day, its key)."""
    deltas: dict = {}
    for d in range(8):
        state = PartitionState(CoreConfig(), drift=DriftConfig())
        for line in generate(300, seed=d, start=DAY0 + timedelta(days=d), rate=300 / 86400):
            state.process(line)
        merge(deltas, state.feature("drift").take())
    first, *_, last = sorted({day for day, _, _ in deltas})
    with Store(url, None, tables_of(FEATURES)) as store:
        drift = Drift(Wiring(Settings(), store, new_scheduler())).store
        store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=1, state={})],
                   [drift.writes(GROUP, [deltas])])
        app, name = next((app, name) for (day, app, name) in sorted(deltas) if day == last and name == TOP1_SCORE)
        damage(store, drift.days, {"day": last, "app": app, "feature": name}, b'{"3": NaN}')
    return config(tmp_path, url), first, last, (last, app, name)


def test_drift_json_and_baseline_freeze_leave_a_damaged_day_row_out_and_name_it(drift_store, capsys):
    path, first, last, key = drift_store
    warning = f"ragdrift: warning: 1 damaged stored row(s) skipped: ragdrift_drift_days {key!r}"
    status, out, err = run(capsys, "baseline", "freeze", "--config", path, "--name", "b", "--from", first, "--to", last)
    assert status == 0 and out.startswith("b ") and err.splitlines()[0] == warning
    status, out, err = run(capsys, "drift", "--config", path, "--day", last, "--format", "json")
    assert status == 0 and err.splitlines() == [warning]
    assert [json.loads(line)["window"] for line in out.splitlines()] and "Traceback" not in err


def test_drift_and_freeze_of_nothing_but_a_damaged_row_are_one_line_and_exit_2(url, tmp_path, capsys):
    with Store(url, None, tables_of(FEATURES)) as store:
        drift = Drift(Wiring(Settings(), store, new_scheduler())).store
        store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=1, state={})],
                   [drift.writes(GROUP, [{(DAY, "shop", TOP1_SCORE): {3: 1}}])])
        damage(store, drift.days, {"day": DAY}, NOT_JSON)
    path = config(tmp_path, url)
    status, out, err = run(capsys, "baseline", "freeze", "--config", path, "--name", "b", "--from", DAY, "--to", DAY)
    assert status == 2 and out == ""
    assert "nothing to freeze; 1 damaged stored row(s) skipped" in one_line_error(err)
