"""ISO weeks and the hashed uniforms behind priorities and the holdout.

A priority must not depend on which process, replica or replay computes it,
so its uniform is a hash (blake2b, stable across processes and Python
versions) of (salt, event_id, week), never a random draw. The holdout hashes
the query id under a different personalization, so whether a query is held
out says nothing about whether its events are sampled.

The salt should be the same on every replica and across restarts (else a
replayed event gets another priority) and secret enough that whoever writes
event ids cannot steer them into or out of the sample.
"""

from __future__ import annotations

import re
import struct
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from hashlib import blake2b

HOLDOUT_SHARE = 0.10  # docs/judgments.md: default share of sampled queries held out
WEEK = 7 * 86400
_BITS = 53  # a double holds every integer below 2**53 exactly
_SCALE = float(1 << _BITS)
_SAMPLE = b"ragdrift.sample"  # blake2b personalizations (<= 16 bytes): the hash domains
_HOLDOUT = b"ragdrift.holdout"
_U64 = struct.Struct(">Q").unpack  # an 8-byte digest as an integer: cheaper than int.from_bytes
_WEEK_TEXT = re.compile(r"(\d{4})-W(\d{2})\Z")


def iso_week(ts: float) -> str:
    """ISO 8601 week of the UTC date of `ts`, as "2026-W48"."""
    year, week, _ = datetime.fromtimestamp(ts, UTC).isocalendar()
    return f"{year:04d}-W{week:02d}"


def _monday(week: str) -> datetime:
    match = _WEEK_TEXT.match(week)
    if not match:
        raise ValueError(f"not an ISO week: {week!r}")
    year, number = int(match[1]), int(match[2])
    return datetime.fromisocalendar(year, number, 1).replace(tzinfo=UTC)  # ValueError if no such week


def week_bounds(week: str) -> tuple[float, float]:
    """[start, end) of an ISO week in epoch seconds: Monday 00:00 UTC to the next Monday."""
    start = _monday(week).timestamp()
    return start, start + WEEK


def shift_week(week: str, weeks: int) -> str:
    """The ISO week `weeks` weeks after (negative: before) `week`."""
    return iso_week((_monday(week) + timedelta(weeks=weeks)).timestamp())


def _unit(digest: bytes) -> float:
    """53 bits of an 8-byte digest as a float in (0, 1]: (x + 1) / 2**53, never 0."""
    x: int = _U64(digest)[0]
    return ((x >> (64 - _BITS)) + 1) / _SCALE


def uniform(event_id: str, week: str, salt: str = "") -> float:
    """The event's uniform in (0, 1] for this week; the salt is length-prefixed
    so no (salt, event_id) pair hashes like another."""
    digest = _salted(salt).copy()  # the salt's prefix hashed once: this runs for every event
    digest.update(f"{event_id}\x00{week}".encode())
    return _unit(digest.digest())


@lru_cache(maxsize=8)
def _salted(salt: str) -> blake2b:
    return blake2b(f"{len(salt)}:{salt}\x00".encode(), digest_size=8, person=_SAMPLE)


def in_holdout(query_id: str, share: float = HOLDOUT_SHARE, salt: str = "") -> bool:
    """Whether a query belongs to the sealed holdout: a `share` of query ids, by hash."""
    if not 0 <= share <= 1:
        raise ValueError("holdout share must be in [0, 1]")
    data = f"{len(salt)}:{salt}\x00{query_id}".encode()
    return _unit(blake2b(data, digest_size=8, person=_HOLDOUT).digest()) <= share
