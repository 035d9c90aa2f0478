"""The security review queue: every event that served an unauthorized result.

Unsampled: each such event is one incident for the security team, kept with
what the event carried in privacy-safe form (hashed ids, labels, numbers).
Events served while identity claims were missing are incidents too, since
nobody can tell whom their results were for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from agent.core.facts import Facts


@dataclass(frozen=True, kw_only=True)
class Incident:
    event_id: str
    ts: float
    app: str
    query_id: str
    tenant: str  # the asking principal's tenant
    claims_present: bool
    pipeline_version: str | None
    results: int  # results served
    # (chunk_id, source, rank, result tenant, admitted) of each unauthorized result, in rank order
    unauthorized: tuple[tuple[str, str, int, str | None, bool], ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def incident_of(facts: Facts) -> Incident | None:
    """The event's incident: one with an unauthorized result, or with the risk of one; None otherwise."""
    if not (facts.unauthorized or facts.unauthorized_risk):
        return None
    event = facts.event
    admitted = {id(r) for r in facts.admitted}
    return Incident(
        event_id=event.event_id,
        ts=facts.ts,
        app=event.app,
        query_id=event.query.id,
        tenant=event.principal.tenant,
        claims_present=event.principal.claims_present,
        pipeline_version=event.pipeline.version if event.pipeline is not None else None,
        results=len(event.results),
        unauthorized=tuple((r.chunk_id, r.source, r.rank, r.tenant, id(r) in admitted) for r in facts.unauthorized),
    )
