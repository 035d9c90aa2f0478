"""Two runs over the same qrels, compared query by query, and the release gate's verdict.

Plain data in, a JSON-able report out. Queries: those in the qrels and in both
runs; the others are counted and named, never scored (a query one run lacks is
not an empty result). Verdict: `fail` when a hard gate fails (unauthorized
results, new stale results, lost evidence) or a gated metric, over all queries
or in a slice, shows a material regression (paired.py); else `not enough data`
when no query or fewer than `min_queries` were compared, a gated metric's
interval reaches past -m without lying wholly beyond it, or facts the gate
requires are missing; else `pass`. A slice's inconclusive interval is listed
but decides nothing: a gate that needed every slice to be powered would never
pass.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.core.compare.gate import GateThresholds
from agent.core.compare.paired import FAIL, INCONCLUSIVE, NOT_MEASURED, PASS, TOO_FEW, Paired, PairedSettings, paired
from agent.core.compare.queries import COMPARED, DIRECTION, Groups, flagged, values
from agent.core.judgments.metrics import Policy
from agent.core.judgments.runs import Run

PASSED, FAILED, NOT_ENOUGH = "pass", "fail", "not enough data"
RANKED_BY = "nDCG"  # the metric the worst losses and wins are ordered by
SAMPLE = 5  # query ids named per uncompared set
Report = dict[str, Any]  # JSON-able
Row = dict[str, Any]  # one metric's, slice's or hard gate's line of the report
Values = dict[str, np.ndarray]  # metric -> its value per compared query


@dataclass(frozen=True, kw_only=True)
class Inputs:
    qrels: Mapping[str, Mapping[str, float]]
    a: Run  # the baseline
    b: Run  # the candidate
    k: int
    policy: Policy
    gate: GateThresholds = GateThresholds()
    slices: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # query -> {dimension: label}
    evidence: Groups = field(default_factory=dict)
    versions: Mapping[str, Any] = field(default_factory=dict)  # printed as given: files, digests, config and corpus


def compare(inputs: Inputs, tick: Callable[[], None] = lambda: None) -> Report:
    """The regression report; `tick` is called once per interval computed (a progress bar's)."""
    gate, a, b = inputs.gate, inputs.a, inputs.b
    settings = PairedSettings(resamples=gate.resamples, level=gate.level, seed=gate.seed, margin_factor=gate.margin_factor,
                              min_margin=gate.min_margin)
    queries = [q for q in inputs.qrels if q in a.ranking and q in b.ranking]
    va = values(inputs.qrels, a.ranking, queries, inputs.k, inputs.policy, inputs.evidence)
    vb = values(inputs.qrels, b.ranking, queries, inputs.k, inputs.policy, inputs.evidence)

    def figure(metric: str, rows: np.ndarray | slice, min_queries: int) -> Row:
        found = paired(va[metric][rows], vb[metric][rows], settings)
        tick()
        return _figure(metric, found, min_queries)

    metrics = [{**figure(m, slice(None), gate.min_queries), "gated": m in gate.metrics} for m in COMPARED]
    slices = [{"dimension": dim, "label": label, **figure(m, rows, gate.min_slice_queries)}
              for (dim, label), rows in _slice_rows(queries, inputs.slices, gate.slice_dimensions).items()
              for m in gate.slice_metrics]
    hard = _hard_gates(inputs, queries, va, vb)
    report: Report = {
        "thresholds": {"k": inputs.k, "policy": inputs.policy.name, "relevance": inputs.policy.threshold,
                       **gate.as_dict()},
        "versions": dict(inputs.versions),
        "queries": _query_sets(inputs, queries),
        "metrics": metrics,
        "slices": slices,
        "hardGates": hard,
        "worst": _worst(queries, va, vb, inputs.slices, gate.worst),
        "latency": _latency(queries, a, b),
    }
    report["verdict"], report["reasons"] = _verdict(report, gate, len(queries))
    return report


def _figure(metric: str, found: Paired | None, min_queries: int) -> Row:
    row = {"metric": metric, "direction": "higher" if DIRECTION[metric] > 0 else "lower"}
    if found is None:
        return {**row, "n": 0, "outcome": NOT_MEASURED}
    return {**row, "n": found.n, "a": found.mean_a, "b": found.mean_b, "delta": found.delta.estimate,
            "low": found.delta.low, "high": found.delta.high, "margin": found.margin,
            "outcome": found.outcome(DIRECTION[metric], min_queries)}


def _slice_rows(queries: Sequence[str], labels: Mapping[str, Mapping[str, str]],
                dimensions: Sequence[str] | None) -> dict[tuple[str, str], np.ndarray]:
    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, query in enumerate(queries):
        for dim, label in labels.get(query, {}).items():
            if dimensions is None or dim in dimensions:
                rows[dim, label].append(i)
    return {key: np.array(found) for key, found in sorted(rows.items())}


def _query_sets(inputs: Inputs, queries: Sequence[str]) -> dict[str, Any]:
    judged = set(inputs.qrels)
    in_a, in_b = (set(run.ranking) | run.unjudged for run in (inputs.a, inputs.b))
    sets = {"onlyInBaseline": (in_a - in_b) & judged, "onlyInCandidate": (in_b - in_a) & judged,
            "inNeitherRun": judged - in_a - in_b, "notJudged": (in_a | in_b) - judged}
    return {"compared": len(queries),
            **{name: {"count": len(found), "sample": sorted(found)[:SAMPLE]} for name, found in sets.items()}}


def _hard_gates(inputs: Inputs, queries: Sequence[str], va: Values, vb: Values) -> list[Row]:
    gate, k = inputs.gate, inputs.k
    rows: list[Row] = []
    for name, fact, limit in (("unauthorized", "unauthorized", gate.max_unauthorized),
                              ("newStale", "stale", gate.max_new_stale)):
        in_a, in_b = flagged(inputs.a, k, fact), flagged(inputs.b, k, fact)
        if in_b is None:
            rows.append({"gate": name, "max": limit, "outcome": NOT_MEASURED})
            continue
        new = sorted((q, d) for q, docs in in_b.items() for d in docs - (in_a or {}).get(q, set()))
        # unauthorized: every one in the candidate counts, a leak the baseline shared is still a leak
        counted = sorted((q, d) for q, docs in in_b.items() for d in docs) if name == "unauthorized" else new
        rows.append({"gate": name, "max": limit, "baseline": None if in_a is None else sum(map(len, in_a.values())),
                     "candidate": sum(map(len, in_b.values())), "new": len(new), "counted": len(counted),
                     "examples": [{"query": q, "doc": d} for q, d in counted[:SAMPLE]],
                     "outcome": FAIL if len(counted) > limit else PASS})
    groups = va["evidenceGroupRecall"]
    if not np.isfinite(groups).any():
        rows.append({"gate": "lostEvidence", "max": gate.max_lost_evidence, "outcome": NOT_MEASURED})
    else:
        lost = [q for q, x, y in zip(queries, groups, vb["evidenceGroupRecall"]) if x > 0 and y == 0]
        rows.append({"gate": "lostEvidence", "max": gate.max_lost_evidence, "counted": len(lost),
                     "examples": [{"query": q} for q in lost[:SAMPLE]],
                     "outcome": FAIL if len(lost) > gate.max_lost_evidence else PASS})
    return rows


def _worst(queries: Sequence[str], va: Values, vb: Values, labels: Mapping[str, Mapping[str, str]],
           count: int) -> dict[str, Any]:
    delta = vb[RANKED_BY] - va[RANKED_BY]
    order = np.argsort(delta, kind="stable")
    rows = [{"query": queries[i], "a": float(va[RANKED_BY][i]), "b": float(vb[RANKED_BY][i]),
             "delta": float(delta[i]), "labels": dict(labels.get(queries[i], {}))} for i in order]
    return {"metric": RANKED_BY, "losses": [r for r in rows[:count] if r["delta"] < 0],
            "wins": [r for r in reversed(rows[-count:]) if r["delta"] > 0] if count else []}


def _latency(queries: Sequence[str], a: Run, b: Run) -> dict[str, Any] | None:
    both = [q for q in queries if q in a.latency_ms and q in b.latency_ms]
    if not both:
        return None
    la, lb = np.array([a.latency_ms[q] for q in both]), np.array([b.latency_ms[q] for q in both])
    p50a, p95a, p50b, p95b = (float(np.percentile(x, p)) for x in (la, lb) for p in (50, 95))
    return {"n": len(both), "p50": {"a": p50a, "b": p50b, "delta": p50b - p50a},
            "p95": {"a": p95a, "b": p95b, "delta": p95b - p95a}}


def _verdict(report: Report, gate: GateThresholds, compared: int) -> tuple[str, list[str]]:
    failed: list[str] = []
    unsure: list[str] = []
    for row in report["hardGates"]:
        if row["outcome"] == FAIL:
            failed.append(f"{row['gate']}: {row['counted']} > {row['max']}")
        elif row["outcome"] == NOT_MEASURED and gate.require_facts and row["gate"] != "lostEvidence":
            unsure.append(f"{row['gate']}: the runs carry no such facts (require_facts)")
    for row in report["metrics"]:
        if row["gated"]:
            judge(row, row["metric"], failed, unsure)
    for row in report["slices"]:
        if row["outcome"] == FAIL:
            judge(row, f"slice {row['dimension']}={row['label']}: {row['metric']}", failed, [])
    if compared < gate.min_queries:
        unsure.append(f"{compared} queries compared, fewer than min_queries {gate.min_queries}")
    elif not compared:  # a gate built with min_queries 0: nothing compared still never passes
        unsure.append("no query compared")
    if failed:
        return FAILED, failed
    return (NOT_ENOUGH, unsure) if unsure else (PASSED, [])


def judge(row: Row, name: str, failed: list[str], unsure: list[str]) -> None:
    """The reason a figure row adds to the failures or to the doubts, if any."""
    outcome = row["outcome"]
    if outcome == FAIL:
        failed.append(f"{name} {'fell' if row['direction'] == 'higher' else 'rose'} by {abs(row['delta']):.4f} "
                      f"(interval {row['low']:+.4f} to {row['high']:+.4f}), beyond the material margin {row['margin']:.4f}")
    elif outcome == INCONCLUSIVE:
        unsure.append(f"{name}: interval {row['low']:+.4f} to {row['high']:+.4f} reaches past the margin "
                      f"{row['margin']:.4f} without lying beyond it")
    elif outcome == TOO_FEW:
        unsure.append(f"{name}: {row['n']} queries")
