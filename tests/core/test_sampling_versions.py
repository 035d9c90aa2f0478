"""Judgment sampling split by pipeline version, computed by hand: the stratum key and its budget,
a canary's own sample and its weights, the batch's key and manifest (never the judges' items), and
the report's version slice; then a generated canary, end to end.

The hand case, one week, K = 2 per risk stratum, every event `app|lexical`:

    stable-7: s1 w=5 u=0.5 q=10, s2 w=1 u=0.2 q=5, s3 w=1 u=0.25 q=4, s4 w=2 u=0.8 q=2.5, s5 w=1 u=0.5 q=2
    canary-8: c1 w=1 u=0.9 q=1.11, c2 w=3 u=0.6 q=5

Split: stable-7 keeps s1, s2 with tau = 4 (s3), weights max(5, 4) / 5 = 1 and max(1, 4) / 1 = 4,
an estimate of 5 events; canary-8 keeps both of its events, tau = 0, weights 1. Not split, the
stratum keeps s1 and s2 (q = 5 ties c2's; the larger event id wins) with tau = 5: the canary gets
no item at all.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from agent.core.batch import BatchConfig, build
from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.judgment import JudgmentConfig, samples
from agent.core.judgments.labels import Label
from agent.core.judgments.report import report
from agent.core.reasons import RejectedEvent
from agent.core.sampling import (
    STRATUM_CHARS,
    UNIFORM,
    Budgets,
    Candidate,
    ResultRef,
    budget_for,
    estimate,
    select,
    stratum_key,
)  # fmt: skip
from agent.core.state import PartitionState
from agent.synth import generate, parse_incident
from tests.core.test_pipelines import T0, doc

WEEK = "2026-W48"
SALT = "a deployment's secret"
STABLE, CANARY = "stable-7", "canary-8"
CONFIG = BatchConfig(budgets={UNIFORM: 2}, default_budget=2, salt=SALT)


def made(event_id: str, w: float, u: float, version: str | None, split: bool = True) -> Candidate:
    """One risk-stratum candidate with its own query and chunk (so no grades pool across items)."""
    return Candidate(
        event_id=event_id, ts=0.0, week=WEEK, stratum=stratum_key("app", "lexical", version if split else None),
        app="app", query_id=f"query-{event_id}", query_type="lexical", language="en", cutoff_k=1,
        pipeline_version=version, results=(ResultRef(f"chunk-{event_id}", "p", "wiki", 1, 0.5),),
        w=w, u=u, priority=w / u,
    )  # fmt: skip


EVENTS = [("s1", 5.0, 0.5, STABLE), ("s2", 1.0, 0.2, STABLE), ("s3", 1.0, 0.25, STABLE), ("s4", 2.0, 0.8, STABLE),
          ("s5", 1.0, 0.5, STABLE), ("c1", 1.0, 0.9, CANARY), ("c2", 3.0, 0.6, CANARY)]


def traffic(split: bool = True) -> list[Candidate]:
    return [made(*event, split=split) for event in EVENTS]


def test_the_stratum_key_carries_the_version_label_last():
    assert stratum_key("app", "lexical") == "app|lexical"
    assert stratum_key("app", None, "none") == "app|unknown|none"
    assert stratum_key("app", "lexical", "v|2") == "app|lexical|v|2"  # a version may hold "|": it comes last
    longest = stratum_key("a" * 64, "q" * 64, "v" * 128)  # the longest app, query type and version
    assert len(longest) == STRATUM_CHARS and longest.startswith(f"{'a' * 64}|{'q' * 64}|vvv")


def test_a_budget_without_a_version_holds_for_every_version():
    budgets = {"app|lexical": 5, f"app|lexical|{CANARY}": 9, UNIFORM: 7}
    assert budget_for(budgets, f"app|lexical|{STABLE}", 2) == 5
    assert budget_for(budgets, f"app|lexical|{CANARY}", 2) == 9
    assert budget_for(budgets, "app|lexical|v|2", 2) == 5
    assert budget_for(budgets, "app|lexical", 2) == 5
    assert budget_for(budgets, "app|semantic|v", 2) == 2
    assert budget_for(budgets, UNIFORM, 2) == 7
    assert Budgets(k=3, uniform_k=4, k_by_stratum=budgets).k_for(f"app|lexical|{STABLE}") == 5
    assert Budgets(k=3, uniform_k=4, k_by_stratum=budgets).k_for(UNIFORM) == 4


def test_a_canary_gets_its_own_sample_and_weights():
    stable = select([c for c in traffic() if c.pipeline_version == STABLE], 2)
    canary = select([c for c in traffic() if c.pipeline_version == CANARY], 2)
    assert [c.event_id for c in stable.items] == ["s1", "s2"] and stable.tau == 4.0
    assert [max(c.w, stable.tau) / c.w for c in stable.items] == [1.0, 4.0]
    assert sorted(c.event_id for c in canary.items) == ["c1", "c2"] and canary.tau == 0.0
    unsplit = select(traffic(split=False), 2)
    assert [c.event_id for c in unsplit.items] == ["s1", "s2"] and unsplit.tau == 5.0


def test_the_batch_key_and_manifest_carry_the_version_the_items_do_not():
    batch = build(WEEK, traffic(), CONFIG)
    assert batch.manifest["strata"] == {
        f"app|lexical|{CANARY}": {"k": 2, "tau": 0.0, "events": 2.0, "sampled": 2},
        f"app|lexical|{STABLE}": {"k": 2, "tau": 4.0, "events": 5.0, "sampled": 2},
    }
    rows = {row["event_id"]: row for row in batch.key}
    assert {e: (r["pipeline_version"], r["weight"]) for e, r in rows.items()} == {
        "s1": (STABLE, 1.0), "s2": (STABLE, 4.0), "c1": (CANARY, 1.0), "c2": (CANARY, 1.0)}
    text = json.dumps(batch.items)
    assert "stable" not in text and "canary" not in text and "app|" not in text
    assert all(set(item) == {"item", "judges", "query", "chunks"} for item in batch.items)


def test_the_report_slices_traffic_precision_by_version():
    relevant = {"s1": True, "s2": False, "c1": True, "c2": False}
    out = report(*_judged(build(WEEK, traffic(), CONFIG), relevant))
    by_version = {s["value"]: (s["items"], s["precision"]["estimate"]) for s in out["slices"]["pipeline_version"]}
    # stable: (1 * 1 + 4 * 0) / (1 + 4); canary: (1 * 1 + 1 * 0) / 2; worst first
    assert by_version == {STABLE: (2, pytest.approx(0.2)), CANARY: (2, pytest.approx(0.5))}
    assert [s["value"] for s in out["slices"]["pipeline_version"]] == [STABLE, CANARY]
    unversioned = [made(e, w, u, None if v == CANARY else v) for e, w, u, v in EVENTS]
    out = report(*_judged(build(WEEK, unversioned, CONFIG), relevant))
    assert [s["value"] for s in out["slices"]["pipeline_version"]] == [STABLE, "none"]  # as the gauges name it
    traffic_all = next(v for v in out["views"] if v["view"] == "traffic" and v["stratum"] == "all")
    assert traffic_all["metrics"]["precision"]["estimate"] == pytest.approx(2 / 7)  # (1 + 1) / (1 + 4 + 1 + 1)


def _judged(batch, relevant):
    """The batch's manifest and key, and one judge's grade of each item's chunk: 3 if relevant, else 0."""
    return batch.manifest, batch.key, [Label(batch_id=batch.batch_id, item=row["item"], chunk=row["chunks"][0]["chunk"], judge="j1",
                                             grade=3 if relevant[row["event_id"]] else 0, tags=(), evidence_group=None) for row in batch.key]


def test_each_event_is_sampled_under_the_version_label_its_gauges_carry():
    """One learned version per app: the second version of an app folds into `other`, in the gauges'
    keys and in the sampler's strata alike."""
    lines = list(generate(400, seed=3, rate=5, incidents=[parse_incident("score-drift@0")]))
    state = PartitionState(CoreConfig(by_pipeline_version=True, max_pipeline_versions=1),
                           judgment=JudgmentConfig(budgets=Budgets(k=2, uniform_k=3)))
    seen = Counter()
    for line in lines:
        try:
            state.process(line)
        except RejectedEvent:
            continue
        label = state.context.pipeline_version
        assert state.take_added()[("retrievals", state.context.app, label)] == 1  # the gauges' keys
        seen[label] += 1
    assert seen["other"] > 0
    sampler = state.feature("judgment").sampler
    strata = {s for w in sampler.weeks() for s in sampler.strata(w)} - {UNIFORM}
    assert strata and all(s.count("|") == 2 and s.split("|", 2)[2] in seen for s in strata)
    assert any(s.endswith("|other") for s in strata)
    off = PartitionState(CoreConfig(), judgment=JudgmentConfig())
    off.process(lines[0])
    assert off.context.pipeline_version is None
    assert all(s.count("|") == 1 for w in off.feature("judgment").sampler.weeks() for s in off.feature("judgment").sampler.strata(w) if s != UNIFORM)


def test_a_version_forgotten_and_learned_again_is_sampled_in_its_own_stratum_again():
    """Strata are keyed by the label: while forgotten, a version's events go to `other`'s stratum;
    learned again, to its own, within the week's bound of strata."""
    state = PartitionState(CoreConfig(by_pipeline_version=True, max_pipeline_versions=1),
                           judgment=JudgmentConfig(budgets=Budgets(k=10, uniform_k=1)))
    # v1; v2 (other); v2 learned once v1 has had no event for 900 s; v1 (other); v1 learned again.
    stream = [("v1", T0), ("v2", T0 + 60), ("v2", T0 + 1000), ("v2", T0 + 1020), ("v1", T0 + 1080),
              ("v1", T0 + 3000), ("v1", T0 + 3060)]
    for i, (version, t) in enumerate(stream):
        state.process(doc(i, version, t=t))
    sampler = state.feature("judgment").sampler
    (week,) = sampler.weeks()
    kept = {s: sorted(c.event_id for c in sampler.kept(week, s)) for s in sampler.strata(week) if s != UNIFORM}
    assert kept == {"alpha|unknown|v1": ["e-0", "e-6"], "alpha|unknown|other": ["e-1", "e-2", "e-4", "e-5"],
                    "alpha|unknown|v2": ["e-3"]}


def test_a_generated_low_traffic_canary_is_judged_and_its_traffic_estimated():
    """A canary taking about 2 % of ten minutes of traffic (the last of them): split by version,
    each of its strata holds up to K of its events; its sampled weights estimate how many events it
    served, within the design's interval; judges never see which version served an item."""
    lines = list(generate(3000, seed=11, rate=5, incidents=[parse_incident("score-drift@9")]))
    events = []
    for line in lines:
        try:
            events.append(decode(line).event)
        except RejectedEvent:
            pass
    canaries = {e.pipeline.version for e in events if e.pipeline and e.pipeline.version and "canary" in e.pipeline.version}
    served = Counter(e.pipeline.version for e in events if e.pipeline and e.pipeline.version in canaries)
    assert canaries and 0 < sum(served.values()) < 0.05 * len(events)
    budgets = Budgets(k=3, uniform_k=5)

    split, unsplit = _kept(lines, True, budgets), _kept(lines, False, budgets)  # five versions: none folds
    week = Counter(c.week for c in split).most_common(1)[0][0]
    config = BatchConfig(budgets={UNIFORM: 5}, default_budget=3, salt=SALT)
    batch, before = build(week, split, config), build(week, unsplit, config)

    def judged_canary(b):
        return sum(r["pipeline_version"] in canaries and r["stratum"] != UNIFORM for r in b.key)

    assert judged_canary(batch) > judged_canary(before)
    versions = Counter(r["pipeline_version"] for r in batch.key if r["stratum"] != UNIFORM)
    assert all(versions[v] >= 3 for v in canaries)  # at least K of each canary, whatever its share
    for stratum, found in batch.manifest["strata"].items():
        if stratum != UNIFORM:
            assert found["sampled"] <= 3 and stratum.count("|") == 2
    for version in canaries:
        chosen = {k: s for k, s in samples(split, budgets).items()
                  if k[0] == week and k[1] != UNIFORM and k[1].split("|", 2)[2] == version}
        assert chosen and all(c.pipeline_version == version for s in chosen.values() for c in s.items)
        found = [estimate(s, lambda c: 1.0) for s in chosen.values()]
        total, spread = sum(f.total for f in found), math.sqrt(sum(f.variance for f in found))
        assert abs(total - served[version]) <= 4 * spread + 1e-9
    text = json.dumps(batch.items)
    assert not any(version in text for version in canaries)
    labels = [Label(batch_id=batch.batch_id, item=row["item"], chunk=chunk["chunk"], judge="j1", grade=chunk["rank"] % 4, tags=(),
                    evidence_group=None)
              for row in batch.key if row["item"] for chunk in row["chunks"]]
    slices = {s["value"]: s["items"] for s in report(batch.manifest, batch.key, labels)["slices"]["pipeline_version"]}
    assert all(slices[v] == sum(r["pipeline_version"] == v and r["item"] is not None and r["stratum"] != UNIFORM
                                for r in batch.key) for v in canaries)


def test_replay_takes_the_sample_split_by_version_as_the_agent_does(tmp_path, capsys):
    from agent.cli import main

    lines = list(generate(600, seed=5, rate=5, incidents=[parse_incident("score-drift@0")]))
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    config = tmp_path / "ragdrift.yaml"
    config.write_text(json.dumps({"windows": {"by_pipeline_version": True, "max_pipeline_versions": 8},
                                  "judgment": {"budget": 2, "uniform_budget": 3, "salt": SALT}}))
    assert main(["replay", str(events), "--sample", "--format", "json", "--config", str(config)]) == 0
    sample = json.loads(capsys.readouterr().out)["sample"]
    rows = _kept(lines, True, Budgets(k=2, uniform_k=3))
    weeks = {c.week for c in rows}
    assert {w: set(strata) for w, strata in sample.items()} == {w: {k[1] for k in samples(rows, Budgets()) if k[0] == w}
                                                                for w in weeks}
    assert any("canary" in stratum for strata in sample.values() for stratum in strata)


def _kept(lines, split: bool, budgets: Budgets) -> list[Candidate]:
    """What one partition's sampler keeps of `lines`, split by pipeline version or not."""
    core = CoreConfig(by_pipeline_version=split, max_pipeline_versions=8)
    state = PartitionState(core, judgment=JudgmentConfig(budgets=budgets, salt=SALT))
    for line in lines:
        try:
            state.process(line)
        except RejectedEvent:
            pass
    s = state.feature("judgment").sampler
    return [c for w in s.weeks() for st in s.strata(w) for c in s.kept(w, st)]
