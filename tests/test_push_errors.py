"""`ragdrift batch push` and `batch build --label-studio-url` against a hostile
server (tests/hostile_http.py) and a damaged batch: whatever comes, the
command ends with one line naming the problem and exit status 2, never
quotes the batch's text or what the server answered, and its requests share
one deadline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.core.sampling import UNIFORM, week_bounds
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.queue import TABLES, Queue
from agent.jobs import batch
from tests.core.test_sampler import cand
from tests.hostile_http import HostileServer

WEEK = "2026-W48"
WEEK_ENDED = week_bounds(WEEK)[1] + 3600
JUDGED = "judged query text"  # what the resolver gives the batch: it must never reach an error
TOKEN = "0123456789abcdef0123456789abcdef01234567"
PASSWORD = "ls-password-value"
GOOD = json.dumps({"id": 7, "task_count": 8, "task_ids": list(range(1, 9)), "queries": {}, "chunks": {}})


@pytest.fixture
def setup(tmp_path):
    """A configuration whose store holds eight candidates of WEEK, a resolver
    file giving their query text, and a token file."""
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"kind": "query", "id": "q0000000", "text": JUDGED}) + "\n")
    config = tmp_path / "ragdrift.yaml"
    config.write_text(yaml.safe_dump({
        "store": {"url": f"sqlite:///{tmp_path}/state.db"},
        "judgment": {"export_dir": str(tmp_path / "batches"), "salt": "push",
                     "resolver": {"kind": "file", "path": str(texts)}}}))
    queue = Queue(Store(load(config).store.url, None, TABLES))
    try:
        with queue.store.engine.begin() as conn:
            queue.writes("ragdrift", "t", 0, [cand(f"e{i}", stratum=UNIFORM, week=WEEK) for i in range(8)], (), ())(conn)
    finally:
        queue.store.close()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    return config, token


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def built(capsys, config: Path, *extra: str) -> tuple[str, Path]:
    """A recorded batch of WEEK: its id and directory."""
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, *extra)
    assert code == 0, err
    batch_id = out.split(":")[0]
    return batch_id, Path(out.rsplit(" in ", 1)[1].strip())


def push(capsys, config: Path, token: Path, batch_id: str, url: str, *extra: str) -> tuple[int, str]:
    code, out, err = run(capsys, "batch", "push", batch_id, "--config", str(config), "--label-studio-url", url,
                         "--label-studio-token-file", str(token), *extra)
    assert out == "" and len(err.splitlines()) == 1, err  # one line, no traceback
    assert JUDGED not in err and TOKEN not in err and PASSWORD not in err
    return code, err


def project(config: Path, batch_id: str):
    queue = Queue(Store(load(config).store.url, None, TABLES))
    try:
        return queue.batch("ragdrift", batch_id)["project"]
    finally:
        queue.store.close()


# --------------------------------------------------------------------------- the URL


@pytest.mark.parametrize("url", ["file://{tasks}", "ftp://127.0.0.1:1/tasks.json", "data:,%7B%7D",
                                 "http:///api", "127.0.0.1:8080", "FILE://{tasks}"])
def test_only_an_http_url_with_a_host_is_pushed_to(capsys, setup, url):
    config, token = setup
    batch_id, directory = built(capsys, config, "--format", "label-studio")
    url = url.format(tasks=directory / "label-studio" / "tasks.json")
    code, err = push(capsys, config, token, batch_id, url)
    assert code == 2 and "--label-studio-url must be an http:// or https:// URL with a host" in err
    code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, "--partial",
                         "--label-studio-url", url, "--label-studio-token-file", str(token))
    assert code == 2 and out == "" and "--label-studio-url must be an http:// or https:// URL with a host" in err
    code, out, err = run(capsys, "judgments", "pull", "--config", str(config), "--project", "1",
                         "--label-studio-url", url, "--label-studio-token-file", str(token))
    assert code == 2 and out == "" and "--label-studio-url must be an http:// or https:// URL with a host" in err
    assert JUDGED not in err


@pytest.mark.parametrize(("behaviour", "options", "said"), [
    ("json", {"body": f"<html>{JUDGED}</html>"}, "POST /api/projects/: unexpected answer from http://127.0.0.1:"),
    ("echo", {"code": 400}, "POST /api/projects/: HTTP 400 (an answer of "),
    ("status", {"code": 500}, "POST /api/projects/: HTTP 500 (an answer of 21 bytes, not shown)"),
])
def test_an_error_never_quotes_the_answer(capsys, setup, behaviour, options, said):
    config, token = setup
    batch_id, _ = built(capsys, config, "--format", "label-studio")
    with HostileServer(behaviour, **options) as server:
        code, err = push(capsys, config, token, batch_id, server.url)
    assert code == 2 and said in err and "refused" not in err


# --------------------------------------------------------------------------- a damaged batch


@pytest.mark.parametrize("damage", [
    lambda item: {k: v for k, v in item.items() if k != "chunks"},
    lambda item: {k: v for k, v in item.items() if k != "query"},
    lambda item: {**item, "chunks": []},
    lambda item: {**item, "query": None},
    lambda item: [item],
])
def test_a_damaged_items_file_is_one_line_naming_it(capsys, setup, damage):
    config, token = setup
    batch_id, directory = built(capsys, config)
    items = directory / "items.jsonl"
    rows = [json.loads(line) for line in items.read_text().splitlines()]
    items.write_text("".join(json.dumps(row) + "\n" for row in [rows[0], damage(rows[1]), *rows[2:]]))
    with HostileServer("json", body=GOOD) as server:
        code, err = push(capsys, config, token, batch_id, server.url)
    assert code == 2 and f"cannot push {items}: item 2 is not a batch item" in err
    assert server.requests == [] and project(config, batch_id) is None


@pytest.mark.parametrize("tasks", ["{}", "[1]", '[{"data": "x"}]', '[{"data": {}, "meta": []}]',
                                   '[{"data": {}, "meta": {"judges": "2"}}]', '[{"data": {}, "meta": {"judges": 1e400}}]'])
def test_a_damaged_tasks_file_is_one_line_naming_it(capsys, setup, tasks):
    config, token = setup
    batch_id, directory = built(capsys, config, "--format", "label-studio")
    path = directory / "label-studio" / "tasks.json"
    path.write_text(tasks)
    with HostileServer("json", body=GOOD) as server:
        code, err = push(capsys, config, token, batch_id, server.url)
    assert code == 2 and str(path) in err
    assert server.requests == [] and project(config, batch_id) is None


# --------------------------------------------------------------------------- the server's answers


@pytest.mark.parametrize("answer", ["{}", "[]", '{"id": "abc"}', '{"id": null}', '{"id": 1e400}', '{"id": true}',
                                    '{"id": 7, "task_count": "8"}', '{"id": 7, "task_count": 8, "task_ids": 5}',
                                    '{"id": 7, "task_count": 8, "task_ids": [null]}'])
def test_an_answer_of_the_wrong_shape_is_unexpected_naming_the_server_without_credentials(capsys, setup, answer):
    config, token = setup
    batch_id, _ = built(capsys, config)
    with HostileServer("json", body=answer) as server:
        url = server.url.replace("http://", f"http://judge:{PASSWORD}@")
        code, err = push(capsys, config, token, batch_id, url)
    assert code == 2 and f"unexpected answer from http://judge:***@127.0.0.1:{server.port}" in err
    assert project(config, batch_id) is None


# --------------------------------------------------------------------------- one deadline


def test_a_push_stops_at_its_deadline_though_each_request_is_quick(capsys, setup):
    """Each answer takes 0.4 s, well within a request's own 60 s; a push
    makes at least three requests, and has one second for all of them."""
    config, token = setup
    batch_id, _ = built(capsys, config)
    with HostileServer("slow", seconds=0.4, body=GOOD) as server:
        code, err = push(capsys, config, token, batch_id, server.url, "--timeout", "1")
    assert code == 2 and "the command's deadline of 1 s" in err
    assert project(config, batch_id) is None


def test_a_build_shares_its_deadline_between_the_resolver_and_label_studio(capsys, setup):
    config, token = setup
    with HostileServer("slow", seconds=0.4, body=GOOD) as server:
        doc = yaml.safe_load(config.read_text())
        doc["judgment"]["resolver"] = {"kind": "http", "url": server.url}
        config.write_text(yaml.safe_dump(doc))
        code, out, err = run(capsys, "batch", "build", "--config", str(config), "--week", WEEK, "--timeout", "1",
                             "--label-studio-url", server.url, "--label-studio-token-file", str(token))
    assert code == 2 and "the command's deadline of 1 s" in err and "ragdrift batch push" in err
    assert len(err.splitlines()) == 1 and out.count("\n") == 1  # the batch is recorded, and said so


def test_the_weekly_job_has_the_configured_deadline(setup):
    config, token = setup
    with HostileServer("slow", seconds=0.4, body=GOOD) as server:
        doc = yaml.safe_load(config.read_text())
        doc["judgment"] |= {"batch_timeout_seconds": 1,
                            "label_studio": {"url": server.url, "token_file": str(token)}}
        config.write_text(yaml.safe_dump(doc))
        settings = load(config)
        queue = Queue(Store(settings.store.url, None, TABLES))
        try:
            with pytest.raises(batch.NotPushed, match="the command's deadline of 1 s"):
                batch.weekly(settings, queue, now=WEEK_ENDED)
        finally:
            queue.store.close()
