"""Generated traffic of two pipeline versions over several days, for the live release gate's tests.

Each day is its own seeded stream of `PER_DAY` events within ten minutes of
event time (so an incident at minute 0 covers the day), the days spread
over `DAYS` UTC days, so the stable version has day-to-day variation. The
candidate serves the same queries (the same stream, shadow-style: same
`query.id`, its own event ids), relabelled as another `pipeline.version`,
with a change that makes it a canary of one kind (`CANARIES`).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from functools import cache

import orjson

from agent import synth

DAYS, PER_DAY = 5, 400
START = datetime(2026, 11, 2, tzinfo=UTC)
STABLE, CANDIDATE = "stable-1", "canary-2"
SLICE = "hr-assistant"  # the app whose top-1 scores the `slice` canary lowers, raising the others'
# leak: unauthorized results; stale: stale conflicts; slice: scores fall in one app and rise in the others,
# so the macro figure improves; equivalent: small noise only.
CANARIES = ("leak", "stale", "slice", "equivalent")


@cache
def day_lines(day: int, incident: str | None = None) -> tuple[bytes, ...]:
    incidents = [synth.parse_incident(f"{incident}@0")] if incident else []
    return tuple(synth.generate(PER_DAY, 100 + day, START + timedelta(days=day), PER_DAY / 600, incidents, 0.0))


def relabel(line: bytes, version: str, prefix: str, change=None) -> bytes:
    event = orjson.loads(line)
    event["event_id"] = f"{prefix}-{event['event_id']}"
    event["pipeline"] = {**(event.get("pipeline") or {}), "version": version}
    if change is not None:
        change(event)
    return orjson.dumps(event)


def _slice(event: dict) -> None:
    shift = -0.3 if event["app"] == SLICE else 0.3
    for result in event["results"]:
        result["score"] = round(result["score"] + shift, 6)


def _noise(rng: random.Random):
    def change(event: dict) -> None:
        jitter = rng.uniform(-0.005, 0.005)
        for result in event["results"]:
            result["score"] = round(result["score"] + jitter, 6)
        if event.get("latency_ms") is not None:
            event["latency_ms"] = round(event["latency_ms"] * rng.uniform(0.98, 1.02), 3)
    return change


def lines(canary: str) -> list[bytes]:
    """Every event of both versions, day by day, stable first."""
    if canary not in CANARIES:
        raise ValueError(canary)
    rng = random.Random(7)
    out = []
    for day in range(DAYS):
        out += [relabel(line, STABLE, "s") for line in day_lines(day)]
        incident = canary if canary in ("leak", "stale") else None
        change = _slice if canary == "slice" else _noise(rng) if canary == "equivalent" else None
        out += [relabel(line, CANDIDATE, "c", change) for line in day_lines(day, incident)]
    return out


FLOAT_SUMS = ("top1_score", "content_age_days", "source_concentration", "latency_seconds")  # summed in any order
