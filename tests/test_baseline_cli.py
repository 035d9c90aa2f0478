"""`ragdrift baseline freeze|list` and `ragdrift drift` on a real SQLite store,
fed by eight days of generated traffic through PartitionState and the outbox
(a score-drift incident on the last day)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from agent.cli import main
from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig
from agent.core.partitions import Outbox
from agent.core.state import PartitionState
from agent.io.drift_store import TABLES, DriftStore
from agent.io.settings import load
from agent.io.store import Checkpoint, Store
from agent.synth import Incident, generate

DAY0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
PER_DAY = 400  # events, at one a second from midnight: inside the incident's 10 minutes on the last day


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("baseline")
    path = tmp / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{tmp}/state.db"}}))
    settings = load(path)
    store = DriftStore(Store(settings.store.url, None, TABLES))
    states = [PartitionState(CoreConfig(), drift=DriftConfig()) for _ in range(2)]
    boxes = [Outbox(), Outbox()]
    offset = 0
    for d in range(8):
        incidents = [Incident("score-drift", 0)] if d == 7 else []
        for line in generate(PER_DAY, seed=d, start=DAY0 + timedelta(days=d), rate=1.0, incidents=incidents):
            states[offset % 2].process(line)
            offset += 1
        for p in (0, 1):  # a checkpoint a day, as Ownership.checkpoint writes it
            boxes[p].take(states[p])
            store.store.save(settings.kafka.group_id, [Checkpoint("t", p, offset, {"v": 1})],
                             [store.writes(settings.kafka.group_id, [boxes[p].drift])])
            boxes[p].clear()
    store.store.close()
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_freeze_is_deterministic_and_list_shows_it(config, capsys):
    code, out, _ = run(capsys, "baseline", "freeze", "--config", str(config), "--name", "launch",
                       "--from", "2026-03-01", "--to", "2026-03-07")
    assert code == 0
    assert "7 days (2026-03-01 to 2026-03-07)" in out and out.rstrip().endswith("stored")
    version = out.split()[1].rstrip(":")
    code, again, _ = run(capsys, "baseline", "freeze", "--config", str(config), "--name", "launch",
                         "--from", "2026-03-01", "--to", "2026-03-07")
    assert code == 0 and again.split()[1].rstrip(":") == version and "already stored" in again
    code, out, _ = run(capsys, "baseline", "list", "--config", str(config), "--format", "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["name"], r["version"]) for r in rows if r["name"] == "launch"] == [("launch", version)]
    assert rows[0]["days"][0] == "2026-03-01" and len(rows[0]["days"]) == 7
    code, out, _ = run(capsys, "baseline", "list", "--config", str(config))
    assert version in out


def test_freezing_days_without_data_is_a_clear_error(config, capsys):
    code, _, err = run(capsys, "baseline", "freeze", "--config", str(config), "--name", "empty",
                       "--from", "2025-01-01", "--to", "2025-01-31")
    assert code == 2
    assert "no drift counts stored from 2025-01-01 to 2025-01-31" in err
    code, _, err = run(capsys, "baseline", "freeze", "--config", str(config), "--name", "x",
                       "--from", "2026-03-07", "--to", "2026-03-01")
    assert code == 2 and "after" in err


def test_drift_alarms_on_the_shifted_scores_of_the_last_day(config, capsys):
    run(capsys, "baseline", "freeze", "--config", str(config), "--name", "launch",
        "--from", "2026-03-01", "--to", "2026-03-07")
    code, out, _ = run(capsys, "drift", "--config", str(config), "--baseline", "launch", "--format", "json")
    assert code == 0
    findings = [json.loads(line) for line in out.splitlines()]
    assert {f["window"] for f in findings} == {"2026-03-08"}  # the newest stored day by default
    alarms = {(f["feature"], f["stat"]) for f in findings if f["alarm"]}
    assert {f for f, _ in alarms} >= {"top1_score", "mean_admitted_score"}
    assert all(f["calibrated"] for f in findings if f["feature"] == "top1_score")
    code, quiet, _ = run(capsys, "drift", "--config", str(config), "--day", "2026-03-05", "--format", "json")
    quiet_alarms = {(f["app"], f["feature"], f["stat"]) for f in map(json.loads, quiet.splitlines()) if f["alarm"]}
    assert not any(feature == "top1_score" for _, feature, _ in quiet_alarms)
    code, table, _ = run(capsys, "drift", "--config", str(config))
    assert code == 0
    assert "window 2026-03-08 against baseline launch" in table
    line = next(x for x in table.splitlines() if " top1_score " in x and " ALARM " in x)
    assert len(line.split()) == 8  # app, feature, stat, value, threshold, alarm, n, calibrated


def test_drift_without_a_baseline_or_days_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{tmp_path}/empty.db"}}))
    code, _, err = run(capsys, "drift", "--config", str(path))
    assert code == 2 and "no drift counts stored yet" in err
    code, _, err = run(capsys, "drift", "--config", str(path), "--day", "2026-03-01")
    assert code == 2 and "no baseline stored" in err
