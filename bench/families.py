"""The seven metric families every peer of bench/peers.py computes, once.

What a team's own consumer would count per retrieval event, by the agent's
definitions (docs/metrics.md): retrievals, zero-result retrievals, the top-1
score, the content age of admitted results, admitted results per source,
filter outcomes, unauthorized results. Each peer calls `observe` on every
parsed event and folds with `add` and `merge`, so peers compute the same
thing and their totals compare with the agent's own. Plain dicts of plain
values: a windowed peer keeps them in its state store as JSON. Standard
library only: the whylogs peer runs in an environment of its own.
"""

from __future__ import annotations

from datetime import datetime

DAY = 86400.0
TABLES = ("admitted_results", "filter_outcomes")  # the families with labels: {label: count}
SCALARS = ("retrievals", "zero_result_retrievals", "top1_score_count", "top1_score_sum", "content_age_days_count",
           "content_age_days_sum", "unauthorized_results")
DESCRIPTION = ("retrievals, zero results, top-1 score and content age (count, sum), admitted results per source, "
               "filter outcomes, unauthorized results")


def _epoch(text: str) -> float:
    """RFC 3339 date-time, or a date as midnight UTC, in epoch seconds."""
    return datetime.fromisoformat(text.upper() if len(text) > 10 else text + "T00:00:00+00:00").timestamp()


def _rank(result: dict) -> int:
    return result["rank"]


def observe(event: dict) -> tuple:
    """One event's contribution: (zero, top1, ages, admitted sources, filter outcomes, unauthorized results)."""
    results = sorted(event["results"], key=_rank)  # the log's order need not be the rank order
    ts = _epoch(event["ts"])
    principal = event["principal"]
    tenant, groups = principal["tenant"], None
    cutoff = event["cutoff_k"]
    ages, sources, unauthorized = [], [], 0
    for r in results:
        result_tenant = r.get("tenant")
        if result_tenant is not None and result_tenant != tenant:
            unauthorized += 1
        elif r.get("acl"):
            groups = groups or set(principal["groups"])
            if groups.isdisjoint(r["acl"]):
                unauthorized += 1
        packed = r.get("packed")
        if not (r["rank"] <= cutoff if packed is None else packed):
            continue
        sources.append(r["source"])
        effective = r.get("effective_date")
        if effective is not None and (effective := _epoch(effective)) <= ts:
            ages.append((ts - effective) / DAY)
    filters = [f"{f['name']}/{f['status']}" for f in event.get("filters") or ()]
    return not results, results[0]["score"] if results else None, ages, sources, filters, unauthorized


def empty() -> dict:
    return {**dict.fromkeys(SCALARS, 0), **{table: {} for table in TABLES}}


def add(totals: dict, observed: tuple) -> dict:
    """`totals` with one event's `observe` added (in place; returned for reducers)."""
    zero, top1, ages, sources, filters, unauthorized = observed
    totals["retrievals"] += 1
    totals["zero_result_retrievals"] += zero
    if top1 is not None:
        totals["top1_score_count"] += 1
        totals["top1_score_sum"] += top1
    totals["content_age_days_count"] += len(ages)
    totals["content_age_days_sum"] += sum(ages)
    totals["unauthorized_results"] += unauthorized
    for table, labels in (("admitted_results", sources), ("filter_outcomes", filters)):
        counts = totals[table]
        for label in labels:
            counts[label] = counts.get(label, 0) + 1
    return totals


def merge(totals: dict, other: dict) -> dict:
    """`totals` plus `other` (in place), for totals over several windows or keys."""
    for name in SCALARS:
        totals[name] += other[name]
    for table in TABLES:
        counts = totals[table]
        for label, n in other[table].items():
            counts[label] = counts.get(label, 0) + n
    return totals


def differences(expected: dict, got: dict) -> list[str]:
    """The families whose totals differ: counts exactly, sums of floats to 1e-9 (their order of addition differs)."""
    out = []
    for name in SCALARS:
        a, b = expected[name], got[name]
        if (abs(a - b) > 1e-9 * max(abs(a), 1.0)) if name.endswith("_sum") else a != b:
            out.append(f"{name}: {b} where the agent has {a}")
    for table in TABLES:
        if {k: v for k, v in expected[table].items() if v} != {k: v for k, v in got[table].items() if v}:
            got_, expected_ = dict(sorted(got[table].items())), dict(sorted(expected[table].items()))
            out.append(f"{table}: {got_} where the agent has {expected_}")
    return out
