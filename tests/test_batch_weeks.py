"""When a week's batch can be built, and that a build is recorded whole or
not at all: `ragdrift batch build` and the weekly job on a real SQLite store.

A week is built once it has ended; the week still running only with
--partial, as a partial batch that never stands in the way of the week's
own. A build that fails at any step (the store, the resolver, the export
directory) leaves no batch directory, so a retry succeeds; a Label Studio
that fails leaves the batch recorded, for `ragdrift batch push`.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest
import yaml
from sqlalchemy import update

from agent.cli import main
from agent.core.sampling import UNIFORM
from agent.io.background.judgment import JudgmentJobs
from agent.io.background.periodic import new_scheduler
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES, Queue
from agent.jobs import batch
from tests.core.test_sampler import cand
from tests.test_judgments_cli import judged_jsonl

WEEK = "2026-W48"  # 2026-11-23 to 2026-11-30
WEDNESDAY = datetime(2026, 11, 25, 12, tzinfo=UTC).timestamp()
SUNDAY_NIGHT = datetime(2026, 11, 29, 23, 59, tzinfo=UTC).timestamp()
NEXT_MONDAY = datetime(2026, 11, 30, 7, tzinfo=UTC).timestamp()
SECRET = "the quarterly revenue of ACME was 12.4M"


def write_config(tmp_path: Path, **judgment) -> Path:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({
        "store": {"url": f"sqlite:///{tmp_path}/state.db"},
        "judgment": {"export_dir": str(tmp_path / "batches"), "budget": 3, "uniform_budget": 4, "salt": "weeks",
                     **judgment},
    }))
    return path


def add(config: Path, *event_ids: str, week: str = WEEK) -> None:
    queue = Queue(Store(load(config).store.url, None, TABLES))
    try:
        with queue.store.engine.begin() as conn:
            queue.writes("ragdrift", "t", 0, [cand(e, stratum=UNIFORM, week=week) for e in event_ids], (), ())(conn)
    finally:
        queue.store.close()


def recorded(config: Path, read):
    """What `read(queue)` finds in the config's store."""
    queue = Queue(Store(load(config).store.url, None, TABLES))
    try:
        return read(queue)
    finally:
        queue.store.close()


@pytest.fixture
def config(tmp_path):
    path = write_config(tmp_path)
    add(path, *(f"e{i}" for i in range(8)))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def batch_dirs(root: Path) -> list[str]:
    """Every entry of the export directory, temporary ones included."""
    return sorted(os.listdir(root)) if root.exists() else []


# --------------------------------------------------------------------------- which weeks


@pytest.mark.parametrize("week", ["2026-W99", "2026-W00", "2025-W53", "2099-W01", "0000-W01"])
def test_an_impossible_or_future_week_is_refused_and_nothing_recorded(config, tmp_path, week, capsys):
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", week)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert week in err and ("not an ISO week" in err or "has not begun" in err)
    assert batch_dirs(tmp_path / "batches") == []
    assert recorded(config, lambda q: q.recent_batches("ragdrift", 10)) == []


def test_a_running_week_needs_partial_and_never_blocks_the_weekly_batch(config, tmp_path):
    settings = load(config)
    queue = Queue(Store(settings.store.url, None, TABLES))
    try:
        with pytest.raises(batch.WeekError, match=r"has not ended .*--partial"):
            batch.build(settings, queue, WEEK, now=WEDNESDAY)
        first = batch.build(settings, queue, WEEK, partial=True, now=WEDNESDAY)
        assert first.partial and queue.batch_of("ragdrift", WEEK) is None
        assert queue.batch("ragdrift", first.batch_id)["partial"] is True
        with pytest.raises(batch.BatchExists, match="built already"):  # nothing new since
            batch.build(settings, queue, WEEK, partial=True, now=WEDNESDAY)
        add(config, "e8", "e9", "e10", "e11")
        second = batch.build(settings, queue, WEEK, partial=True, now=WEDNESDAY + 3600)
        assert second.batch_id != first.batch_id and second.partial
        # the report and the calibration see the newest partial batch of a week without its batch
        assert [b["batch_id"] for b in queue.recent_batches("ragdrift", 4)] == [second.batch_id]
        assert queue.last_batch("ragdrift") is None  # the missing-batch alert is not fooled

        weekly = batch.weekly(settings, queue, now=NEXT_MONDAY)
        assert weekly is not None and not weekly.partial
        assert queue.batch_of("ragdrift", WEEK)["batch_id"] == weekly.batch_id
        assert [b["batch_id"] for b in queue.recent_batches("ragdrift", 4)] == [weekly.batch_id]
        assert batch.weekly(settings, queue, now=NEXT_MONDAY) is None  # built once
        # every partial batch stays known: its labels can be imported and reported
        assert queue.batch("ragdrift", first.batch_id)["directory"] == str(first.directory)
    finally:
        queue.store.close()


def test_the_weekly_batch_of_unchanged_candidates_is_the_partial_batch(config):
    settings = load(config)
    queue = Queue(Store(settings.store.url, None, TABLES))
    try:
        partial = batch.build(settings, queue, WEEK, partial=True, now=SUNDAY_NIGHT)
        weekly = batch.weekly(settings, queue, now=NEXT_MONDAY)
        assert (weekly.batch_id, weekly.directory, weekly.partial) == (partial.batch_id, partial.directory, False)
        assert queue.batch("ragdrift", partial.batch_id)["partial"] is False  # now the week's batch
    finally:
        queue.store.close()


def test_partial_on_the_command_line(config, tmp_path, capsys):
    now = datetime.now(UTC).timestamp()
    week = batch.last_week(now + 7 * 86400)  # the week running now
    add(config, "r1", "r2", week=week)
    code, _, err = run(capsys, "batch", "build", "--config", str(config), "--week", week)
    assert code == 2 and f"{week} has not ended" in err and "--partial" in err and err.count("\n") == 1
    code, out, _ = run(capsys, "batch", "build", "--config", str(config), "--week", week, "--partial")
    assert code == 0 and f"2 items for {week} (partial" in out
    # --partial changes nothing for a week that has ended: its batch, recorded as the week's
    code, out, _ = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, "--partial")
    assert code == 0 and "(partial" not in out
    assert recorded(config, lambda q: q.batch_of("ragdrift", WEEK)) is not None


def test_a_second_build_of_a_week_is_refused_naming_its_batch(config, tmp_path, capsys):
    code, out, _ = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK)
    assert code == 0
    first = recorded(config, lambda q: q.batch_of("ragdrift", WEEK))
    add(config, "late1", "late2", "late3")  # the candidates changed: another batch id
    for out_dir in ((), ("--out", str(tmp_path / "elsewhere"))):
        code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, *out_dir)
        assert code == 2 and out == ""
        assert err == (f"ragdrift: error: {WEEK} already has its batch {first['batch_id']}, in {first['directory']}: "
                       "a week's batch is built once\n")
    assert recorded(config, lambda q: q.batch_of("ragdrift", WEEK)) == first
    assert batch_dirs(tmp_path / "batches") == [first["batch_id"]] and batch_dirs(tmp_path / "elsewhere") == []


# --------------------------------------------------------------------------- recorded whole or not at all


def test_a_read_only_store_leaves_no_batch_and_a_retry_succeeds(config, tmp_path, capsys):
    doc = yaml.safe_load(config.read_text())
    read_only = tmp_path / "read-only.yaml"
    read_only.write_text(yaml.safe_dump({**doc, "store": {"url": f"sqlite:///file:{tmp_path}/state.db?mode=ro&uri=true"}}))
    code, out, err = run(capsys, "batch", "build", "--config", str(read_only), "--week", WEEK)
    assert code == 2 and out == "" and err == "ragdrift: error: cannot record the batch: OperationalError: attempt to write a readonly database\n"
    assert batch_dirs(tmp_path / "batches") == []
    code, out, _ = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK)
    assert code == 0
    (name,) = batch_dirs(tmp_path / "batches")
    assert recorded(config, lambda q: q.batch_of("ragdrift", WEEK))["batch_id"] == name


def test_a_lone_surrogate_from_the_resolver_leaves_no_batch(tmp_path, capsys):
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"kind": "chunk", "id": "c1", "text": SECRET + "\ud800"}) + "\n")
    config = write_config(tmp_path, resolver={"kind": "file", "path": str(texts)})
    add(config, *(f"e{i}" for i in range(8)))
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "lone surrogate" in err and SECRET not in err
    assert batch_dirs(tmp_path / "batches") == []
    texts.write_text(json.dumps({"kind": "chunk", "id": "c1", "text": SECRET}) + "\n")
    code, _, _ = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK)
    assert code == 0 and len(batch_dirs(tmp_path / "batches")) == 1


def test_a_damaged_candidate_row_is_named_never_quoted(config, tmp_path, capsys):
    with Store(load(config).store.url, None, TABLES) as store:
        c = Queue(store).candidates.c
        with store.engine.begin() as conn:
            conn.execute(update(Queue(store).candidates).where(c.event_id == "e3").values(
                candidate=json.dumps({"event_id": SECRET, "week": 7}).encode()))
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "damaged candidate row" in err and "event 'e3'" in err and "partition 0" in err and SECRET not in err
    assert batch_dirs(tmp_path / "batches") == []


def test_a_relative_out_is_recorded_as_an_absolute_path(config, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, _ = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, "--out", "rel/batches")
    assert code == 0
    row = recorded(config, lambda q: q.batch_of("ragdrift", WEEK))
    assert row["directory"] == str(tmp_path / "rel" / "batches" / row["batch_id"])
    judged = tmp_path / "judged.jsonl"
    judged.write_text(judged_jsonl([json.loads(line) for line in
                                    Path(row["directory"], "items.jsonl").read_text().splitlines()]))
    monkeypatch.chdir(tmp_path.parent)  # import and report read the batch from anywhere
    code, _, err = run(capsys, "judgments", "import", str(judged), "--config", str(config))
    assert code == 0, err
    code, out, err = run(capsys, "judgments", "report", "--config", str(config), "--format", "json")
    assert code == 0 and row["batch_id"] in out, err


@pytest.mark.parametrize("kind", ["file", "dangling symlink", "proc"])
def test_an_out_that_cannot_hold_batches_is_one_line(config, tmp_path, kind, capsys):
    out_dir = {"file": tmp_path / "a-file", "dangling symlink": tmp_path / "dangling",
               "proc": Path("/proc/ragdrift-batches")}[kind]
    if kind == "file":
        out_dir.write_text("not a directory")
    elif kind == "dangling symlink":
        out_dir.symlink_to(tmp_path / "nowhere")
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, "--out", str(out_dir))
    reason = {"file": "not a directory", "dangling symlink": "a symlink that leads nowhere", "proc": ""}[kind]
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"ragdrift: error: {out_dir}: cannot use it as the export directory: {reason}")
    assert recorded(config, lambda q: q.batch_of("ragdrift", WEEK)) is None


# --------------------------------------------------------------------------- Label Studio: a step of its own


def closed_port_url() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    server.server_close()  # nothing listens there now
    return url


def test_an_unreachable_label_studio_keeps_the_batch_and_names_push(config, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", "secret-token-value-0123456789")
    url = closed_port_url()
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, "--label-studio-url", url)
    row = recorded(config, lambda q: q.batch_of("ragdrift", WEEK))
    assert code == 2 and row is not None and out.startswith(f"{row['batch_id']}: ")
    assert err.count("\n") == 1 and "no answer" in err and f"`ragdrift batch push {row['batch_id']}`" in err
    assert "secret-token-value" not in err
    directory = Path(row["directory"])
    assert (directory / "label-studio" / "tasks.json").exists() and (directory / "key.jsonl").exists()
    with_password = url.replace("http://", "http://judge:hunter2-password@")
    code, _, err = run(capsys, "batch", "push", row["batch_id"], "--config", str(config),
                       "--label-studio-url", with_password)
    assert code == 2 and "no answer" in err and err.count("\n") == 1 and "hunter2" not in err
    code, _, err = run(capsys, "batch", "push", "2026-W48-00000000", "--config", str(config), "--label-studio-url", url)
    assert code == 2 and err == "ragdrift: error: 2026-W48-00000000 is not a known batch\n"
    code, _, err = run(capsys, "batch", "push", row["batch_id"], "--config", str(config))
    assert code == 2 and "no Label Studio to push to" in err


def test_the_weekly_job_logs_a_failure_in_one_line(tmp_path, caplog):
    (tmp_path / "batches").write_text("a file where the export directory goes")
    config = write_config(tmp_path, label_studio={"url": closed_port_url()})
    add(config, *(f"e{i}" for i in range(8)), week=batch.last_week(datetime.now(UTC).timestamp()))
    settings = load(config)
    with Store(settings.store.url, None, (*TABLES, *QRELS)) as store:
        judging = JudgmentJobs(settings, Queue(store), Qrels(store), top_n=5, scheduler=new_scheduler(), weekly=batch.scheduled)
        caplog.set_level(logging.INFO, "ragdrift.batch")
        judging.weekly()
        (failed,) = [r for r in caplog.records if r.getMessage() == "weekly judgment batch failed"]
        assert failed.exc_info is None and "cannot use it as the export directory" in failed.error
        assert judging.status.failures == 1

        # the files go elsewhere; Label Studio is down (and no token): the batch is recorded, the push named
        os.remove(tmp_path / "batches")
        caplog.clear()
        judging.weekly()
        (failed,) = [r for r in caplog.records if r.getMessage() == "weekly judgment batch failed"]
        assert failed.exc_info is None and "ragdrift batch push" in failed.error
        assert judging.status.failures == 2 and judging.status.last_batch is not None


def test_a_batch_split_by_pipeline_version_says_so_and_keeps_the_version_from_judges(tmp_path, capsys):
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({
        "store": {"url": f"sqlite:///{tmp_path}/state.db"},
        "windows": {"by_pipeline_version": True},
        "judgment": {"export_dir": str(tmp_path / "batches"), "budget": 2, "budgets": {"app|lexical": 1}, "salt": "weeks"},
    }))
    rows = [msgspec.structs.replace(cand(f"{v}-{i}", stratum=f"app|lexical|{v}"), pipeline_version=v)
            for v in ("stable-7", "canary-8") for i in range(3)]
    queue = Queue(Store(load(path).store.url, None, TABLES))
    try:
        with queue.store.engine.begin() as conn:
            queue.writes("ragdrift", "t", 0, rows, (), ())(conn)
    finally:
        queue.store.close()
    code, _, err = run(capsys, "batch", "build", "--config", str(path), "--week", WEEK)
    assert code == 0, err
    [built] = (tmp_path / "batches").iterdir()
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest["configuration"]["by_pipeline_version"] is True
    assert {s: v["sampled"] for s, v in manifest["strata"].items()} == {"app|lexical|canary-8": 1, "app|lexical|stable-7": 1}
    key = [json.loads(line) for line in (built / "key.jsonl").read_text().splitlines()]
    assert sorted(row["pipeline_version"] for row in key) == ["canary-8", "stable-7"]
    judged = (built / "items.jsonl").read_text() + (built / "items.csv").read_text()
    assert "canary" not in judged and "stable" not in judged
    (tmp_path / "plain").mkdir()
    plain = write_config(tmp_path / "plain")
    assert "by_pipeline_version" not in batch.config_of(load(plain)).configuration
