"""`ragdrift baseline freeze|list` and `ragdrift drift` on a real SQLite store,
fed by eight days of generated traffic through PartitionState and the outbox
(a score-drift incident on the last day)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import yaml
from scipy.spatial.distance import jensenshannon
from scipy.stats import chi2_contingency, ks_2samp, wasserstein_distance
from sqlalchemy import delete

from agent.cli import main
from agent.core.config import CoreConfig
from agent.core.drift import DEFAULT_GRIDS
from agent.core.drift.days import DriftConfig
from agent.core.drift.features import GRIDS
from agent.core.escape import plain
from agent.core.partitions import Outbox
from agent.core.state import PartitionState
from agent.io.settings.agent import load
from agent.io.settings.drift import drift_config
from agent.io.store.database import Checkpoint, Store
from agent.io.store.drift import TABLES, DriftStore
from agent.synth import ScheduledIncident, generate

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
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
        incidents = [ScheduledIncident("score-drift", 0)] if d == 7 else []
        for line in generate(PER_DAY, seed=d, start=DAY0 + timedelta(days=d), rate=1.0, incidents=incidents):
            states[offset % 2].process(line)
            offset += 1
        for p in (0, 1):  # a checkpoint a day, as Ownership.checkpoint writes it
            boxes[p].take(states[p])
            checkpoint = Checkpoint(topic="t", partition=p, next_offset=offset, state={"v": 1})
            store.store.save(settings.kafka.group_id, [checkpoint],
                             [store.writes(settings.kafka.group_id, [boxes[p].held["drift"]])])
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
    Store(load(path).store.url, None, TABLES).close()  # the agent's store, before it has counted a day
    code, _, err = run(capsys, "drift", "--config", str(path))
    assert code == 2 and "no drift counts stored yet" in err
    code, _, err = run(capsys, "drift", "--config", str(path), "--day", "2026-03-01")
    assert code == 2 and "no baseline stored" in err


def _stored(config, tmp_path, extra: dict | None = None):
    """A copy of the module's store (so a test may spoil it) and a config naming it, with `extra` settings."""
    url = f"sqlite:///{tmp_path}/state.db"
    if not (tmp_path / "state.db").exists():
        shutil.copy(load(config).store.url.removeprefix("sqlite:///"), tmp_path / "state.db")
    path = tmp_path / f"ragdrift-{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": url}, **(extra or {})}))
    return path, DriftStore(Store(url, None, TABLES))


def _freeze(capsys, config, name="launch", first="2026-03-01", last="2026-03-07") -> str:
    code, out, err = run(capsys, "baseline", "freeze", "--config", str(config), "--name", name,
                         "--from", first, "--to", last)
    assert code == 0, err
    return out.split()[1].rstrip(":")


def test_show_prints_what_a_baseline_holds(config, capsys):
    version = _freeze(capsys, config)
    code, out, _ = run(capsys, "baseline", "show", f"launch@{version}", "--config", str(config), "--format", "json")
    assert code == 0
    shown = json.loads(out)
    assert (shown["name"], shown["version"]) == ("launch", version)
    assert shown["days"] == {"first": "2026-03-01", "last": "2026-03-07", "count": 7}
    assert shown["calibration"]["rate"] == pytest.approx(1 / 30)
    q = shown["queries"]
    assert q["clusters"] == 8 and q["vocabulary"]["bits"] == 1 << 20 and q["vocabulary"]["hashes"] == 7
    assert 0 < q["vocabulary"]["terms"] < 100_000 and 0 < q["vocabulary"]["false_positive_rate"] < 1e-6
    for held in shown["apps"].values():
        top1 = held["numeric"]["top1_score"]
        assert len(top1["edges"]) == len(top1["counts"]) - 1 == len(top1["centres"]) - 1
        assert top1["edges"] == sorted(top1["edges"]) and top1["grid"]["digest"] == DEFAULT_GRIDS["top1_score"].digest
        assert set(top1["thresholds"]) == {"psi", "js", "ks", "wasserstein"}
        for t in top1["thresholds"].values():
            assert t["calibrated"] and t["expected_false_alarm_rate"] == pytest.approx(1 / 30)
            assert "calibrated on 7 days" in t["reason"] and "log-normal tail" in t["reason"]
            assert len(t["sizes"]) == len(t["values"]) == len(t["samples"])
        source = held["mixes"]["source"]
        assert source["categories"][-1] == "other" and len(source["categories"]) == len(source["counts"])
        assert set(source["thresholds"]) == {"psi", "chi2_p"}
    code, table, _ = run(capsys, "baseline", "show", "launch", "--config", str(config))
    assert code == 0 and f"baseline launch {version}: 7 days, 2026-03-01 to 2026-03-07" in table
    assert "query clusters" in table and "expected false alarms 0.03333 per window" in table and " edges " in table


FORGED = "x\ndocs-search  top1_score  psi  9.9  0.1  ALARM\x1b[2J"  # a forged row, then an escape sequence


def test_stored_texts_stay_on_their_line(config, tmp_path, capsys):
    """An app and a language as the store's day rows hold them: freeze, list, show and drift write
    each on its line, with no control sequence."""
    path, store = _stored(config, tmp_path)
    store.store.close()
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("UPDATE ragdrift_drift_days SET app = ? WHERE app = 'docs-search'", (FORGED,))
        for rowid, counts in conn.execute("SELECT rowid, counts FROM ragdrift_drift_days WHERE feature = 'language'"):
            conn.execute("UPDATE ragdrift_drift_days SET counts = ? WHERE rowid = ?",
                         (json.dumps({**json.loads(counts), FORGED: 1000}).encode(), rowid))
    _freeze(capsys, path, "forged")
    for argv in (["baseline", "list"], ["baseline", "show", "forged"], ["drift", "--baseline", "forged"]):
        code, out, err = run(capsys, *argv, "--config", str(path))
        assert code == 0 and "\x1b" not in out + err, argv
        assert plain(FORGED) in out and not any(line.startswith("docs-search") for line in out.splitlines()), argv
    shown = run(capsys, "baseline", "show", "forged", "--config", str(path))[1].splitlines()
    assert any(line.startswith("  categories ") and f" {plain(FORGED)}," in line for line in shown)


def test_show_of_a_missing_or_misnamed_baseline_is_a_usage_error(config, capsys):
    for argv, said in ((["nope"], "no baseline 'nope' stored"),
                       (["launch@0123456789abcdef"], "no baseline 'launch' version 0123456789abcdef stored"),
                       (["launch@xyz"], "16 lowercase hex digits"), (["a b"], "a baseline name is")):
        code, out, err = run(capsys, "baseline", "show", *argv, "--config", str(config))
        assert code == 2 and out == "" and said in err and err.count("\n") == 1, err


def test_drift_json_holds_what_each_statistic_is_computed_from(config, capsys):
    _freeze(capsys, config)
    code, out, _ = run(capsys, "drift", "--config", str(config), "--baseline", "launch", "--format", "json")
    assert code == 0
    findings = [json.loads(line) for line in out.splitlines()]
    assert {f["stat"] for f in findings} == {"psi", "js", "ks", "wasserstein", "chi2_p"}
    for f in findings:
        q, b = np.array(f["counts"], dtype=float), f["baseline"]
        p = np.array(b["counts"], dtype=float)
        assert len(q) == len(p) and q.sum() == f["n"]
        a, c = np.maximum(p / p.sum(), 1e-4), np.maximum(q / q.sum(), 1e-4)
        if f["stat"] == "psi":
            expected = np.sum((c - a) * np.log(c / a))
        elif f["stat"] == "js":
            expected = jensenshannon(p, q, base=2)
        elif f["stat"] == "ks":
            bins = np.arange(len(p))
            expected = ks_2samp(np.repeat(bins, p.astype(int)), np.repeat(bins, q.astype(int))).statistic
        elif f["stat"] == "wasserstein":
            assert len(b["edges"]) == len(p) - 1
            expected = wasserstein_distance(b["centres"], b["centres"], p, q)
        else:
            assert len(b["categories"]) == len(p)
            table = np.array([p, q])
            expected = chi2_contingency(table[:, table.sum(axis=0) > 0], correction=False).pvalue
        assert f["value"] == pytest.approx(expected, rel=1e-9, abs=1e-12), f
        assert f["alarm"] == (f["value"] < f["threshold"] if f["stat"] == "chi2_p" else f["value"] > f["threshold"])
        assert f["expected_false_alarm_rate"] == (pytest.approx(1 / 30) if f["calibrated"] else None)


def test_a_corrupt_stored_baseline_is_skipped_by_list_with_an_error_at_the_end(config, tmp_path, capsys):
    path, store = _stored(config, tmp_path)
    _freeze(capsys, path, "kept")
    with store.store.engine.begin() as conn:
        conn.execute(store.baselines.insert(), [{"name": "spoilt", "version": "0" * 16, "created_at": 0.0,
                                                 "baseline": b'{"format": 1, "apps": '}])
    store.store.close()
    for fmt in ("table", "json"):
        code, out, err = run(capsys, "baseline", "list", "--config", str(path), "--format", fmt)
        assert code == 1 and "kept" in out and "spoilt" not in out
        assert err == "ragdrift: error: 1 stored baseline could not be read (corrupt), skipped\n"
    code, _, err = run(capsys, "drift", "--config", str(path), "--baseline", "spoilt")
    assert code == 2 and "is corrupt" in err and err.count("\n") == 1


def test_baseline_names_are_validated_before_the_store_sees_them(config, capsys):
    for name in ("x" * 256, "a b", "@v", "../up", "-dash", "", "tab\there"):
        code, out, err = run(capsys, "baseline", "freeze", "--config", str(config), f"--name={name}",
                             "--from", "2026-03-01", "--to", "2026-03-07")
        assert code == 2 and out == "" and "a baseline name is 1 to 255" in err and err.count("\n") == 1, name
        assert name not in err or len(name) < 40
        code, _, err = run(capsys, "drift", "--config", str(config), f"--baseline={name}")
        assert code == 2 and "a baseline name is" in err
    assert _freeze(capsys, config, "v2.launch_" + "x" * 245)  # 255 characters


@pytest.mark.postgres
def test_a_long_baseline_name_is_a_usage_error_on_postgresql(pg_url, tmp_path, capsys):
    """PostgreSQL enforces the name column's 255 characters (SQLite does not): a longer name was a crash."""
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": pg_url}}))
    group = load(path).kafka.group_id
    store = DriftStore(Store(pg_url, None, TABLES))
    state, box = PartitionState(CoreConfig(), drift=DriftConfig()), Outbox()
    for line in generate(PER_DAY, seed=0, start=DAY0, rate=1.0):
        state.process(line)
    box.take(state)
    store.store.save(group, [Checkpoint(topic="t", partition=0, next_offset=PER_DAY, state={"v": 1})],
                     [store.writes(group, [box.held["drift"]])])
    store.store.close()
    code, out, err = run(capsys, "baseline", "freeze", "--config", str(path), "--name", "x" * 256,
                         "--from", "2026-03-01", "--to", "2026-03-01")
    assert code == 2 and out == "" and "a baseline name is 1 to 255" in err and err.count("\n") == 1
    code, out, _ = run(capsys, "baseline", "freeze", "--config", str(path), "--name", "x" * 255,
                       "--from", "2026-03-01", "--to", "2026-03-01")
    assert code == 0 and out.startswith("x" * 255)


def test_a_short_baseline_freezes_with_a_warning_that_its_thresholds_are_defaults(config, capsys):
    code, out, err = run(capsys, "baseline", "freeze", "--config", str(config), "--name", "short",
                         "--from", "2026-03-01", "--to", "2026-03-05")
    assert code == 0 and out.rstrip().endswith("stored")
    assert err.startswith("ragdrift: warning: ") and "fewer than 7 days with data" in err and err.count("\n") == 1
    code, _, err = run(capsys, "baseline", "freeze", "--config", str(config), "--name", "week",
                       "--from", "2026-03-01", "--to", "2026-03-07")
    assert code == 0 and err == ""


def test_days_counted_on_another_grid_are_never_compared(config, tmp_path, capsys):
    narrow = {"drift": {"grids": {app: {"top1_score": {"lo": 0.0, "hi": 1.0, "cells": 100}}
                                  for app in ("hr-assistant", "support-bot", "docs-search")}}}
    path, store = _stored(config, tmp_path, narrow)
    settings = load(path)
    code, _, err = run(capsys, "baseline", "freeze", "--config", str(path), "--name", "narrow",
                       "--from", "2026-03-01", "--to", "2026-03-07")
    assert code == 2 and "counted on grid" in err and "the configured grid is" in err and err.count("\n") == 1
    wide, _ = _stored(config, tmp_path)
    _freeze(capsys, wide, "wide")  # ... this one from the days as stored on the default grids
    state, box = PartitionState(CoreConfig(), drift=drift_config(settings.drift)), Outbox()
    for line in generate(PER_DAY, seed=9, start=DAY0 + timedelta(days=8), rate=1.0):
        state.process(line)
    box.take(state)  # a day counted after the grid changed
    store.store.save(settings.kafka.group_id, [Checkpoint(topic="t", partition=2, next_offset=1, state={"v": 1})],
                     [store.writes(settings.kafka.group_id, [box.held["drift"]])])
    code, out, err = run(capsys, "drift", "--config", str(path), "--day", "2026-03-09")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "not compared: app " in err and ", top1_score: counted on grid " in err and "more)" in err
    code, _, err = run(capsys, "drift", "--config", str(path), "--from", "2026-03-08", "--to", "2026-03-09")
    assert code == 2 and "counted on two grids" in err  # the days summed mix two grids
    with store.store.engine.begin() as conn:  # days stored before grids were recorded still load and compare
        conn.execute(delete(store.days).where(store.days.c.feature == GRIDS))
    store.store.close()
    code, out, _ = run(capsys, "drift", "--config", str(path), "--day", "2026-03-08", "--format", "json")
    assert code == 0 and any(json.loads(line)["feature"] == "top1_score" for line in out.splitlines())


def test_drift_of_one_pipeline_version_against_its_apps_baseline(tmp_path, capsys):
    """Days counted split by version: a baseline frozen from them is each app's versions summed, and
    `--pipeline` judges one version's counts against it (the last day's canary drifts, its stable
    version does not)."""
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{tmp_path}/split.db"}}))
    settings = load(path)
    store = DriftStore(Store(settings.store.url, None, TABLES))
    state, box = PartitionState(CoreConfig(by_pipeline_version=True, max_pipeline_versions=8), drift=DriftConfig()), Outbox()
    for d in range(8):
        incidents = [ScheduledIncident("score-drift", 0)] if d == 7 else []
        for line in generate(PER_DAY, seed=d, start=DAY0 + timedelta(days=d), rate=1.0, incidents=incidents):
            state.process(line)
        box.take(state)
        store.store.save(settings.kafka.group_id, [Checkpoint(topic="t", partition=0, next_offset=d, state={"v": 1})],
                         [store.writes(settings.kafka.group_id, [box.held["drift"]])])
        box.clear()
    store.store.close()
    _freeze(capsys, path)

    def top1_alarms(version):
        code, out, err = run(capsys, "drift", "--config", str(path), "--pipeline", version, "--format", "json")
        assert code == 0, err
        found = [json.loads(line) for line in out.splitlines()]
        assert found and {f["pipeline_version"] for f in found} == {version}
        return {f["app"] for f in found if f["alarm"] and f["feature"] == "top1_score"}

    assert "support-bot" in top1_alarms("support-3.15.0-canary")
    assert "support-bot" not in top1_alarms("support-3.14.0")
    code, table, _ = run(capsys, "drift", "--config", str(path), "--pipeline", "support-3.15.0-canary")
    assert code == 0 and "window 2026-03-08 of pipeline version support-3.15.0-canary against baseline launch" in table
    code, _, err = run(capsys, "drift", "--config", str(path), "--pipeline", "no-such-version")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no drift counts of pipeline version" in err
    code, _, err = run(capsys, "drift", "--config", str(path), "--pipeline", "bad\x07version")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--pipeline" in err
