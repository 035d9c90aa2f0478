"""Sampling candidates, strata and the top-K selection that merges replicas.

A candidate is one event offered to one stratum: ids, slice labels and the
admitted results by id and score, never text (judges get text later, through
the team's resolver). Each event is offered twice: to its risk stratum
`app|query_type` with its risk weight w, and to the `uniform` stratum with
w = 1. Split by pipeline version, the risk stratum is `app|query_type|version`
(the bounded version label): a canary's events are then sampled against each
other, K a week, however little traffic it takes. Every event still lands in
exactly one risk stratum, so the risk strata still partition the traffic. Both use the same uniform u, so the two samples overlap as much as they
can (an event judged once serves both); each is a priority sample on its own.

`select` is the whole of priority sampling (Duffield, Lund, Thorup 2007):
the K largest priorities q = w / u, and tau = the (K + 1)-th largest (0 when
there are at most K candidates: then every one is in, with probability 1).
Top-K selections merge: the top K + 1 of the union of each replica's top
K + 1 are the top K + 1 of all candidates, so `select` over what the
replicas kept equals `select` over all traffic.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

import msgspec

from agent.core.facts import Facts
from agent.core.pipelines import version_of
from agent.core.sampling.priority import iso_week, uniform
from agent.core.sampling.risk import UNKNOWN, Risk

UNIFORM = "uniform"  # the stratum where every event is offered with w = 1
OTHER = "other"  # risk strata beyond the sampler's bound fold into this one
STRATUM_CHARS = 255  # the longest stratum key: what the store's stratum column holds

class ResultRef(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One admitted result, stored as a JSON array. Rows written before
    `age_days` and `cited` existed hold the first five fields only, and load
    with both unknown (None)."""

    chunk_id: str
    parent_id: str
    source: str
    rank: int
    score: float
    age_days: float | None = None  # content age at event time; None when unknown or not yet effective
    cited: bool | None = None  # cited by the answer; None when the event reports no citations


class Candidate(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One event offered to one stratum: plain data, no raw text."""

    event_id: str
    ts: float  # event time, epoch seconds
    week: str  # ISO week of ts, as "2026-W48"
    stratum: str
    app: str
    query_id: str  # the producer's salted hash of the query
    query_type: str  # "unknown" when the event has none
    language: str  # lower case; "unknown" when the event has none
    cutoff_k: int
    pipeline_version: str | None
    results: tuple[ResultRef, ...]  # the admitted results, in rank order
    w: float  # weight in this stratum (1 in the uniform one)
    u: float  # uniform in (0, 1] from (salt, event_id, week)
    priority: float  # w / u
    signals: tuple[str, ...] = ()  # risk signals that fired (in every stratum, for the record)

    @property
    def key(self) -> tuple[float, str]:
        """The sort key: priority, ties broken by event id (larger wins), so
        what is kept depends on the set of candidates, never their order."""
        return (self.priority, self.event_id)


def stratum_key(app: str, query_type: str | None, version: str | None = None) -> str:
    """`app|query_type`, or `app|query_type|version` given a pipeline version label. Neither an app
    name nor a query type can hold "|", so the version is everything after the second one. A version
    long enough to take the key past `STRATUM_CHARS` is cut (two such versions then share a stratum,
    which stays a priority sample of the traffic offered to it; the candidate keeps the whole version)."""
    key = f"{app}|{query_type or UNKNOWN}"
    return key if version is None else f"{key}|{version}"[:STRATUM_CHARS]


def budget_for(budgets: Mapping[str, int], stratum: str, default: int) -> int:
    """A stratum's K: its own, else that of its `app|query_type` (a budget given without a version
    holds for every version of it), else `default`."""
    found = budgets.get(stratum)
    if found is None:
        found = budgets.get("|".join(stratum.split("|", 2)[:2]), default)
    return found


def strata_for(app: str, query_type: str | None, w: float) -> tuple[tuple[str, float], ...]:
    """(stratum, weight) pairs an event is offered to: its risk stratum with w, the uniform one with 1."""
    return ((stratum_key(app, query_type), w), (UNIFORM, 1.0))


def candidates_of(facts: Facts, risk: Risk, salt: str = "", stratum: str | None = None) -> tuple[Candidate, ...]:
    """The event's candidates, one per stratum of `strata_for`. `stratum`
    replaces the risk stratum's key, e.g. one built from bounded label values
    (`stratum_key(labels["app"](app), labels["query_type"](query_type))`)."""
    event = facts.event
    week = iso_week(facts.ts)
    u = uniform(event.event_id, week, salt)
    strata = strata_for(event.app, event.query.type, risk.weight)
    if stratum is not None:
        strata = tuple((stratum if key != UNIFORM else key, w) for key, w in strata)
    return tuple(candidate(facts, key, w, week, u, risk.signals) for key, w in strata)


def candidate(facts: Facts, stratum: str, w: float, week: str, u: float, signals: tuple[str, ...]) -> Candidate:
    """One candidate of the event, its week and uniform already known."""
    event = facts.event
    query = event.query
    cited = facts.citations
    if cited is None:  # a list, then a tuple: cheaper than a tuple of a generator
        results = [ResultRef(r.chunk_id, r.parent_id, r.source, r.rank, r.score, age)
                   for r, age in zip(facts.admitted, facts.admitted_ages)]
    else:
        results = [ResultRef(r.chunk_id, r.parent_id, r.source, r.rank, r.score, age, c)
                   for r, age, c in zip(facts.admitted, facts.admitted_ages, cited)]
    return Candidate(
        event_id=event.event_id,
        ts=facts.ts,
        week=week,
        stratum=stratum,
        app=event.app,
        query_id=query.id,
        query_type=query.type or UNKNOWN,
        language=query.language.lower() if query.language else UNKNOWN,
        cutoff_k=event.cutoff_k,
        pipeline_version=version_of(event),
        results=tuple(results),
        w=w,
        u=u,
        priority=w / u,
        signals=signals,
    )


def check(candidate: Candidate) -> None:
    """Refuse a candidate the estimator could not use (w <= 0, u outside (0, 1], priority not w / u)."""
    w, u = candidate.w, candidate.u
    if not (w > 0 and 0 < u <= 1 and w / u < float("inf")):
        raise ValueError(f"candidate {candidate.event_id}: needs w > 0 and u in (0, 1], got w={w}, u={u}")
    if candidate.priority != w / u:
        raise ValueError(f"candidate {candidate.event_id}: priority {candidate.priority} is not w / u")


class Selection(msgspec.Struct, frozen=True, gc=False):
    items: tuple[Candidate, ...]  # the K largest priorities, largest first
    tau: float  # the (K + 1)-th largest priority; 0 when every candidate is in


def unique(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per event id: the one with the largest key (a replayed
    event with another weight keeps its highest priority, whatever the order)."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        kept = best.get(c.event_id)
        if kept is None or c.key > kept.key:
            best[c.event_id] = c
    return list(best.values())


def select(candidates: Iterable[Candidate], k: int) -> Selection:
    """Priority sampling over the candidates of one stratum and week, from any number of replicas."""
    if k < 0:
        raise ValueError("k must be >= 0")
    top = heapq.nlargest(k + 1, unique(candidates), key=_key)
    tau = top[k].priority if len(top) > k else 0.0
    return Selection(tuple(top[:k]), tau)


def _key(c: Candidate) -> tuple[float, str]:
    return (c.priority, c.event_id)
