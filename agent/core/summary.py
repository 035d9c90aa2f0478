"""The whole-input summary `ragdrift replay` prints, from a totals tally (and one per pipeline version)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from agent.core.access import UNAUTHORIZED_RESULTS, UNAUTHORIZED_RETRIEVALS, UNAUTHORIZED_RISK
from agent.core.families import LATE_EVENTS
from agent.core.filters import OUTCOMES, REMOVED
from agent.core.freshness import AGE, NOT_YET_EFFECTIVE, STALE_CONFLICTS, STALE_RESULTS
from agent.core.pipelines import of_version, versions_in
from agent.core.query_mix import LANGUAGES, NEW_TERMS, QUERY_TYPES, TERMS
from agent.core.scores import ADMITTED, GAP, TOP1
from agent.core.sources import ADMITTED_RESULTS, DIVERSITY, DUPLICATES, concentration
from agent.core.tally import Tally
from agent.core.zero_results import FILTER_ZERO, RETRIEVALS, ZERO_RESULTS


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


def summarize(totals: Tally, rejected: dict[str, int]) -> dict[str, Any]:
    """Every figure over the whole input, by the per-event definitions of docs/metrics.md; None when undefined."""
    processed = _sum(totals, RETRIEVALS.name)
    by_source = _by(totals, ADMITTED_RESULTS.name, 2)
    hhi, top_share = concentration(by_source) if any(by_source.values()) else (None, None)
    type_counts = _by(totals, QUERY_TYPES.name, 2)
    filters: dict[str, dict[str, int]] = {}
    for key, value in totals.items():
        if key[0] == OUTCOMES.name:
            filters.setdefault(key[1], {"applied": 0, "skipped": 0, "error": 0, "removed": 0})[key[2]] += int(value)
        elif key[0] == REMOVED.name:
            filters.setdefault(key[1], {"applied": 0, "skipped": 0, "error": 0, "removed": 0})["removed"] += int(value)
    return {
        "events": {
            "processed": int(processed),
            "late": int(_sum(totals, LATE_EVENTS.name)),
            "rejected": dict(sorted(rejected.items())),
        },
        "zero_result_rate": _ratio(_sum(totals, ZERO_RESULTS.name), processed),
        "filter_zero_rate": _ratio(_sum(totals, FILTER_ZERO.name), processed),
        "unauthorized_results": int(_sum(totals, UNAUTHORIZED_RESULTS.name)),
        "unauthorized_events": int(_sum(totals, UNAUTHORIZED_RETRIEVALS.name)),
        "unauthorized_risk_events": int(_sum(totals, UNAUTHORIZED_RISK.name)),
        "stale_results": int(_sum(totals, STALE_RESULTS.name)),
        "stale_conflict_events": int(_sum(totals, STALE_CONFLICTS.name)),
        "not_yet_effective_results": int(_sum(totals, NOT_YET_EFFECTIVE.name)),
        "admitted_results": int(_sum(totals, ADMITTED_RESULTS.name)),
        "source_hhi": hhi,
        "top_source_share": top_share,
        "mean_top1_score": _mean(totals, TOP1.name),
        "mean_admitted_score": _mean(totals, ADMITTED.name),
        "mean_score_gap": _mean(totals, GAP.name),
        "mean_content_age_days": _mean(totals, AGE.name),
        "mean_parent_diversity": _mean(totals, DIVERSITY.name),
        "duplicate_fingerprint_results": int(_sum(totals, DUPLICATES.name)),
        "query_type_share": {t: c / processed for t, c in sorted(type_counts.items())} if processed else {},
        "language_share": {
            t: c / processed for t, c in sorted(_by(totals, LANGUAGES.name, 1).items())
        }
        if processed
        else {},
        "new_term_rate": _ratio(_sum(totals, NEW_TERMS.name), _sum(totals, TERMS.name)),
        "filters": dict(sorted(filters.items())),
    }


def by_version(totals: Tally) -> dict[str, dict[str, Any]]:
    """The summary of each pipeline version label in a tally split by it, but for
    the figures of families without an app label, which are not split: late
    events, rejected messages, languages and filters."""
    out = {}
    for version in versions_in(totals):
        summary = summarize(of_version(totals, version), {})
        del summary["language_share"], summary["filters"]
        summary["events"] = {"processed": summary["events"]["processed"]}
        out[version] = summary
    return out
