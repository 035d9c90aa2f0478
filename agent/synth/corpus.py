"""The corpus: parents with current and superseded versions. Built once; dates are
kept relative to the stream and written out per stream."""

from __future__ import annotations

import math
import random
from bisect import bisect
from datetime import UTC, datetime, timedelta, timezone
from itertools import accumulate
from typing import NamedTuple

from agent.synth.deployment import (
    _DOMINANT_SOURCE,
    _HANDBOOK_CHUNKS,
    _OFFSETS,
    _POPULARITY,
    _SOURCES,
    _TENANTS,
    _cumulative,
    _group,
    _SourceSpec,
)

_UTC = UTC


class _When(NamedTuple):
    """A date `days` after the stream's start (or end), so one corpus serves any start and any length."""

    after_end: bool
    days: float
    offset: str | None  # None: a plain date
    millis: bool


_ZONES = {
    offset: _UTC if offset in ("Z", "+00:00") else timezone(
        (-1 if offset[0] == "-" else 1) * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6]))
    )
    for offset in _OFFSETS
}


def _when(rng: random.Random, after_end: bool, days: float, date_only: float) -> _When:
    if rng.random() < date_only:
        return _When(after_end, days, None, False)
    return _When(after_end, days, _OFFSETS[int(rng.random() * len(_OFFSETS))], rng.random() < 0.2)


def _format(when: _When, start: datetime, end: datetime) -> str:
    """RFC 3339 text: a plain date is midnight UTC of the instant's day, so never later than the instant."""
    instant = (end if when.after_end else start) + timedelta(days=when.days)
    if when.offset is None:
        return instant.date().isoformat()
    text = instant.astimezone(_ZONES[when.offset]).isoformat(timespec="milliseconds" if when.millis else "seconds")
    return text[:-6] + "Z" if when.offset == "Z" else text


class _Parent:
    __slots__ = ("id", "tenant", "acl", "current", "fresh", "old")

    def __init__(self, pid: str, tenant: str | None, acl: frozenset[str]):
        self.id = pid
        self.tenant = tenant
        self.acl = acl
        self.current: list[_Chunk] = []
        self.fresh: list[_Chunk] = []  # current chunks that may be admitted (empty when the version is stale)
        self.old: list[_Chunk] = []  # superseded versions


class _Chunk:
    __slots__ = ("id", "parent", "source", "effective", "expires", "status", "authority", "tokens", "fingerprint")

    def __init__(self, cid, parent, source, effective, expires, status, authority, tokens, fingerprint):
        self.id = cid
        self.parent = parent
        self.source = source
        self.effective = effective
        self.expires = expires
        self.status = status
        self.authority = authority
        self.tokens = tokens
        self.fingerprint = fingerprint

    def bases(self, start: datetime, end: datetime) -> tuple[dict, dict]:
        """Result templates (plain, reranked): copying one and overwriting rank and score is the cheap path."""
        head = {"chunk_id": self.id, "parent_id": self.parent.id, "source": self.source, "rank": 0, "score": 0.0}
        tail: dict = {"effective_date": _format(self.effective, start, end)}
        if self.expires is not None:
            tail["expires_at"] = _format(self.expires, start, end)
        if self.status is not None:
            tail["status"] = self.status
        tail["authority"] = self.authority
        if self.parent.acl:
            tail["acl"] = sorted(self.parent.acl)
        if self.parent.tenant is not None:
            tail["tenant"] = self.parent.tenant
        tail["tokens"] = self.tokens
        tail["fingerprint"] = self.fingerprint
        return {**head, **tail}, {**head, "rerank_score": 0.0, "pre_rerank_rank": 0, **tail}


class _Pool:
    """Chunks one principal may see in one source, split by use so admitted slots draw only admissible ones."""

    __slots__ = ("fresh", "any", "stale", "pairs", "forbidden", "fresh_flat", "any_flat")
    fresh_flat: tuple[list[_Chunk], list[float]]  # set once the pool is filled
    any_flat: tuple[list[_Chunk], list[float]]

    def __init__(self) -> None:
        # Per parent, in popularity order: popularity belongs to documents, not to chunks.
        self.fresh: list[list[_Chunk]] = []
        self.any: list[list[_Chunk]] = []
        self.stale: list[_Chunk] = []
        self.pairs: list[tuple[_Chunk, _Chunk]] = []  # (superseded, current) of one parent
        self.forbidden: list[_Chunk] = []  # same tenant, acl disjoint from the principal's groups


class _Mix:
    """One principal's view of an app's sources, flat so that one bisect picks source, document and chunk."""

    __slots__ = ("fresh", "fresh_cum", "any", "any_cum")

    def __init__(self, pools: list[_Pool], shares: list[float]):
        self.fresh, self.fresh_cum = _mix([pool.fresh_flat for pool in pools], shares)
        self.any, self.any_cum = _mix([pool.any_flat for pool in pools], shares)


def _flatten(parents: list[list[_Chunk]]) -> tuple[list[_Chunk], list[float]]:
    """Chunks of one source weighted Zipf over parents, split over their chunks: documents are popular, not chunks."""
    chunks: list[_Chunk] = []
    weights: list[float] = []
    popularity = [(i + 1) ** -_POPULARITY for i in range(len(parents))]
    norm = 1.0 / sum(popularity) if parents else 0.0
    for items, weight in zip(parents, popularity):
        chunks.extend(items)
        weights.extend([weight * norm / len(items)] * len(items))
    return chunks, weights


def _mix(flats: list[tuple[list[_Chunk], list[float]]], shares: list[float]) -> tuple[list[_Chunk], list[float]]:
    chunks: list[_Chunk] = []
    weights: list[float] = []
    for (items, within), share in zip(flats, shares):
        chunks.extend(items)
        weights.extend([w * share for w in within])
    return chunks, list(accumulate(weights))


class _Corpus:
    """Every source's parents in popularity order, plus the lookups incidents need; the same for every stream."""

    def __init__(self) -> None:
        rng = random.Random("ragdrift:corpus:v1")
        # Parents each tenant can find in a source, in popularity order (shared sources: the same list).
        self.parents: dict[tuple[str, int], list[_Parent]] = {}
        self.owned_fresh: dict[tuple[str, int], list[_Chunk]] = {}
        self.handbook: dict[int | None, list[_Chunk]] = {}
        for spec in _SOURCES:
            role_cum = _cumulative([w for _, w in spec.roles]) if spec.roles else ()
            fingerprints: list[str] = []
            parents: list[_Parent] = []
            serial = 0
            for ti in range(len(_TENANTS)) if spec.owned else (None,):
                tenant = _TENANTS[ti] if ti is not None else None
                owned: list[_Chunk] = []
                for n in range(spec.parents):
                    serial += 1
                    handbook = spec.name == _DOMINANT_SOURCE and n == 0
                    if handbook or tenant is None or rng.random() < spec.open_share:
                        acl: frozenset[str] = frozenset()
                    else:
                        roles = {spec.roles[bisect(role_cum, rng.random())][0]}
                        if rng.random() < 0.15:
                            roles.add(spec.roles[bisect(role_cum, rng.random())][0])
                        acl = frozenset(_group(tenant, role) for role in roles)
                    parent = _Parent(f"{spec.prefix}-{serial:05d}", tenant, acl)
                    _versions(parent, spec, rng, fingerprints, handbook)
                    parents.append(parent)
                    owned.extend(parent.fresh)
                    if handbook:
                        self.handbook[ti] = parent.fresh
                if ti is not None:
                    self.owned_fresh[(spec.name, ti)] = owned
                    self.parents[(spec.name, ti)] = parents[-spec.parents:]
            if not spec.owned:
                for ti in range(len(_TENANTS)):
                    self.parents[(spec.name, ti)] = parents


def _versions(parent: _Parent, spec: _SourceSpec, rng: random.Random, fingerprints: list[str], handbook: bool) -> None:
    """Chunks of the current version and, for some parents, the superseded one, so stale conflicts can happen."""
    rnd = rng.random
    version = 1 + int(rnd() * 5)
    count = _HANDBOOK_CHUNKS if handbook else 1 + int(rnd() ** 2 * 8)
    age = min(2500.0, rng.lognormvariate(math.log(120), 1.1)) + 0.6
    effective = _when(rng, False, -age, spec.date_only)
    u = 1.0 if handbook else rnd()
    expires = None
    status: str | None = "current"
    fresh = True
    if u < 0.015:
        status, fresh = "draft", False
    elif u < 0.03:
        status, fresh = "tombstoned", False
    elif u < 0.05:  # expired but still marked current: the classic one
        expires, fresh = _when(rng, False, -1 - rnd() * 90, 0.5), False
    elif u < 0.06:  # scheduled: effective only after the stream ends
        effective, fresh = _when(rng, True, 2 + rnd() * 60, spec.date_only), False
    else:
        v = rnd()
        status = "current" if v < 0.88 else (None if v < 0.97 else "unknown")
        if rnd() < 0.1:
            expires = _when(rng, True, 30 + rnd() * 400, 0.5)
    lo, span = spec.tokens[0], spec.tokens[1] - spec.tokens[0] + 1
    prints: list[str] = []
    for c in range(count):
        copied = fingerprints and rnd() < 0.03  # boilerplate copied between documents
        fingerprint = fingerprints[int(rnd() * len(fingerprints))] if copied else f"{rng.getrandbits(64):016x}"
        fingerprints.append(fingerprint)
        prints.append(fingerprint)
        parent.current.append(_Chunk(f"{parent.id}#v{version}.c{c}", parent, spec.name, effective, expires, status,
                                     spec.authority, lo + int(rnd() * span), fingerprint))
    if fresh:
        parent.fresh = parent.current
    if version > 1 and not handbook and rnd() < 0.6:
        older = _when(rng, False, -age - 1 - rng.lognormvariate(math.log(200), 0.8), spec.date_only)
        for c in range(max(1, count + int(rnd() * 3) - 1)):
            same = c < len(prints) and rnd() < 0.5  # unchanged text across versions
            fingerprint = prints[c] if same else f"{rng.getrandbits(64):016x}"
            parent.old.append(_Chunk(f"{parent.id}#v{version - 1}.c{c}", parent, spec.name, older, None,
                                     "superseded", spec.authority, lo + int(rnd() * span), fingerprint))


_CORPUS = _Corpus()
