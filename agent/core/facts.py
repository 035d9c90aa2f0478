"""One event's facts, derived once, in a single pass over its results.

Every metric family, the exemplars, the spans and the judgment sampler read
this record: no part of the agent derives a fact from the raw event again,
so the per-event definitions (docs/metrics.md) live here and nowhere else.
"""

from __future__ import annotations

import msgspec

from agent.core.model import Event, Result
from agent.core.rules import epoch

STALE_STATUSES = frozenset(("superseded", "draft", "tombstoned"))
DAY = 86400.0


class Facts(msgspec.Struct, gc=False):
    """Built for every event: a struct, whose constructor runs in C, is cheaper
    to make than a dataclass. It never holds itself, so the collector need not track it."""

    event: Event
    ts: float  # event time, epoch seconds
    admitted: list[Result]  # A: packed results (default rank <= cutoff_k), in rank order
    admitted_score: float | None  # mean score over A
    top1: float | None  # score of the best-ranked result
    gap: float | None  # top-1 minus top-2 score
    unauthorized: list[Result]  # results, admitted or not, outside the principal's tenant or groups
    unauthorized_risk: bool  # results served while identity claims were missing
    stale: int  # stale results in A
    stale_conflict: bool  # A holds a stale and a non-stale result of one parent
    not_yet_effective: int  # results in A effective only after the event
    ages: list[float]  # days since effective_date, for results in A effective by then
    admitted_ages: list[float | None]  # per result in A: its age, None when unknown or not yet effective
    citations: list[bool] | None  # per result in A: cited by the answer; None when the event reports no citations
    rank_shifts: list[int]  # |rank - pre_rerank_rank| where the reranker reported one
    parents: dict[str, int]  # results in A per parent_id
    sources: dict[str, int]  # results in A per source
    duplicate_fingerprints: int  # results in A repeating a better-ranked fingerprint in A
    filter_zero: bool  # filters removed every candidate

    @property
    def zero(self) -> bool:
        return not self.event.results


def facts_of(event: Event) -> Facts:
    ts = event.ts.timestamp()
    results = event.results
    principal = event.principal
    tenant, groups = principal.tenant, None
    cutoff = event.cutoff_k
    admitted: list[Result] = []
    score_sum = 0.0
    stale = not_yet = duplicates = 0
    unauthorized: list[Result] = []
    ages: list[float] = []
    shifts: list[int] = []
    parents: dict[str, int] = {}
    sources: dict[str, int] = {}
    stale_parents: dict[str, int] = {}  # stale results in A per parent_id
    fingerprints: set[str] = set()
    admitted_ages: list[float | None] = []
    for r in results:
        result_tenant = r.tenant
        if result_tenant is not None and result_tenant != tenant:
            unauthorized.append(r)
        elif r.acl:
            if groups is None:
                groups = set(principal.groups)
            if groups.isdisjoint(r.acl):
                unauthorized.append(r)
        before = r.pre_rerank_rank
        if before is not None:
            shifts.append(abs(r.rank - before))
        packed = r.packed
        if not (r.rank <= cutoff if packed is None else packed):
            continue
        admitted.append(r)
        score_sum += r.score
        is_stale = r.status in STALE_STATUSES or (r.expires_at is not None and epoch(r.expires_at) <= ts)
        age = None
        if r.effective_date is not None:
            effective = epoch(r.effective_date)
            if effective <= ts:
                age = (ts - effective) / DAY
                ages.append(age)
            else:
                not_yet += 1
                is_stale = True
        admitted_ages.append(age)
        parent = r.parent_id
        parents[parent] = parents.get(parent, 0) + 1
        source = r.source
        sources[source] = sources.get(source, 0) + 1
        if is_stale:
            stale += 1
            stale_parents[parent] = stale_parents.get(parent, 0) + 1
        fingerprint = r.fingerprint
        if fingerprint is not None:
            fingerprint = fingerprint.lower()
            if fingerprint in fingerprints:
                duplicates += 1
            else:
                fingerprints.add(fingerprint)
    feedback = event.feedback
    citations = None
    if feedback is not None and feedback.cited:
        cited = set(feedback.cited)
        citations = [r.chunk_id in cited for r in admitted]
    stages = event.stages
    return Facts(  # positional, in field order: keywords cost a microsecond an event
        event,
        ts,
        admitted,
        score_sum / len(admitted) if admitted else None,
        results[0].score if results else None,
        results[0].score - results[1].score if len(results) > 1 else None,
        unauthorized,
        not principal.claims_present and bool(results),
        stale,
        bool(stale) and any(parents[parent] > n for parent, n in stale_parents.items()),  # stale beside fresh
        not_yet,
        ages,
        admitted_ages,
        citations,
        shifts,
        parents,
        sources,
        duplicates,
        stages is not None and (stages.candidates or 0) > 0 and stages.after_filter == 0,
    )
