"""What a comparison reads off each query: the metrics, evidence groups, zero results and the served facts.

The five ranking metrics are agent/core/judgments/metrics.py's, under the
chosen policy. Two more:

- `evidenceGroupRecall`: of the query's evidence groups (sets of docs that
  answer it together), the share whose every doc is in the top k; undefined
  (NaN) for a query without groups.
- `zeroResult`: 1 when the top k is empty, for a query the qrels hold
  something relevant for (an answerable query left without results); NaN for
  the others, where returning nothing may be right. Lower is better.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from agent.core.judgments.metrics import METRICS, Policy, per_query
from agent.core.judgments.runs import Run

COMPARED = (*METRICS, "evidenceGroupRecall", "zeroResult")
DIRECTION = {name: -1 if name == "zeroResult" else 1 for name in COMPARED}  # +1: higher is better
Groups = Mapping[str, Sequence[Sequence[str]]]  # query -> evidence groups


def values(qrels: Mapping[str, Mapping[str, float]], ranking: Mapping[str, Sequence[str]], queries: Sequence[str],
           k: int, policy: Policy, evidence: Groups) -> dict[str, np.ndarray]:
    """Each compared metric per query, in the order of `queries`."""
    rows = [per_query(qrels[q], ranking[q], k, policy) for q in queries]
    out = {name: np.array([row[name] for row in rows], dtype=float) for name in METRICS}
    out["evidenceGroupRecall"] = np.array([group_recall(evidence.get(q, ()), ranking[q][:k]) for q in queries])
    out["zeroResult"] = np.array([float(not ranking[q][:k]) if answerable(qrels[q], policy) else math.nan
                                  for q in queries])
    return out


def group_recall(groups: Sequence[Sequence[str]], top: Sequence[str]) -> float:
    if not groups:
        return math.nan
    shown = set(top)
    return sum(set(group) <= shown for group in groups) / len(groups)


def answerable(judged: Mapping[str, float], policy: Policy) -> bool:
    return any(grade >= policy.threshold for grade in judged.values())


def flagged(run: Run, k: int, fact: str) -> dict[str, set[str]] | None:
    """Per query, the docs in the top k the run marks with `fact` ("unauthorized" or "stale");
    None when the run says nothing about that fact for any result."""
    if not any(getattr(s, fact) is not None for served in run.served.values() for s in served):
        return None
    return {query: {s.doc for s in served[:k] if getattr(s, fact)} for query, served in run.served.items()}
