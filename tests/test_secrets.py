"""No secret in any output: a known secret is planted in every place one
lives (the Label Studio token, the judgment salt, the store's password in
its userinfo and its query, a resolver's and Label Studio's URL credentials,
a Kafka password), every failure path that can be driven is driven (a bad
token file, Label Studio unreachable, failing, redirecting elsewhere, a bad
store URL, an unreachable store, a salt of the wrong type, a failing
resolver, check-config, the weekly job inside the agent logging JSON), and
no stdout, stderr, log line or file written holds any of them."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest
import yaml

from agent.cli import main
from agent.core.sampling import UNIFORM
from agent.io import logs
from agent.io.background.judgment import JudgmentJobs
from agent.io.background.periodic import new_scheduler
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES, Queue
from agent.jobs.batch import scheduled
from tests.core.test_sampler import cand
from tests.hostile_http import HostileServer
from tests.services import free_port

WEEK = "2026-W48"
TOKEN = "5ec2e7000000000000000000000000000000a0ke"
SALT = "salt-5ec2e7-value"
STORE_PASSWORD = "store-5ec2e7-password"
STORE_QUERY_PASSWORD = "store-5ec2e7-query-password"
RESOLVER_PASSWORD = "resolver-5ec2e7-password"
RESOLVER_TOKEN = "resolver-5ec2e7-token"
LS_PASSWORD = "ls-5ec2e7-password"
LS_QUERY_TOKEN = "ls-5ec2e7-query-token"
KAFKA_PASSWORD = "kafka-5ec2e7-password"
NUMERIC_SALT = 590227123457
SECRETS = (TOKEN, SALT, STORE_PASSWORD, STORE_QUERY_PASSWORD, RESOLVER_PASSWORD, RESOLVER_TOKEN, LS_PASSWORD,
           LS_QUERY_TOKEN, KAFKA_PASSWORD, str(NUMERIC_SALT))


def with_credentials(url: str, password: str, token: str) -> str:
    return url.replace("http://", f"http://ragdrift:{password}@") + f"/?token={token}"


class Run:
    """One test's planted files and everything its commands and the agent printed or wrote."""

    def __init__(self, tmp_path: Path, capsys) -> None:
        self.tmp = tmp_path
        self.capsys = capsys
        self.planted: set[Path] = set()
        self.seen: list[str] = []
        self.log = io.StringIO()
        self.good_token = self.plant("token", TOKEN + "\n")
        self.bad_token = self.plant("token-two-lines", TOKEN + "\nsecond line\n")
        self.kafka_password = self.plant("kafka-password", KAFKA_PASSWORD + "\n")

    def plant(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        self.planted.add(path)
        return path

    def config(self, name: str, *, store: str | None = None, salt=SALT, resolver: dict | None = None,
               label_studio: str | None = None, token_file: Path | None = None) -> Path:
        doc = {
            "kafka": {"client": {"sasl_plain_username": "ragdrift",
                                 "sasl_plain_password_file": str(self.kafka_password)}},
            "store": {"url": store or f"sqlite:///{self.tmp}/state.db"},
            "judgment": {"salt": salt, "export_dir": str(self.tmp / "batches"), "budget": 3, "uniform_budget": 4,
                         "resolver": resolver or {"kind": "none"},
                         "label_studio": {"url": label_studio, "token_file": str(token_file or self.good_token)}},
        }
        return self.plant(f"{name}.yaml", yaml.safe_dump(doc))

    def command(self, *argv: str) -> int:
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        self.seen += [out, err]
        return code

    def pull(self, url: str, token_file: Path | None = None) -> int:
        return self.command("judgments", "pull", "--label-studio-url", url, "--project", "1",
                            "--label-studio-token-file", str(token_file or self.good_token),
                            "--config", str(self.config("pull")))

    def leaks(self) -> list[str]:
        """Each secret found, with where."""
        found = []
        texts = [("output", text) for text in self.seen] + [("log", self.log.getvalue())]
        texts += [(str(path), path.read_bytes().decode("latin-1")) for path in self.tmp.rglob("*")
                  if path.is_file() and path not in self.planted]
        for where, text in texts:
            found += [f"{secret} in {where}" for secret in SECRETS if secret in text]
        return found


@pytest.fixture
def run(tmp_path, capsys):
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    r = Run(tmp_path, capsys)
    logs.setup("json", "INFO", r.log)
    yield r
    root.handlers[:] = handlers
    root.setLevel(level)


def with_candidates(url: str) -> None:
    rows = [cand(f"e{i}", stratum=UNIFORM, week=WEEK) for i in range(6)]
    with Store(url, None, TABLES) as store, store.engine.begin() as conn:
        Queue(store).writes("ragdrift", "t", 0, rows, (), ())(conn)


def test_no_failure_path_prints_or_writes_a_secret(run):
    unreachable_store = (f"postgresql+psycopg://ragdrift:{STORE_PASSWORD}@127.0.0.1:{free_port()}/ragdrift"
                         f"?password={STORE_QUERY_PASSWORD}")
    with HostileServer("echo", code=500) as failing, HostileServer("redirect") as redirecting:
        redirecting.options["to"] = f"http://localhost:{redirecting.port}/landed?token={LS_QUERY_TOKEN}"
        ls_failing = with_credentials(failing.url, LS_PASSWORD, LS_QUERY_TOKEN)
        resolver = {"kind": "http", "url": with_credentials(failing.url, RESOLVER_PASSWORD, RESOLVER_TOKEN),
                    "timeout_seconds": 5}
        full = run.config("full", store=unreachable_store, resolver=resolver, label_studio=ls_failing)
        with_candidates(load(run.config("local")).store.url)

        assert run.command("check-config", str(full)) == 0
        assert run.command("check-config", str(full), "--format", "json") == 0
        assert run.command("check-config", str(run.config("numeric-salt", salt=NUMERIC_SALT))) == 2
        raw_at = f"postgresql+psycopg://ragdrift:x@{STORE_PASSWORD}@127.0.0.1:{free_port()}/ragdrift"
        assert run.command("check-config", str(run.config("raw-at", store=raw_at))) == 2
        assert run.command("judgments", "calibrate", "--config", str(full)) == 2  # the store is unreachable
        bad_port = f"postgresql+psycopg://ragdrift:{STORE_PASSWORD}@127.0.0.1:port/ragdrift"
        assert run.command("judgments", "calibrate", "--config", str(run.config("bad-port", store=bad_port))) == 2
        assert "store.url: is not a database URL" in run.seen[-1]  # the configuration check refuses it first

        assert run.pull(ls_failing, run.bad_token) == 2
        assert run.pull(ls_failing) == 2  # HTTP 500 quoting the request
        assert run.pull(with_credentials(redirecting.url, LS_PASSWORD, LS_QUERY_TOKEN)) == 2
        unreachable_ls = with_credentials(f"http://127.0.0.1:{free_port()}", LS_PASSWORD, LS_QUERY_TOKEN)
        assert run.pull(unreachable_ls) == 2
        assert run.pull(unreachable_ls.replace("http://", "")) == 2  # no scheme: still a URL's credentials

        local_resolver = run.config("resolver", resolver=resolver)
        assert run.command("batch", "build", "--config", str(local_resolver), "--week", WEEK) == 2
        assert run.command("batch", "build", "--config", str(run.config("local")), "--week", WEEK,
                           "--out", str(run.tmp / "built"), "--label-studio-url", ls_failing,
                           "--label-studio-token-file", str(run.good_token)) == 2

        for name, options in [("bad-token", {"label_studio": ls_failing, "token_file": run.bad_token}),
                              ("resolver", {"resolver": resolver, "label_studio": ls_failing}),
                              ("label-studio", {"label_studio": ls_failing})]:
            # a store of its own: a batch recorded before its push failed is not built again
            config = run.config(f"weekly-{name}", store=f"sqlite:///{run.tmp}/weekly-{name}.db", **options)
            settings = load(config)
            with_candidates(settings.store.url)
            store = Store(settings.store.url, None, (*TABLES, *QRELS))
            judging = JudgmentJobs(settings, Queue(store), Qrels(store), top_n=1, scheduler=new_scheduler(), weekly=scheduled)
            judging.weekly()
            store.close()
            assert judging.failures == 1, name
    log = run.log.getvalue()
    assert log.count('"weekly judgment batch failed"') == 3 and "Traceback" not in log  # one line each
    assert failing.requests and redirecting.requests  # the failures were the servers', not the test's
    assert not run.leaks()


def test_the_log_formatters_and_the_commands_last_resort_mask_credentials(capsys):
    record = logging.LogRecord("t", logging.ERROR, __file__, 1, "calling %s", (
        f"http://u:{LS_PASSWORD}@h/?token={LS_QUERY_TOKEN}",), None)
    try:
        raise ValueError(f"Invalid header value b'Token {TOKEN}\\nsecond' for postgresql://u:{STORE_PASSWORD}@h/db")
    except ValueError:
        record.exc_info = sys.exc_info()
    record.url = f"postgresql://u@h/db?password={STORE_QUERY_PASSWORD}"
    for formatter in (logs.JsonFormatter(), logs.TextFormatter()):
        line = formatter.format(record)
        assert "calling http://u:***@h/?token=***" in line
        assert [s for s in SECRETS if s in line] == []


def test_an_unexpected_failure_of_a_command_prints_its_traceback_masked(capsys, monkeypatch):
    def crash(args):
        raise RuntimeError(f"bug near postgresql://ragdrift:{STORE_PASSWORD}@db/x, header Token {TOKEN}")

    monkeypatch.setattr("agent.cli.run.check_config", crash)  # a bug stands in: no real command crashes now
    assert main(["check-config", "any.yaml"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: bug near postgresql://ragdrift:***@db/x, header Token ***" in err
    assert [s for s in SECRETS if s in err] == []
