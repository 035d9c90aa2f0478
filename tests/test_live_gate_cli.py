"""`ragdrift compare --live`: generated traffic of a stable version and a canary (a leak, worse rankings and
scores in one app under a better macro figure, stale conflicts, an equivalent change) written to the store
through the checkpoint's path, judged from the store; and bad input."""

from __future__ import annotations

import json
from functools import cache

import pytest
import yaml

from agent.core.compare.live import HeldRows, LiveConfig
from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.core.feature import alone
from agent.core.judgments.labels import Label
from agent.io.features import tables_of
from agent.io.store.database import Checkpoint, Store
from agent.io.store.live_gate import LiveGateStore
from agent.io.store.qrels import Qrels
from agent.io.store.queue import Queue
from agent.service import FEATURES
from tests import gate_traffic as traffic
from tests.test_cli import one_line_error, run

GROUP = "ragdrift"


@cache
def held(canary: str, parts: int = 1) -> tuple[HeldRows, ...]:
    """The rows of the canary's traffic, cut into `parts` checkpoints."""
    lines = traffic.lines(canary)
    out = []
    for i in range(parts):
        counts = LiveConfig().partition()
        for line in lines[i::parts]:
            counts.observe(facts := facts_of(decode(line).event), alone(facts))
        rows = counts.outbox()
        rows.absorb(counts.take())
        out.append(rows)
    return tuple(out)


def write(url: str, rows) -> None:
    with Store(url, None, tables_of(FEATURES)) as store:
        gate = LiveGateStore(store)
        for i, found in enumerate(rows):
            store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=i + 1, state={})],
                       [gate.writes(GROUP, [found])])


def config(tmp_path, url: str, **live_gate) -> str:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": url}, "live_gate": live_gate}))
    return str(path)


@pytest.fixture
def stored(tmp_path):
    def make(canary: str) -> str:
        url = f"sqlite:///{tmp_path}/{canary}.db"
        write(url, held(canary))
        return config(tmp_path, url)
    return make


def live(capsys, path: str, *extra: str, versions=(traffic.STABLE, traffic.CANDIDATE)) -> tuple[int, dict]:
    pipelines = [arg for v in versions for arg in ("--pipeline", v)]
    status, out, err = run(capsys, "compare", "--live", *pipelines, "--config", path, *extra, "--format", "json")
    assert status in (0, 1), err
    return status, json.loads(out)


def gate_of(report: dict, name: str) -> dict:
    return next(row for row in report["hardGates"] if row["gate"] == name)


def test_a_leaking_canary_fails_the_unauthorized_gate_with_event_ids(stored, capsys):
    status, report = live(capsys, stored("leak"))
    assert (status, report["verdict"]) == (1, "fail")
    gate = gate_of(report, "unauthorized")
    assert gate["outcome"] == "fail" and gate["baseline"] == 0 and gate["candidate"] > 0
    assert gate["examples"] and all(e["event"].startswith("c-") for e in gate["examples"])
    assert report["reasons"][0].startswith("unauthorized:")
    assert report["versions"]["pair"] == {"chosen": "given", "reason": "--pipeline STABLE --pipeline CANDIDATE"}


def test_a_canary_regressing_one_app_fails_naming_the_slice_while_the_macro_figure_improves(stored, capsys):
    status, report = live(capsys, stored("slice"))
    assert (status, report["verdict"]) == (1, "fail")
    top1 = next(row for row in report["metrics"] if row["metric"] == "top1_score")
    assert top1["delta"] > 0 and top1["outcome"] == "pass"
    worst = report["slices"][0]
    assert (worst["dimension"], worst["label"], worst["metric"], worst["outcome"]) == (
        "app", traffic.SLICE, "top1_score", "fail")
    assert worst["interval"] == "paired" and worst["margin"] > 0
    assert report["reasons"] == [r for r in report["reasons"] if r.startswith(f"slice app={traffic.SLICE}: top1_score")]


def test_a_canary_with_stale_conflicts_fails(stored, capsys):
    status, report = live(capsys, stored("stale"))
    assert (status, report["verdict"]) == (1, "fail")
    gate = gate_of(report, "stale_conflict")
    assert gate["outcome"] == "fail" and gate["baseline"] == 0 and gate["examples"]


def test_an_equivalent_canary_passes_and_every_threshold_is_printed(stored, capsys):
    path = stored("equivalent")
    status, report = live(capsys, path)
    assert (status, report["verdict"]) == (0, "pass"), report["reasons"]
    assert report["queries"]["pairing"] == "paired" and report["queries"]["compared"] >= 1000
    material = {m["metric"]: m for m in report["material"]}
    assert material["top1_score"]["days"] == traffic.DAYS and material["top1_score"]["threshold"] > 0
    assert {"min_queries", "material_factor", "false_alarm_rate", "max_unauthorized", "filter_zero_alpha"} <= set(
        report["thresholds"])
    for fmt in ("table", "md"):
        status, out, _ = run(capsys, "compare", "--live", "--pipeline", traffic.STABLE, "--pipeline",
                             traffic.CANDIDATE, "--config", path, "--format", fmt)
        assert status == 0 and "verdict: pass" in out and "material_factor 1.0" in out
        assert "day-to-day variation" in out


def test_rows_written_in_several_checkpoints_add_up_to_one(tmp_path):
    one, three = f"sqlite:///{tmp_path}/one.db", f"sqlite:///{tmp_path}/three.db"
    write(one, held("leak"))
    write(three, held("leak", 3))
    found = []
    for url in (one, three):
        with Store(url, None, tables_of(FEATURES)) as store:
            found.append(LiveGateStore(store).stored(GROUP, "2026-01-01", "2026-12-31"))
    (days1, queries1), (days3, queries3) = found
    assert days1.keys() == days3.keys() and queries1.keys() == queries3.keys()
    for key, row in days1.items():
        assert {k: v for k, v in row.items() if k not in traffic.FLOAT_SUMS} == \
               {k: v for k, v in days3[key].items() if k not in traffic.FLOAT_SUMS}
        for name in traffic.FLOAT_SUMS:
            assert row[name][1] == days3[key][name][1] and row[name][0] == pytest.approx(days3[key][name][0])


def test_postgres_rows_add_up_as_on_sqlite(pg_url, tmp_path):
    write(pg_url, held("stale", 2))
    with Store(pg_url, None, tables_of(FEATURES)) as store:
        days, queries = LiveGateStore(store).stored(GROUP, "2026-01-01", "2026-12-31")
    expected = held("stale")[0]
    assert {k: v["stale_conflict"] for k, v in days.items()} == {k: v["stale_conflict"] for k, v in expected.days.items()}
    assert len(queries) == len(expected.queries)


def test_rows_past_the_retention_are_deleted(tmp_path):
    url = f"sqlite:///{tmp_path}/r.db"
    with Store(url, None, tables_of(FEATURES)) as store:
        gate = LiveGateStore(store, retention_days=2)
        store.save(GROUP, [Checkpoint(topic="t", partition=0, next_offset=1, state={})],
                   [gate.writes(GROUP, held("equivalent"))])
        days, queries = gate.stored(GROUP, "2026-01-01", "2026-12-31")
    newest = max(day for day, _, _ in days)
    assert min(day for day, _, _, _ in queries) == "2026-11-04" and newest == "2026-11-06"
    assert min(day for day, _, _ in days) == "2026-11-04"  # day rows too


@pytest.mark.parametrize("args, message", [
    (["--pipeline", traffic.STABLE, "--pipeline", "nope"], "pipeline version 'nope' has no events from"),
    (["--pipeline", traffic.STABLE], "--live needs two different versions"),
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--from", "2026-11-05", "--to", "2026-11-01"],
     "--from 2026-11-05 is after --to 2026-11-01"),
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--from", "2026-13-01"], "--from '2026-13-01'"),
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--from", "2027-01-01", "--to", "2027-01-02"],
     "has no events from 2027-01-01 to 2027-01-02"),
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--from", "2026-09-20", "--to", "2026-10-01"],
     "--from 2026-09-20 is before 2026-10-02, live_gate.retention_days 35 before the newest stored day"),
    # the default window of 7 days ending on the first day a date holds starts on that day, no earlier
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--to", "0001-01-01"],
     "--from 0001-01-01 is before 2026-10-02"),
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--to", "0001-01-03"],
     "--from 0001-01-01 is before 2026-10-02"),
    (["--pipeline", traffic.STABLE, "--pipeline", traffic.CANDIDATE, "--from", "9999-12-31", "--to", "9999-12-31"],
     "has no events from 9999-12-31 to 9999-12-31"),
])
def test_bad_input_is_one_line_and_exit_2(stored, capsys, args, message):
    status, _, err = run(capsys, "compare", "--live", *args, "--config", stored("equivalent"))
    assert status == 2 and message in one_line_error(err)


def test_unknown_settings_keys_and_mixed_modes_are_one_line_and_exit_2(tmp_path, capsys):
    path = config(tmp_path, f"sqlite:///{tmp_path}/x.db", window_dayz=3)
    status, _, err = run(capsys, "compare", "--live", "--pipeline", "a", "--pipeline", "b", "--config", path)
    assert status == 2 and "live_gate.window_dayz: unknown key" in one_line_error(err)
    status, _, err = run(capsys, "compare", "q.json", "a.json", "b.json", "5", "--live", "--pipeline", "a",
                         "--pipeline", "b")
    assert status == 2 and "not QRELS RUN_A RUN_B K" in one_line_error(err)
    status, _, err = run(capsys, "compare", "--pipeline", "a")
    assert status == 2 and "or --live" in one_line_error(err)


def judged_batch(tmp_path, url: str) -> None:
    """A recorded batch with its key on disk and labels in the store: 20 items a day for three days per
    version, both chunks relevant or neither; the stable version's precision 0.8, 0.75, 0.85 a day, the
    candidate's 0.3."""
    directory = tmp_path / "batch"
    directory.mkdir()
    key, labels = [], []
    for version, relevant in ((traffic.STABLE, (16, 15, 17)), (traffic.CANDIDATE, (6, 6, 6))):
        for day, good in enumerate(relevant):
            for i in range(20):
                item = f"2026-W45-{version}-{day}-{i:02d}"
                chunks = [{"chunk": f"{item}-{j}", "chunk_id": f"doc-{j}", "parent_id": f"p{j}", "source": "kb",
                           "rank": j, "score": 1.0 - j / 10} for j in (1, 2)]
                key.append({"item": item, "app": "support-bot", "query_id": f"query-{day}-{i:02d}",
                            "query_type": "lexical", "language": "en", "pipeline_version": version, "cutoff_k": 2,
                            "ts": 1793613600.0 + day * 86400, "chunks": chunks})  # 2026-11-02T10:00Z on
                labels += [Label(batch_id="2026-W45", item=item, chunk=c["chunk"], judge="judge-1", grade=3 if i < good else 0) for c in chunks]
    (directory / "key.jsonl").write_text("\n".join(json.dumps(row) for row in key) + "\n")
    with Store(url, None, tables_of(FEATURES)) as store:
        Queue(store).record_batch(GROUP, "2026-W45", "2026-W45", 0.0, len(key), str(directory))
        Qrels(store).add(labels, "test")


def test_judged_precision_is_compared_where_both_versions_were_judged(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/judged.db"
    write(url, held("equivalent"))
    judged_batch(tmp_path, url)
    status, report = live(capsys, config(tmp_path, url))
    precision = next(row for row in report["metrics"] if row["metric"] == "precision_at_k")
    assert precision["gated"] and precision["outcome"] == "fail" and precision["interval"] == "paired"
    assert (precision["a"], precision["b"], precision["n"]) == pytest.approx((0.8, 0.3, 60))
    material = next(m for m in report["material"] if m["metric"] == "precision_at_k")
    assert (material["days"], material["threshold"]) == (3, pytest.approx(0.075))  # the largest of 0, .075, .075
    assert (status, report["verdict"]) == (1, "fail")
    assert any(r.startswith("precision_at_k fell by 0.5000") for r in report["reasons"])


@pytest.mark.parametrize("section, message", [
    ({"sample_rate": 0}, "live_gate.sample_rate: must be in (0, 1]"),
    ({"stable": "a"}, "live_gate.stable: give stable and candidate together"),
    ({"window_days": 10, "retention_days": 5}, "live_gate.retention_days: must be >= live_gate.window_days"),
    ({"min_days": 2}, "live_gate.min_days: must be >= 3"),
    ({"retention_days": 900000}, "live_gate.retention_days: must be at most 3650"),
    ({"window_days": 900000}, "live_gate.window_days: must be at most 3650"),
])
def test_bad_settings_are_one_line_and_exit_2(tmp_path, capsys, section, message):
    status, _, err = run(capsys, "check-config", config(tmp_path, f"sqlite:///{tmp_path}/x.db", **section))
    assert status == 2 and message in one_line_error(err)
