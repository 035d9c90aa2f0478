"""Generated traffic of two pipeline versions, for both halves of the release gate's tests.

Each day is its own seeded stream of `PER_DAY` events within ten minutes of
event time (so an incident at minute 0 covers the day), the days spread
over `DAYS` UTC days, so the stable version has day-to-day variation. The
candidate serves the same queries (the same stream, shadow-style: same
`query.id`, its own event ids), relabelled as another `pipeline.version`,
with a change that makes it a canary of one kind (`CANARIES`).

The live gate reads the events (`lines`); the offline gate reads qrels and
two runs built from the same events (`qrels`, `run`), one ranking per query
id: that of its first event, the same event in both streams. Qrels: a grade
for each result of the stable stream, from its rank and a hash of its chunk
id, so that rankings are neither perfect nor random; a chunk only an
incident brings in is unjudged (grade 0). Runs: every result in rank order,
with `authorized` and `stale` from the agent's own per-event facts, and the
event's latency.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import orjson

from agent import synth
from agent.core.decoder import decode
from agent.core.facts import STALE_STATUSES, facts_of
from agent.core.judgments.runs import FORMAT

DAYS, PER_DAY = 5, 400
K = 5  # the offline gate's cutoff
START = datetime(2026, 11, 2, tzinfo=UTC)
STABLE, CANDIDATE = "stable-1", "canary-2"
SLICE = "hr-assistant"  # the app the `slice` canary ranks worse, with lower scores; it ranks the others better
# leak: unauthorized results; stale: stale conflicts; slice: rankings and scores worse in one app and better
# in the others, so the macro figures improve; equivalent: results alike swapped and small noise only.
CANARIES = ("leak", "stale", "slice", "equivalent")
FLOAT_SUMS = ("top1_score", "content_age_days", "source_concentration", "latency_seconds")  # summed in any order


@cache
def day_lines(day: int, incident: str | None = None) -> tuple[bytes, ...]:
    incidents = [synth.parse_incident(f"{incident}@0")] if incident else []
    return tuple(synth.generate(PER_DAY, 100 + day, START + timedelta(days=day), PER_DAY / 600, incidents, 0.0))


@cache
def lines(canary: str) -> tuple[bytes, ...]:
    """Every event of both versions, day by day, stable first."""
    if canary not in CANARIES:
        raise ValueError(canary)
    rng = random.Random(7)
    change = _slice if canary == "slice" else _equivalent(rng) if canary == "equivalent" else None
    out: list[bytes] = []
    for day in range(DAYS):
        out += [relabel(line, STABLE, "s") for line in day_lines(day)]
        incident = canary if canary in ("leak", "stale") else None
        out += [relabel(line, CANDIDATE, "c", change) for line in day_lines(day, incident)]
    return tuple(out)


def relabel(line: bytes, version: str, prefix: str, change: Callable[[dict], None] | None = None) -> bytes:
    event = orjson.loads(line)
    event["event_id"] = f"{prefix}-{event['event_id']}"
    event["pipeline"] = {**(event.get("pipeline") or {}), "version": version}
    if change is not None:
        change(event)
    return orjson.dumps(event)


def _grade(chunk: str, rank: int) -> int:
    if zlib.crc32(chunk.encode()) % 3 == 0:
        return 0
    return max(0, 3 - (rank - 1) // 2)


def _stale(result: dict) -> bool:
    return result.get("status") in STALE_STATUSES


def _evidence(results: list[dict]) -> list[str]:
    """The first two relevant current results, where there are two: one evidence group."""
    relevant = [r["chunk_id"] for r in results if _grade(r["chunk_id"], r["rank"]) >= 2 and not _stale(r)][:2]
    return relevant if len(relevant) == 2 else []


def _rerank(event: dict, order: list[dict], shift: float) -> None:
    """`order` served in the slots of the old ranking: each slot keeps its rank, score (plus `shift`)
    and packing, so scores still fall with rank."""
    slots = [(r["rank"], r["score"], r.get("packed")) for r in sorted(event["results"], key=lambda r: r["rank"])]
    for result, (rank, score, packed) in zip(order, slots, strict=True):
        result["rank"], result["score"] = rank, round(score + shift, 6)
        if packed is not None:
            result["packed"] = packed
    event["results"] = order


def _slice(event: dict) -> None:
    """In `SLICE` the top `K` upside down and scores lower; elsewhere the most relevant current results
    first and scores higher. Stale results stay out of any top k they were not in."""
    results = sorted(event["results"], key=lambda r: r["rank"])
    if event["app"] == SLICE:
        _rerank(event, results[:K][::-1] + results[K:], -0.3)
        return
    grade = {id(r): _grade(r["chunk_id"], r["rank"]) for r in results}
    _rerank(event, sorted(results, key=lambda r: (_stale(r), -grade[id(r)])), 0.3)


def _equivalent(rng: random.Random) -> Callable[[dict], None]:
    """Neighbours alike in grade, freshness and evidence swapped (the same answer), scores and latency
    jittered."""
    def change(event: dict) -> None:
        results = sorted(event["results"], key=lambda r: r["rank"])
        group = _evidence(results)
        alike = [(_grade(r["chunk_id"], r["rank"]), _stale(r), r["chunk_id"] in group) for r in results]
        order = list(results)
        for i in range(len(order) - 1):
            if alike[i] == alike[i + 1] and zlib.crc32(order[i]["chunk_id"].encode()) % 2 == 0:
                order[i], order[i + 1] = order[i + 1], order[i]
                alike[i], alike[i + 1] = alike[i + 1], alike[i]
        _rerank(event, order, rng.uniform(-0.005, 0.005))
        if event.get("latency_ms") is not None:
            event["latency_ms"] = round(event["latency_ms"] * rng.uniform(0.98, 1.02), 3)
    return change


@cache
def first_events(canary: str, version: str) -> dict[str, Any]:
    """The first event of each query id in one version's stream: query id -> event."""
    found: dict[str, Any] = {}
    for line in lines(canary):
        event = decode(line).event
        if event.pipeline.version == version:
            found.setdefault(event.query.id, event)
    return found


def _stable() -> dict[str, Any]:
    return first_events("equivalent", STABLE)  # the stable stream is the same whatever the canary


def qrels() -> dict[str, dict[str, int]]:
    return {q: {r.chunk_id: _grade(r.chunk_id, r.rank) for r in e.results} for q, e in _stable().items()}


def labels() -> dict[str, dict[str, str]]:
    return {q: {"app": e.app, "query_type": str(e.query.type), "language": str(e.query.language)}
            for q, e in _stable().items()}


def evidence() -> dict[str, list[list[str]]]:
    """The first two relevant current results of each stable ranking, where there are two: one group each."""
    found = {}
    for q, e in _stable().items():
        group = _evidence([{"chunk_id": r.chunk_id, "rank": r.rank, "status": r.status} for r in e.results])
        if group:
            found[q] = [group]
    return found


def run(canary: str = "equivalent", version: str = STABLE) -> dict[str, Any]:
    """A ragdrift.run.v1 run of one version's stream of a canary's traffic."""
    queries = {}
    for query, event in first_events(canary, version).items():
        unauthorized = {id(r) for r in facts_of(event).unauthorized}
        results = [{"doc": r.chunk_id, "authorized": id(r) not in unauthorized, "stale": r.status in STALE_STATUSES}
                   for r in sorted(event.results, key=lambda r: r.rank)]
        queries[query] = {"results": results, "latency_ms": event.latency_ms or 0.0}
    return {"format": FORMAT, "config": version, "corpus": "synth-corpus", "queries": queries}
