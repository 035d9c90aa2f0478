"""`ragdrift batch build`, `ragdrift security list` and the queues' metrics,
on a real SQLite store."""

from __future__ import annotations

import json
import sqlite3

import pytest
import yaml
from prometheus_client import CollectorRegistry

from agent.cli import main
from agent.core.escape import plain
from agent.core.sampling import UNIFORM
from agent.core.security import Incident
from agent.io.background.judgment import JudgmentCollector, JudgmentJobs
from agent.io.background.periodic import new_scheduler
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES, Queue
from tests.core.test_sampler import cand

WEEK = "2026-W48"


def incident(event_id: str, ts: float) -> Incident:
    return Incident(event_id=event_id, ts=ts, app="support", query_id="q0000000", tenant="acme",
                    claims_present=True, pipeline_version="v1", results=5,
                    unauthorized=(("c9", "wiki", 2, "globex", True),))


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({
        "store": {"url": f"sqlite:///{tmp_path}/state.db"},
        "judgment": {"export_dir": str(tmp_path / "batches"), "budget": 3, "uniform_budget": 4, "salt": "s"},
    }))
    queue = Queue(Store(load(path).store.url, None, TABLES))
    rows = [cand(f"e{i}", w=1 + i % 3, stratum="support|lexical", week=WEEK) for i in range(10)]
    rows += [cand(f"e{i}", stratum=UNIFORM, week=WEEK) for i in range(10)]
    with queue.store.engine.begin() as conn:
        queue.writes("ragdrift", "t", 0, rows, (), [incident("a1", 1_764_000_000.0), incident("a2", 1_764_100_000.0)])(conn)
    yield path
    queue.store.close()


def test_batch_build_writes_a_batch_once(config, tmp_path, capsys):
    assert main(["batch", "build", "--config", str(config), "--week", WEEK]) == 0
    out = capsys.readouterr().out
    (directory,) = (tmp_path / "batches").iterdir()
    assert f"{directory.name}: 7 items for {WEEK} in {directory}" in out
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["strata"]["support|lexical"]["k"] == 3 and manifest["strata"][UNIFORM]["k"] == 4
    assert main(["batch", "build", "--config", str(config), "--week", WEEK]) == 2
    assert f"already has its batch {directory.name}" in capsys.readouterr().err


def test_building_a_week_twice_gives_the_same_batch(config, tmp_path):
    doc = yaml.safe_load(config.read_text())
    copy = tmp_path / "copy.yaml"  # the same candidates in a store of their own
    (tmp_path / "copy.db").write_bytes((tmp_path / "state.db").read_bytes())
    copy.write_text(yaml.safe_dump({**doc, "store": {"url": f"sqlite:///{tmp_path}/copy.db"}}))
    for path, out in ((config, "one"), (copy, "two")):
        assert main(["batch", "build", "--config", str(path), "--week", WEEK, "--out", str(tmp_path / out)]) == 0
    (one,), (two,) = (tmp_path / "one").iterdir(), (tmp_path / "two").iterdir()
    assert one.name == two.name
    for name in ("manifest.json", "items.jsonl", "items.csv", "key.jsonl", "regression.jsonl"):
        assert (one / name).read_bytes() == (two / name).read_bytes()


def test_without_a_salt_no_batch_is_built(config, tmp_path, capsys):
    doc = yaml.safe_load(config.read_text())
    doc["judgment"]["salt"] = ""
    config.write_text(yaml.safe_dump(doc))
    assert main(["batch", "build", "--config", str(config), "--week", WEEK]) == 2
    err = capsys.readouterr().err
    assert "judgment.salt is empty" in err and err.count("\n") == 1
    assert not (tmp_path / "batches").exists()


@pytest.mark.parametrize("week", ["2026-48", "2026W48", "last", "2026-W48/../x"])
def test_a_bad_week_is_a_usage_error(config, week, capsys):
    assert main(["batch", "build", "--config", str(config), "--week", week]) == 2
    assert "ISO week" in capsys.readouterr().err


def test_security_list(config, capsys):
    assert main(["security", "list", "--config", str(config), "--format", "json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [x["event_id"] for x in listed] == ["a1", "a2"]
    assert main(["security", "list", "--config", str(config), "--since", "2025-11-25T00:00:00Z"]) == 0
    table = capsys.readouterr().out
    assert "a2" in table and "a1" not in table and "c9" in table
    assert main(["security", "list", "--config", str(config), "--since", "yesterday"]) == 2


FORGED = "x\n2026-01-01T00:00:00Z  forged  e0\x1b[2J"  # a row of its own, then an escape sequence


def test_security_list_writes_stored_texts_on_their_line(config, tmp_path, capsys):
    """An app name, event and chunk ids from the store, and an unreadable row's event id, stay on their line."""
    forged = Incident(event_id=FORGED, ts=1_764_200_000.0, app=FORGED, query_id="q0000000", tenant="acme",
                      claims_present=True, pipeline_version="v1", results=5,
                      unauthorized=((FORGED, "wiki", 2, "globex", True),))
    queue = Queue(Store(load(config).store.url, None, TABLES))
    with queue.store.engine.begin() as conn:
        queue.writes("ragdrift", "t", 0, (), (), [forged])(conn)
    queue.store.close()
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("UPDATE ragdrift_security_queue SET event_id = ?, incident = ? WHERE event_id = 'a1'",
                     (FORGED + "!", b'{"event_id": '))
    assert main(["security", "list", "--config", str(config)]) == 1
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and len(out.splitlines()) == 3 and len(err.splitlines()) == 1  # header, a2, forged
    assert out.count(plain(FORGED)) == 3 and err.endswith(f"event ids: {plain(FORGED)}!\n")


def test_the_queues_figures_as_metrics(config):
    settings = load(config)
    store = Store(settings.store.url, None, (*TABLES, *QRELS))
    queue = Queue(store)
    judging = JudgmentJobs(settings, queue, Qrels(store), top_n=1, scheduler=new_scheduler())
    registry = CollectorRegistry()
    registry.register(JudgmentCollector(judging))
    assert registry.get_sample_value("ragdrift_judgment_batch_failures_total") == 0
    assert registry.get_sample_value("ragdrift_judgment_batch_last_timestamp_seconds") is None
    queue.record_batch("ragdrift", WEEK, "b", 1_764_000_000.0, 7, "/x")
    judging.refresh()
    assert registry.get_sample_value("ragdrift_security_queue_events") == 2
    assert registry.get_sample_value("ragdrift_judgment_batch_last_timestamp_seconds") == 1_764_000_000.0
    assert registry.get_sample_value("ragdrift_judgment_batch_last_items") == 7
    queue.store.close()


def test_resolved_text_stays_in_the_batch_directory(config, tmp_path, capsys, caplog):
    secret = "Q3 revenue of ACME: 12.4M"
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"kind": "query", "id": "q0000000", "text": secret}) + "\n"
                     + json.dumps({"kind": "chunk", "id": "c1", "text": secret}) + "\n")
    doc = yaml.safe_load(config.read_text())
    doc["judgment"]["resolver"] = {"kind": "file", "path": str(texts)}
    config.write_text(yaml.safe_dump(doc))
    caplog.set_level("DEBUG")
    assert main(["batch", "build", "--config", str(config), "--week", WEEK, "--format", "label-studio"]) == 0
    (directory,) = (tmp_path / "batches").iterdir()
    holding = {p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file()
               and secret in p.read_text()}
    assert holding == {"items.jsonl", "items.csv", "label-studio/tasks.json"}
    assert secret.encode() not in (tmp_path / "state.db").read_bytes()
    out = capsys.readouterr()
    assert secret not in out.out + out.err + caplog.text
