"""The commands that open the agent's store: only the agent creates one, a
missing or foreign store is an error naming it, store failures after opening
(a damaged row, a damaged table, a locked file) end with one line, and a
reader that closes the pipe ends a command quietly."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml
from sqlalchemy import create_engine, inspect

from agent.io.store.calibrations import TABLES as CALIBRATIONS
from agent.io.store.database import Store
from agent.io.store.drift import TABLES as DRIFT
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.queue import TABLES as QUEUE
from agent.io.store.queue import Queue
from tests.test_cli import clean_environment, one_line_error, run  # noqa: F401 - clean_environment is autouse
from tests.test_queues_cli import incident

ROOT = Path(__file__).resolve().parent.parent
ALL_TABLES = (*QUEUE, *QRELS, *CALIBRATIONS, *DRIFT)  # what `ragdrift run` creates
# Every command that opens the store, with its other required arguments.
STORE_COMMANDS = {
    "security list": ["security", "list"],
    "judgments report": ["judgments", "report"],
    "judgments calibrate": ["judgments", "calibrate"],
    "drift": ["drift"],
    "baseline list": ["baseline", "list"],
    "baseline show": ["baseline", "show", "launch"],
    "baseline freeze": ["baseline", "freeze", "--name", "b", "--from", "2026-03-01", "--to", "2026-03-02"],
    "batch build": ["batch", "build", "--week", "2026-W48"],
    "batch push": ["batch", "push", "2026-W48-6c27fe2b", "--label-studio-url", "http://127.0.0.1:9"],
}


def config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": url}, "judgment": {"export_dir": str(tmp_path / "batches")}}))
    return path


def agent_store(url: str, incidents=()) -> None:
    """The store as `ragdrift run` leaves it, holding these security incidents."""
    store = Store(url, None, ALL_TABLES)
    with store.engine.begin() as conn:
        Queue(store).writes("ragdrift", "t", 0, (), (), incidents)(conn)
    store.close()


# -- only the agent creates a store ------------------------------------------------------


@pytest.mark.parametrize("command", STORE_COMMANDS.values(), ids=STORE_COMMANDS.keys())
def test_a_mistyped_store_path_is_an_error_and_creates_nothing(capsys, tmp_path, command):
    agent_store(f"sqlite:///{tmp_path}/state.db", [incident("a1", 1_764_000_000.0)])
    typo = tmp_path / "stat.db"
    status, out, err = run(capsys, *command, "--config", str(config(tmp_path, f"sqlite:///{typo}")))
    assert status == 2 and out == ""
    line = one_line_error(err)
    assert f"no ragdrift store at {typo}: no such file" in line
    assert not typo.exists()


@pytest.mark.parametrize("command", STORE_COMMANDS.values(), ids=STORE_COMMANDS.keys())
def test_without_a_config_the_default_store_must_exist(capsys, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(capsys, *command)
    assert status == 2 and "no ragdrift store at" in one_line_error(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", STORE_COMMANDS.values(), ids=STORE_COMMANDS.keys())
def test_a_database_without_ragdrift_tables_is_an_error_and_stays_untouched(capsys, tmp_path, command):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER)")
    status, _, err = run(capsys, *command, "--config", str(config(tmp_path, f"sqlite:///{other}")))
    assert status == 2
    assert "the database holds no ragdrift tables" in one_line_error(err) and str(other) in err
    with sqlite3.connect(other) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["orders"]


def test_a_postgresql_database_without_ragdrift_tables_is_named_without_its_password(capsys, tmp_path, pg_url):
    with_password = pg_url.replace("://root@", "://root:Sup3r-Secret-pw@")
    status, _, err = run(capsys, "security", "list", "--config", str(config(tmp_path, with_password)))
    assert status == 2
    line = one_line_error(err)
    assert "no ragdrift store at" in line and "the database holds no ragdrift tables" in line
    assert pg_url.rsplit("/", 1)[1] in line and "Sup3r-Secret-pw" not in line
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []
    finally:
        engine.dispose()


def test_read_only_commands_do_not_add_tables_a_store_lacks(capsys, tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    Store(url, None, DRIFT).close()  # a store made before the judgment queue existed
    status, _, err = run(capsys, "security", "list", "--config", str(config(tmp_path, url)))
    line = one_line_error(err)
    assert status == 2 and " lacks ragdrift_" in line and ", ragdrift_security_queue: " in line
    with sqlite3.connect(tmp_path / "state.db") as conn:
        assert "ragdrift_security_queue" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}


def test_the_agents_store_reads_as_before(capsys, tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    agent_store(url, [incident("a1", 1_764_000_000.0)])
    status, out, err = run(capsys, "security", "list", "--config", str(config(tmp_path, url)), "--format", "json")
    assert status == 0 and err == "" and [orjson.loads(x)["event_id"] for x in out.splitlines()] == ["a1"]


# -- failures after opening ----------------------------------------------------------------


def test_a_damaged_security_row_is_skipped_counted_and_named(capsys, tmp_path):
    url = f"sqlite:///{tmp_path}/state.db"
    agent_store(url, [incident(f"a{i}", 1_764_000_000.0 + i) for i in range(4)])
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("UPDATE ragdrift_security_queue SET incident = ? WHERE event_id = 'a1'", (b'{"event_id": "a1", "ts": tru',))
        conn.execute("UPDATE ragdrift_security_queue SET incident = ? WHERE event_id = 'a2'", (b'{"secret": "payload"}',))
    for fmt in ("table", "json"):
        status, out, err = run(capsys, "security", "list", "--config", str(config(tmp_path, url)), "--format", fmt)
        assert status == 1
        assert "a0" in out and "a3" in out and "a1" not in out and "a2" not in out
        line = one_line_error(err)
        assert "2 unreadable security queue row(s) skipped, event ids: a1, a2" in line
        assert "payload" not in line and "tru" not in line


@pytest.mark.parametrize("limit", ["-1", "-5"])
def test_a_negative_limit_is_a_usage_error(capsys, tmp_path, limit):
    url = f"sqlite:///{tmp_path}/state.db"
    agent_store(url, [incident("a1", 1_764_000_000.0)])
    status, out, err = run(capsys, "security", "list", "--config", str(config(tmp_path, url)), "--limit", limit)
    assert status == 2 and out == ""
    assert f"--limit must be at least 0, got {limit}" in one_line_error(err)


def test_a_negative_limit_on_postgresql_is_a_usage_error(capsys, tmp_path, pg_url):
    agent_store(pg_url, [incident("a1", 1_764_000_000.0)])
    status, _, err = run(capsys, "security", "list", "--config", str(config(tmp_path, pg_url)), "--limit", "-1")
    assert status == 2 and "--limit must be at least 0" in one_line_error(err)
    status, out, _ = run(capsys, "security", "list", "--config", str(config(tmp_path, pg_url)), "--limit", "0")
    assert status == 0 and len(out.splitlines()) == 1  # the header only


@pytest.mark.parametrize(("command", "flag"), [
    (["judgments", "report", "--seed", "-1"], "--seed"),
    (["judgments", "pull", "--label-studio-url", "http://127.0.0.1:9", "--project", "0"], "--project"),
    (["replay", "--max-bytes", "0", "-"], "--max-bytes"),
])
def test_integer_arguments_out_of_range_are_usage_errors(capsys, command, flag):
    status, _, err = run(capsys, *command)
    assert status == 2 and flag in one_line_error(err)


@pytest.mark.parametrize(("command", "table"), [
    (["security", "list"], "ragdrift_security_queue"),
    (["baseline", "list"], "ragdrift_baselines"),
])
def test_a_damaged_table_ends_a_read_with_one_line_naming_the_store(capsys, tmp_path, command, table):
    url = f"sqlite:///{tmp_path}/state.db"
    agent_store(url)
    with sqlite3.connect(tmp_path / "state.db") as conn:  # what a botched manual migration leaves
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"CREATE TABLE {table} (group_id TEXT, name TEXT, version TEXT, event_id TEXT)")
    status, out, err = run(capsys, *command, "--config", str(config(tmp_path, url)))
    assert status == 2 and out == ""
    line = one_line_error(err)
    assert f"cannot read {url}" in line and "no such column" in line


@pytest.mark.parametrize("command", STORE_COMMANDS.values(), ids=STORE_COMMANDS.keys())
def test_a_locked_sqlite_store_says_so_and_names_the_file(capsys, tmp_path, command):
    path = tmp_path / "state.db"
    agent_store(f"sqlite:///{path}", [incident("a1", 1_764_000_000.0)])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process writing, as far as SQLite tells
    try:
        status, _, err = run(capsys, *command, "--config", str(config(tmp_path, f"sqlite:///{path}?timeout=0.05")))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert status == 2
    assert f"the store is locked: another process holds the SQLite file {path}" in one_line_error(err)


# -- a closed standard output --------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["generate", "--events", "2000"],
    ["security", "list"],
    ["security", "list", "--format", "json"],
    ["check-config", "CONFIG"],
], ids=["generate", "security list", "security list json", "check-config"])
def test_a_closed_stdout_ends_the_command_quietly(tmp_path, command):
    """`ragdrift ... | head -1`: the reader goes away; no traceback, the status of SIGPIPE."""
    url = f"sqlite:///{tmp_path}/state.db"
    agent_store(url, [incident(f"a{i}", 1_764_000_000.0 + i) for i in range(50)])
    path = config(tmp_path, url)
    args = [str(path) if a == "CONFIG" else a for a in command]
    if command[0] == "security":
        args += ["--config", str(path)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGDRIFT_")}
    env["PYTHONPATH"] = str(ROOT)
    env["RAGDRIFT_JUDGMENT__SALT"] = "a-salt"  # check-config warns without one
    child = subprocess.Popen([sys.executable, "-m", "agent.cli", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    child.stdout.close()  # before the command writes anything: its first write meets a closed pipe
    err = child.stderr.read()
    assert child.wait(timeout=120) == 141
    assert err == b""
