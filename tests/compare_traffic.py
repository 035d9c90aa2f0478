"""Qrels and runs built from generated traffic, for the release gate's tests.

One query per event (its event id). Qrels: a grade for each result of the
clean stream, from its rank and a hash of its chunk id, so that rankings are
neither perfect nor random; a chunk only an incident brings in is unjudged
(grade 0). Runs: every result in rank order, with `authorized` and `stale`
from the agent's own per-event facts, and the event's latency.
"""

from __future__ import annotations

import zlib
from functools import cache

from agent import synth
from agent.core.decoder import decode
from agent.core.facts import STALE_STATUSES, facts_of
from agent.core.judgments.runs import FORMAT

EVENTS, SEED, RATE = 600, 3, 1.0  # ten minutes of event time: an incident at minute 0 covers all of it


@cache
def events(incident: str | None = None) -> tuple:
    incidents = [synth.parse_incident(f"{incident}@0")] if incident else []
    return tuple(decode(line).event for line in synth.generate(EVENTS, SEED, None, RATE, incidents, 0.0))


def qrels() -> dict:
    return {e.event_id: {r.chunk_id: _grade(r.chunk_id, r.rank) for r in e.results} for e in events()}


def _grade(chunk: str, rank: int) -> int:
    if zlib.crc32(chunk.encode()) % 3 == 0:
        return 0
    return max(0, 3 - (rank - 1) // 2)


def labels() -> dict:
    return {e.event_id: {"app": e.app, "query_type": str(e.query.type), "language": str(e.query.language)}
            for e in events()}


def evidence() -> dict:
    """The first two relevant current results of the clean stream, where there are two: one group each."""
    found = {}
    for e in events():
        relevant = [r.chunk_id for r in e.results
                    if _grade(r.chunk_id, r.rank) >= 2 and r.status not in STALE_STATUSES][:2]
        if len(relevant) == 2:
            found[e.event_id] = [relevant]
    return found


def run(incident: str | None = None, config: str = "baseline", reorder=None) -> dict:
    """A ragdrift.run.v1 run of a stream; `reorder(event, results)` may change each ranking."""
    queries = {}
    for event in events(incident):
        facts = facts_of(event)
        unauthorized = {id(r) for r in facts.unauthorized}
        results = [{"doc": r.chunk_id, "authorized": id(r) not in unauthorized, "stale": r.status in STALE_STATUSES}
                   for r in event.results]
        if reorder is not None:
            results = reorder(event, results)
        queries[event.event_id] = {"results": results, "latency_ms": event.latency_ms or 0.0}
    return {"format": FORMAT, "config": config, "corpus": "synth-corpus", "queries": queries}
