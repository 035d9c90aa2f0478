"""The whole-input summary `ragdrift replay` prints, from a totals tally."""

from __future__ import annotations

import math
from collections import defaultdict

from agent.core.sources import concentration
from agent.core.tally import Tally


def _by(tally: Tally, name: str, position: int) -> dict[str, float]:
    """Sum a family over every label except the one at `position`."""
    parts: dict[str, list[float]] = defaultdict(list)
    for key, value in tally.items():
        if key[0] == name:
            parts[key[position]].append(value)
    return {label: math.fsum(values) for label, values in parts.items()}


def _sum(tally: Tally, name: str) -> float:
    """Exact float sum, so the summary does not depend on key order."""
    return math.fsum(v for k, v in tally.items() if k[0] == name)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def _mean(tally: Tally, histogram: str) -> float | None:
    return _ratio(_sum(tally, histogram + "_sum"), _sum(tally, histogram + "_count"))


def summarize(totals: Tally, rejected: dict[str, int]) -> dict:
    """Every figure over the whole input, by DESIGN.md's definitions; None when undefined."""
    processed = _sum(totals, "retrievals")
    by_source = _by(totals, "admitted_results", 2)
    hhi, top_share = concentration(by_source) if any(by_source.values()) else (None, None)
    type_counts = _by(totals, "query_type_retrievals", 2)
    filters: dict[str, dict[str, int]] = {}
    for key, value in totals.items():
        if key[0] == "filter_outcomes":
            filters.setdefault(key[1], {"applied": 0, "skipped": 0, "error": 0, "removed": 0})[key[2]] += int(value)
        elif key[0] == "filter_removed_chunks":
            filters.setdefault(key[1], {"applied": 0, "skipped": 0, "error": 0, "removed": 0})["removed"] += int(value)
    return {
        "events": {
            "processed": int(processed),
            "late": int(_sum(totals, "late_events")),
            "rejected": dict(sorted(rejected.items())),
        },
        "zero_result_rate": _ratio(_sum(totals, "zero_result_retrievals"), processed),
        "filter_zero_rate": _ratio(_sum(totals, "filter_zero_retrievals"), processed),
        "unauthorized_results": int(_sum(totals, "unauthorized_results")),
        "unauthorized_events": int(_sum(totals, "unauthorized_retrievals")),
        "unauthorized_risk_events": int(_sum(totals, "unauthorized_risk_retrievals")),
        "stale_results": int(_sum(totals, "stale_results")),
        "stale_conflict_events": int(_sum(totals, "stale_conflict_retrievals")),
        "not_yet_effective_results": int(_sum(totals, "not_yet_effective_results")),
        "admitted_results": int(_sum(totals, "admitted_results")),
        "source_hhi": hhi,
        "top_source_share": top_share,
        "mean_top1_score": _mean(totals, "top1_score"),
        "mean_admitted_score": _mean(totals, "admitted_score"),
        "mean_score_gap": _mean(totals, "score_gap"),
        "mean_content_age_days": _mean(totals, "content_age_days"),
        "mean_parent_diversity": _mean(totals, "parent_diversity_ratio"),
        "duplicate_fingerprint_results": int(_sum(totals, "duplicate_fingerprint_results")),
        "query_type_share": {t: c / processed for t, c in sorted(type_counts.items())} if processed else {},
        "language_share": {
            t: c / processed for t, c in sorted(_by(totals, "query_language_retrievals", 1).items())
        }
        if processed
        else {},
        "new_term_rate": _ratio(_sum(totals, "query_new_terms"), _sum(totals, "query_terms")),
        "filters": dict(sorted(filters.items())),
    }
