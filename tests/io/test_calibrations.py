"""Fitted calibrations in the store: the fitting job pools the newest batches,
stores one fit per app and pipeline version, and the agent's watch reads the
newest of each (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from agent.core.calibrated import OK, TOO_FEW_LABELS, ServingRule
from agent.core.judgments.labels import Label
from agent.io.background.calibration import CalibrationWatch
from agent.io.background.periodic import new_scheduler
from agent.io.settings.judgment import CalibrationSettings
from agent.io.store.calibrations import TABLES, Calibrations
from agent.io.store.database import Store
from agent.jobs.calibrate import fit_and_store, pooled


@pytest.fixture
def store(url):
    with Store(url, tables=TABLES) as s:
        yield s


def batch(week: str, app: str, version: str | None, pairs: list[tuple[float, int]]):
    """A batch's key and labels: one item per (score, grade)."""
    batch_id = f"{week}-abcd"
    key, labels = [], []
    for i, (score, grade) in enumerate(pairs, 1):
        item = f"{batch_id}-{i:04d}"
        key.append({"item": item, "app": app, "pipeline_version": version,
                    "chunks": [{"chunk": f"{item}-1", "chunk_id": f"c{i}", "parent_id": "p", "source": "s",
                                "rank": 1, "score": score}]})
        labels.append(Label(batch_id=batch_id, item=item, chunk=f"{item}-1", judge="judge", grade=grade))
    return batch_id, key, labels


def test_the_job_pools_the_newest_batches_and_the_watch_reads_the_newest_fits(store):
    settings = CalibrationSettings(pool_batches=2, folds=2, min_labels=4)
    weeks = {}
    for week, version in (("2026-W01", "v1"), ("2026-W02", "v1"), ("2026-W03", "v1")):
        weeks[week] = batch(week, "app", version, [(0.1, 0), (0.4, 1), (0.6, 2), (0.9, 3)])
    labels = {b: lab for b, _, lab in weeks.values()}
    keys = {b: key for b, key, _ in weeks.values()}
    first = fit_and_store(store, labels, keys, settings, now=100.0)
    assert [(c.app, c.pipeline_version, c.n, c.batches) for c in first] == [
        ("app", "v1", 8, ("2026-W02-abcd", "2026-W03-abcd"))]
    other_id, other_key, other_labels = batch("2026-W03", "bot", None, [(1.0, 0), (2.0, 3)])
    fit_and_store(store, {**labels, other_id + "x": other_labels}, {**keys, other_id + "x": other_key}, settings,
                  now=200.0)
    newest = Calibrations(store).newest()
    assert [(c.app, c.pipeline_version, c.fitted_at) for c in newest] == [("app", "v1", 200.0), ("bot", None, 200.0)]
    assert [c.fitted_at for c in Calibrations(store).history("app")] == [100.0, 200.0]  # history kept
    watch = CalibrationWatch(Calibrations(store), ServingRule(max_ece=1.0, min_labels=4), scheduler=new_scheduler())
    watch.refresh()
    assert watch.active.by_pair[("app", "v1")].fitted_at == 200.0
    assert watch.active.by_pair[("bot", None)] == TOO_FEW_LABELS
    assert OK not in watch.active.by_pair.values()


def test_a_fit_stored_twice_is_kept_once(store):
    batch_id, key, labels = batch("2026-W01", "app", "v1", [(0.1, 0), (0.9, 3)])
    settings = CalibrationSettings(folds=2, min_labels=2)
    fit_and_store(store, {batch_id: labels}, {batch_id: key}, settings, now=5.0)
    fit_and_store(store, {batch_id: labels}, {batch_id: key}, settings, now=5.0)
    assert len(Calibrations(store).history("app")) == 1


def test_batches_sort_by_week():
    assert pooled(["2026-W10-aa", "2025-W52-ff", "2026-W02-00"], 2) == ["2026-W02-00", "2026-W10-aa"]
