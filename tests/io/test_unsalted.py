"""An empty `judgment.salt` with the judgment queue on: allowed (the default has none), but `check-config`
warns in one line and the agent logs that line once at start, since the weekly batch would fail without it."""

from __future__ import annotations

import logging

import pytest
import yaml

from agent.io.background.periodic import new_scheduler
from agent.io.features import Wiring
from agent.io.features.judgment import Judgment
from agent.io.settings.agent import load
from agent.io.store.database import Store
from tests.test_cli import run

WARNING = ("ragdrift: warning: judgment.salt: empty: no weekly batch is built and which events are sampled is "
           "predictable; set it (or RAGDRIFT_JUDGMENT__SALT) to a long random secret, or judgment.enabled: false\n")


def config(tmp_path, **judgment) -> str:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{tmp_path}/s.db"}, "judgment": judgment}))
    return str(path)


def test_check_config_warns_of_an_empty_salt_in_one_line(tmp_path, capsys):
    status, out, err = run(capsys, "check-config", config(tmp_path))
    assert (status, err) == (0, WARNING) and "judgment.salt = \n" in out


@pytest.mark.parametrize("judgment", [{"salt": "3c1f9a"}, {"enabled": False}])
def test_no_warning_with_a_salt_or_without_the_judgment_queue(tmp_path, capsys, judgment):
    status, out, err = run(capsys, "check-config", config(tmp_path, **judgment))
    assert (status, err) == (0, "") and "3c1f9a" not in out


def test_the_agent_logs_the_empty_salt_once_at_start(tmp_path, caplog):
    settings = load(config(tmp_path), environ={})
    scheduler = new_scheduler()
    with Store(settings.store.url, None, Judgment.tables) as store, caplog.at_level(logging.WARNING):
        Judgment(Wiring(settings, store, scheduler)).start()
    assert [r.getMessage() for r in caplog.records if "salt" in r.getMessage()] == [WARNING[len("ragdrift: warning: "):-1]]
