"""The newest judged batch's figures as gauges: the agent's judgment refresh on a
real SQLite store holding recorded batches and their labels (no Kafka)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from agent.core.batch import build
from agent.core.judgments.labels import Label
from agent.core.judgments.report import ALL, Options, report
from agent.io.background.judgment import JudgmentCollector, JudgmentJobs
from agent.io.background.periodic import new_scheduler
from agent.io.files import batch_files
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES as QUEUE
from agent.io.store.queue import Queue
from tests.test_report_cli import CONFIG, labels_for, week_candidates


@pytest.fixture
def agent(tmp_path):
    """The judgment refresh and its collector on a store with two recorded batches, none judged yet."""
    config = tmp_path / "ragdrift.yaml"
    config.write_text(f"store: {{url: 'sqlite:///{tmp_path}/s.db'}}\n")
    settings = load(config)
    store = Store(settings.store.url, None, (*QUEUE, *QRELS))
    queue, qrels = Queue(store), Qrels(store)
    batches = []
    for built_at, week in enumerate(("2026-W47", "2026-W48")):
        batch = build(week, week_candidates(week), CONFIG)
        directory = batch_files.write(tmp_path / "batches", batch, batch.items)
        queue.record_batch(settings.kafka.group_id, week, batch.batch_id, float(built_at), len(batch.key),
                           str(directory))
        batches.append(batch)
    judging = JudgmentJobs(settings, queue, qrels, top_n=5, scheduler=new_scheduler())
    registry = CollectorRegistry()
    registry.register(JudgmentCollector(judging))
    yield judging, registry, qrels, batches
    store.close()


def test_nothing_is_exported_before_a_batch_is_judged(agent):
    judging, registry, _, _ = agent
    judging.refresh()
    names = {m.name for m in registry.collect()}
    assert not [n for n in names if n.startswith("ragdrift_judged")]


def test_the_newest_labelled_batch_is_exported_and_recomputed_only_when_its_labels_change(agent, tmp_path):
    judging, registry, qrels, (older, newer) = agent
    qrels.add(labels_for(older), "test")
    judging.refresh()
    assert registry.get_sample_value("ragdrift_judged_batch_info",
                                     {"batch_id": older.batch_id, "week": "2026-W47"}) == 1
    # The newer batch once judged replaces it; its figures are the core report's.
    labels = labels_for(newer)
    qrels.add(labels, "test")
    judging.refresh()
    manifest, key = batch_files.read_batch(tmp_path / "batches" / newer.batch_id)
    want = report(manifest, key, qrels.latest(newer.batch_id), Options())  # what `ragdrift judgments report` prints
    traffic = next(v for v in want["views"] if v["view"] == "traffic" and v["stratum"] == ALL)
    labels_of = {"app": "all", "view": "traffic", "stratum": "all"}
    assert registry.get_sample_value("ragdrift_judged_batch_info", {"batch_id": newer.batch_id,
                                                                    "week": "2026-W48"}) == 1
    assert registry.get_sample_value("ragdrift_judged_batch_info", {"batch_id": older.batch_id,
                                                                    "week": "2026-W47"}) is None
    for metric, family in (("precision", "precision"), ("reciprocalRank", "reciprocal_rank"), ("nDCG", "ndcg")):
        m = traffic["metrics"][metric]
        assert registry.get_sample_value(f"ragdrift_judged_{family}", labels_of) == m["estimate"]
        assert registry.get_sample_value(f"ragdrift_judged_{family}_low", labels_of) == m["low"]
        assert registry.get_sample_value(f"ragdrift_judged_{family}_high", labels_of) == m["high"]
    assert registry.get_sample_value("ragdrift_judged_items", labels_of) == traffic["items"]
    stratum = {"app": "app", "view": "challenge", "stratum": "app|lexical"}
    challenge = next(v for v in want["views"] if v["view"] == "challenge" and v["stratum"] == "app|lexical")
    for bound in ("low", "high"):  # the bootstrap's bounds too: the same resamples and seed
        assert registry.get_sample_value(f"ragdrift_judged_precision_{bound}", stratum) == \
            challenge["metrics"]["precision"][bound]
    assert registry.get_sample_value("ragdrift_judged_precision", {**stratum, "app": "all",
                                                                   "stratum": "uniform"}) is not None
    # Unchanged labels: the same figures object, not a new report.
    first = judging.status.judged
    judging.refresh()
    assert judging.status.judged is first
    # A new label version: recomputed.
    changed = next(x for x in labels if x.grade == 0)
    qrels.add([Label(batch_id=changed.batch_id, item=changed.item, chunk=changed.chunk, judge=changed.judge, grade=3)], "test")
    judging.refresh()
    assert judging.status.judged is not first
    assert judging.status.judged.batch_id == newer.batch_id
