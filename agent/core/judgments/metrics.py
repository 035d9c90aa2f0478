"""Per-query IR metrics over graded qrels, and their macro means.

Two policies, because "precision@5" means different numbers in different tools:

- ``seed``: exactly the metrics script of the domain document (section 5).
  Relevant = grade >= 2; precision over the *returned* count within the cutoff
  (0 for an empty list); recall over the set of judged relevant docs, 1 when
  there are none; reciprocal rank and hit rate within the top k; nDCG@k with
  gain 2^g - 1 on every judged grade (threshold-free), discount log2(rank + 1),
  the ideal from all the query's grades, 1 when the ideal DCG is 0; duplicates
  kept: each repeat counts again for precision and DCG, once for recall.
  Queries: every query of the qrels (a query missing from the run is an empty
  list); run queries without qrels are ignored.
- ``trec``: trec_eval's conventions (as pytrec_eval reports them). Relevant =
  grade >= 1; P@k over k (short lists are not excused); recall_k over the judged
  relevant docs, 0 when there are none; recip_rank over the whole ranking (not
  cut at k); hit rate = success@k; ndcg_cut_k with linear gain max(g, 0)
  (threshold-free), discount log2(rank + 1), ideal from the positive grades,
  0 when the ideal DCG is 0; documents scored in the given order; duplicates
  rejected (trec_eval refuses a repeated docno). Queries: those in both the run
  and the qrels (an empty ranked list still counts, as all zeros).

The threshold, gain and duplicate handling can be overridden on either policy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

METRICS = ("precision", "recall", "reciprocalRank", "hitRate", "nDCG")

Gain = Literal["exp", "linear"]
Duplicates = Literal["reject", "keep"]


@dataclass(frozen=True, kw_only=True)
class Policy:
    """The conventions a metric set follows; see the module docstring."""

    name: str
    threshold: float
    gain: Gain
    duplicates: Duplicates
    precision_over: Literal["returned", "k"]
    empty_score: float  # recall and nDCG of a query with nothing relevant / nothing graded
    rr_within_k: bool
    queries: Literal["qrels", "both"]
    clamp_gain: bool  # negative grades gain 0 (trec_eval) or count negative (seed script)


SEED = Policy(name="seed", threshold=2, gain="exp", duplicates="keep", precision_over="returned", empty_score=1.0, rr_within_k=True,
              queries="qrels", clamp_gain=False)
TREC = Policy(name="trec", threshold=1, gain="linear", duplicates="reject", precision_over="k", empty_score=0.0, rr_within_k=False, queries="both",
              clamp_gain=True)
POLICIES = {"seed": SEED, "trec": TREC}


def policy_of(
    policy: str | Policy = "seed",
    *,
    threshold: float | None = None,
    gain: Gain | None = None,
    duplicates: Duplicates | None = None,
) -> Policy:
    """A named policy with the given options overriding its defaults."""
    base = policy if isinstance(policy, Policy) else POLICIES.get(policy)
    if base is None:
        raise ValueError(f"unknown policy {policy!r}; expected one of {sorted(POLICIES)}")
    if gain is not None and gain not in ("exp", "linear"):
        raise ValueError(f"unknown gain {gain!r}; expected 'exp' or 'linear'")
    if duplicates is not None and duplicates not in ("reject", "keep"):
        raise ValueError(f"unknown duplicates {duplicates!r}; expected 'reject' or 'keep'")
    return replace(base, threshold=base.threshold if threshold is None else threshold,
                   gain=base.gain if gain is None else gain,
                   duplicates=base.duplicates if duplicates is None else duplicates)


def check_duplicates(ranked: Sequence[str]) -> None:
    """Raise ValueError naming the first doc id that appears twice."""
    seen: set[str] = set()
    for doc in ranked:
        if doc in seen:
            raise ValueError(f"duplicate doc id {doc!r} in the ranked list")
        seen.add(doc)


def gain_of(grade: float, policy: Policy) -> float:
    g = max(grade, 0) if policy.clamp_gain else grade
    return 2.0**g - 1.0 if policy.gain == "exp" else float(g)


def dcg(grades: Sequence[float], policy: Policy) -> float:
    """Sum of gain / log2(rank + 1), ranks from 1."""
    return sum(gain_of(g, policy) / math.log2(rank + 2) for rank, g in enumerate(grades))  # in rank order, as the script and trec_eval add


def per_query(
    qrels: Mapping[str, float], ranked: Sequence[str], k: int, policy: Policy = SEED
) -> dict[str, float]:
    """The five metrics of one query at cutoff k under a policy."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if policy.duplicates == "reject":
        check_duplicates(ranked)
    top = list(ranked[:k])
    relevant = {doc for doc, grade in qrels.items() if grade >= policy.threshold}
    hits = [doc for doc in top if doc in relevant]
    rr_depth = top if policy.rr_within_k else ranked
    first = next((rank for rank, doc in enumerate(rr_depth, 1) if doc in relevant), None)
    precision = len(hits) / k if policy.precision_over == "k" else len(hits) / len(top) if top else 0.0
    grades = [qrels.get(doc, 0) for doc in top]
    ideal_grades = sorted(qrels.values(), reverse=True)
    if policy.clamp_gain:
        ideal_grades = [g for g in ideal_grades if g > 0]
    ideal = dcg(ideal_grades[:k], policy)
    return {
        "precision": precision,
        "recall": len(set(hits)) / len(relevant) if relevant else policy.empty_score,
        "reciprocalRank": 1 / first if first else 0.0,
        "hitRate": 1.0 if hits else 0.0,
        "nDCG": dcg(grades, policy) / ideal if ideal else policy.empty_score,
    }


def evaluated_queries(
    qrels: Mapping[str, Mapping[str, float]], run: Mapping[str, Sequence[str]], policy: Policy
) -> list[str]:
    """The queries a policy averages over, in qrels order."""
    if policy.queries == "qrels":
        return list(qrels)
    return [query for query in qrels if query in run]


def evaluate(
    qrels: Mapping[str, Mapping[str, float]],
    run: Mapping[str, Sequence[str]],
    k: int,
    policy: str | Policy = "seed",
    *,
    threshold: float | None = None,
    gain: Gain | None = None,
    duplicates: Duplicates | None = None,
) -> dict[str, Any]:
    """Macro means (rounded to 4 places) and per-query metrics, shaped as the seed script's output."""
    chosen = policy_of(policy, threshold=threshold, gain=gain, duplicates=duplicates)
    queries = evaluated_queries(qrels, run, chosen)
    if not queries:
        raise ValueError("no queries to evaluate")
    rows = {query: per_query(qrels[query], run.get(query, []), k, chosen) for query in queries}
    macro = {name: round(statistics.fmean(row[name] for row in rows.values()), 4) for name in METRICS}
    return {"k": k, "queryCount": len(rows), "macro": macro, "perQuery": rows}
