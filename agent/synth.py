"""Synthetic `retrieval.v1` traffic, reproducible from a seed, so every metric, alert and dashboard has input."""

from __future__ import annotations

import base64
import hashlib
import math
import random
import struct
from bisect import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import accumulate
from types import MappingProxyType
from typing import Iterator, NamedTuple, Sequence

import orjson

from agent.core.model import SCHEMA

# The corpus, the query population and the hashed identities do not depend on the
# seed: they stand for one deployment with its own HMAC salt, so a baseline frozen
# from one seed does not see another seed's traffic as new. The seed picks events.
#
# Three random streams keep the parts apart: traffic, incidents, invalid lines.
# Incidents and invalid lines never draw from the traffic stream, so outside an
# incident window the output is byte-identical to the clean stream, and an invalid
# line stands where its clean event would have been.

INCIDENT_KINDS = ("leak", "stale", "score-drift", "source-dominance", "filter-outage", "new-terms")
INCIDENT_MINUTES = 10.0
# Share of the events inside a window that an incident touches: real incidents hit some traffic, not all.
INCIDENT_SHARE = MappingProxyType(
    {
        "leak": 0.15,
        "stale": 0.2,
        "score-drift": 0.3,
        "source-dominance": 0.3,
        "filter-outage": 0.25,
        "new-terms": 0.3,
    }
)
INVALID_KINDS = ("invalid_json", "invalid_field", "unsupported_schema", "pii_suspected")
DEFAULT_START = datetime(2026, 1, 5, tzinfo=timezone.utc)

_UTC = timezone.utc
# Dates placed "after the stream" stay after it: expiries and future effective dates use this horizon.
_MAX_HORIZON_DAYS = 3650


@dataclass(frozen=True)
class Incident:
    """An incident of `kind` that starts `minute` minutes of event time after the stream start."""

    kind: str
    minute: float

    def __post_init__(self) -> None:
        if self.kind not in INCIDENT_KINDS:
            raise ValueError(f"unknown incident kind {self.kind!r}; valid kinds: {', '.join(INCIDENT_KINDS)}")
        if isinstance(self.minute, bool) or not isinstance(self.minute, (int, float)):
            raise ValueError(f"incident minute must be a number, not {self.minute!r}")
        if not math.isfinite(self.minute) or self.minute < 0:
            raise ValueError(f"incident minute must be a finite number >= 0, not {self.minute!r}")
        object.__setattr__(self, "minute", float(self.minute))


def parse_incident(text: str) -> Incident:
    """Turn `KIND@MINUTE` (for example `leak@30`) into an Incident, for the command line."""
    kind, sep, minute = text.strip().partition("@")
    if not sep:
        raise ValueError(f"incident {text!r}: expected KIND@MINUTE, for example leak@30")
    kind = kind.strip()
    if kind not in INCIDENT_KINDS:
        raise ValueError(f"incident {text!r}: unknown kind {kind!r}; valid kinds: {', '.join(INCIDENT_KINDS)}")
    try:
        value = float(minute)
    except ValueError:
        raise ValueError(f"incident {text!r}: minute {minute.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"incident {text!r}: minute must be a finite number >= 0")
    return Incident(kind, value)


def generate(
    events: int,
    seed: int,
    start: datetime | None = None,
    rate: float = 20.0,
    incidents: Sequence[Incident] = (),
    invalid_rate: float = 0.0,
) -> Iterator[bytes]:
    """Yield `events` JSON lines (bytes, no newline) of retrieval traffic; same arguments, same bytes."""
    if isinstance(events, bool) or not isinstance(events, int) or events < 0:
        raise ValueError(f"events must be an int >= 0, not {events!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, not {seed!r}")
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a finite number > 0, not {rate!r}")
    if not (isinstance(invalid_rate, (int, float)) and 0 <= invalid_rate <= 1):
        raise ValueError(f"invalid_rate must be in [0, 1], not {invalid_rate!r}")
    for incident in incidents:
        if not isinstance(incident, Incident):
            raise ValueError(f"incidents must be Incident objects (see parse_incident), not {incident!r}")
    if start is None:
        start = DEFAULT_START
    elif start.tzinfo is None:
        start = start.replace(tzinfo=_UTC)  # a naive start is read as UTC
    # Whole milliseconds, so that `ts - start` is exact and windows are unambiguous.
    start = start.astimezone(_UTC)
    start = start.replace(microsecond=start.microsecond // 1000 * 1000)
    traffic = _Traffic(seed, start, float(rate), events, tuple(incidents), float(invalid_rate))
    return traffic.lines(events)


# ---------------------------------------------------------------------------
# The deployment: tenants, groups, sources, apps, query slices.

_TENANTS = ("acme", "globex", "initech", "umbrella")
_TENANT_WEIGHTS = (0.45, 0.3, 0.15, 0.1)
_TENANT_LANGUAGES = (
    (("en", 0.9), ("fr", 0.05), ("de", 0.03), ("ja", 0.02)),
    (("en", 0.5), ("de", 0.45), ("fr", 0.05)),
    (("en", 0.83), ("fr", 0.1), ("ja", 0.07)),
    (("en", 0.6), ("ja", 0.35), ("de", 0.05)),
)
_PERSONAS = {
    "staff": ("employees",),
    "engineer": ("employees", "engineering"),
    "support-agent": ("employees", "support"),
    "manager": ("employees", "managers"),
    "hr-partner": ("employees", "hr", "managers"),
    "finance": ("employees", "finance"),
    "contractor": ("contractors",),
    "service": (),
}


class _SourceSpec(NamedTuple):
    name: str
    prefix: str
    owned: bool  # tenant-owned documents carry `tenant`; shared ones are open to every tenant
    parents: int  # per tenant when owned
    open_share: float  # parents with an empty acl
    roles: tuple[tuple[str, float], ...]  # acl mix of the others
    authority: str
    tokens: tuple[int, int]
    date_only: float  # share of effective dates written as plain dates


_SOURCES = (
    _SourceSpec("hr-policies", "HRP", True, 50, 0.25, (("employees", 0.6), ("managers", 0.25), ("hr", 0.15)),
                "official", (120, 520), 0.8),
    _SourceSpec("benefits-guide", "BEN", True, 30, 0.5, (("employees", 0.8), ("hr", 0.2)),
                "official", (150, 600), 0.7),
    _SourceSpec("payroll-faq", "PAY", True, 25, 0.3, (("employees", 0.5), ("finance", 0.3), ("hr", 0.2)),
                "official", (80, 300), 0.6),
    _SourceSpec("intranet-wiki", "WIKI", True, 60, 0.7, (("employees", 0.7), ("engineering", 0.3)),
                "community", (100, 700), 0.2),
    _SourceSpec("kb-articles", "KB", False, 300, 1.0, (), "official", (150, 650), 0.5),
    _SourceSpec("resolved-tickets", "TCK", True, 80, 0.2, (("support", 1.0),), "user-generated", (60, 400), 0.0),
    _SourceSpec("product-docs", "DOC", False, 200, 1.0, (), "official", (200, 800), 0.4),
    _SourceSpec("release-notes", "REL", False, 80, 1.0, (), "official", (100, 450), 0.9),
    _SourceSpec("api-reference", "API", False, 150, 1.0, (), "official", (150, 900), 0.3),
)
_OWNED = frozenset(spec.name for spec in _SOURCES if spec.owned)
_DOMINANT_SOURCE = "intranet-wiki"  # source-dominance: a bulk re-ingest made its onboarding handbook match everything
_HANDBOOK_CHUNKS = 40
_POPULARITY = 0.6  # Zipf exponent of document popularity within a source


class _AppSpec(NamedTuple):
    name: str
    weight: float
    sources: tuple[tuple[str, float], ...]
    personas: tuple[tuple[str, float], ...]
    types: tuple[tuple[str, float], ...]
    cutoffs: tuple[int, ...]
    candidates: tuple[int, ...]
    returned: tuple[int, ...]
    over_k: bool  # returned counts are added to cutoff_k rather than absolute
    scale: str  # "cosine" or "bm25"
    pipeline: dict
    drift_pipeline: dict | None
    filters: tuple[str, ...]
    explicit_packed: float
    latency_ms: float
    claims_field: bool  # some producers always write claims_present, others rely on the default
    typed: float  # share of queries the app labels with a query type
    extra_field: float  # share of events carrying a field outside retrieval.v1 (an OpenTelemetry trace id)


_APPS = (
    _AppSpec(
        "hr-assistant", 0.3,
        (("hr-policies", 0.45), ("benefits-guide", 0.25), ("payroll-faq", 0.2), ("intranet-wiki", 0.1)),
        (("staff", 0.5), ("manager", 0.2), ("hr-partner", 0.1), ("engineer", 0.1), ("finance", 0.05),
         ("contractor", 0.04), ("service", 0.01)),
        (("lexical", 0.22), ("paraphrase", 0.2), ("temporal", 0.12), ("numeric", 0.12), ("multi_hop", 0.08),
         ("no_answer", 0.08), ("ambiguous", 0.08), ("follow_up", 0.1)),
        (4, 5), (50, 50, 100), (0, 1, 2, 3), True, "cosine",
        {"version": "hr-rag-2025.12.3", "retriever": "dense-hnsw", "embedding_model": "e5-large-v2"},
        {"version": "hr-rag-2026.01.0-canary", "retriever": "dense-hnsw", "embedding_model": "e5-small-v2"},
        ("tenant", "acl", "locale", "status", "effective_date"), 0.0, 110.0, True, 1.0, 0.05,
    ),
    _AppSpec(
        "support-bot", 0.45,
        (("kb-articles", 0.45), ("resolved-tickets", 0.25), ("product-docs", 0.2), ("release-notes", 0.05),
         ("intranet-wiki", 0.05)),
        (("support-agent", 0.7), ("staff", 0.1), ("engineer", 0.15), ("contractor", 0.04), ("service", 0.01)),
        (("lexical", 0.2), ("paraphrase", 0.25), ("multi_hop", 0.1), ("temporal", 0.05), ("numeric", 0.05),
         ("no_answer", 0.1), ("ambiguous", 0.1), ("follow_up", 0.15)),
        (6, 8), (100, 150, 200), (10, 10, 10, 20), False, "cosine",
        {"version": "support-3.14.0", "retriever": "dense-ivf", "reranker": "bge-reranker-v2-m3",
         "embedding_model": "bge-m3"},
        {"version": "support-3.15.0-canary", "retriever": "dense-ivf", "reranker": "bge-reranker-v2-m3",
         "embedding_model": "bge-small-en-v1.5"},
        ("tenant", "acl", "product", "status"), 0.3, 290.0, False, 1.0, 0.0,
    ),
    _AppSpec(
        "docs-search", 0.25,
        (("product-docs", 0.4), ("api-reference", 0.3), ("release-notes", 0.15), ("intranet-wiki", 0.15)),
        (("engineer", 0.6), ("staff", 0.2), ("support-agent", 0.1), ("contractor", 0.08), ("service", 0.02)),
        (("lexical", 0.4), ("paraphrase", 0.15), ("multi_hop", 0.1), ("temporal", 0.05), ("numeric", 0.1),
         ("no_answer", 0.08), ("ambiguous", 0.07), ("follow_up", 0.05)),
        (3, 5), (40, 80, 120), (10,), False, "bm25",
        {"version": "docs-search-41", "retriever": "bm25"},
        None,  # a lexical retriever has no embedding model to change
        ("tenant", "version", "locale", "status"), 0.1, 45.0, True, 0.8, 0.0,
    ),
)
_OUTAGE_FILTER = "status"  # the lifecycle-metadata filter; its backing service fails closed


class _Slice(NamedTuple):
    mu: float  # mean top-1 cosine score
    zero: float  # zero-result probability
    terms: tuple[int, int]
    spread: float  # how much the reranker reorders the retriever's candidates


_SLICES = {
    "lexical": _Slice(0.80, 0.01, (2, 4), 2.0),
    "paraphrase": _Slice(0.71, 0.01, (3, 7), 4.0),
    "multi_hop": _Slice(0.63, 0.02, (5, 9), 8.0),
    "temporal": _Slice(0.67, 0.015, (3, 6), 5.0),
    "numeric": _Slice(0.65, 0.015, (3, 6), 5.0),
    "no_answer": _Slice(0.46, 0.3, (2, 7), 10.0),
    "ambiguous": _Slice(0.58, 0.04, (1, 3), 9.0),
    "follow_up": _Slice(0.61, 0.02, (1, 4), 6.0),
}
_FILTER_WEIGHTS = {"tenant": 5.0, "acl": 2.0, "locale": 1.5, "status": 1.0, "effective_date": 2.0, "product": 2.0,
                   "version": 1.5}
_FILTER_RUNS = {"tenant": 1.0, "acl": 1.0, "product": 0.7, "version": 0.6, "status": 0.97}
_SECURITY_FILTERS = frozenset(("tenant", "acl"))
_OFFSETS = ("Z", "+00:00", "+01:00", "+02:00", "-05:00", "-08:00", "+05:30", "+09:00")
_RAW_QUERIES = ("how many vacation days do I have left", "reset password for vpn", "parental leave policy germany")
_EMAILS = ("jane.doe@example.com", "m.garcia@example.org")


def _cumulative(weights: Sequence[float]) -> tuple[float, ...]:
    """Normalized cumulative weights ending at exactly 1.0, so `bisect(cum, random())` never runs off the end."""
    total = sum(weights)
    cum = [w / total for w in accumulate(weights)]
    cum[-1] = 1.0
    return tuple(cum)


def _token(data: bytes, size: int) -> str:
    """A salted-hash-looking token of [A-Za-z0-9_-], as a producer's HMAC would give."""
    digest = hashlib.blake2b(data, digest_size=size, person=b"ragdrift-synth").digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _group(tenant: str, role: str) -> str:
    return hashlib.blake2b(f"{tenant}/{role}".encode(), digest_size=10, person=b"ragdrift-group").hexdigest()


_VOCABULARY_SIZE = 20_000
_QUERY_POPULATION = 8_000
_VOCABULARY_CUM = _cumulative([n ** -1.05 for n in range(1, _VOCABULARY_SIZE + 1)])
_QUERY_CUM = _cumulative([n ** -1.0 for n in range(1, _QUERY_POPULATION + 1)])
_TENANT_CUM = _cumulative(_TENANT_WEIGHTS)
_APP_CUM = _cumulative([app.weight for app in _APPS])
_LOG = tuple(math.log(n) for n in range(1, 1001))
_INV32 = 1.0 / 2**32


# ---------------------------------------------------------------------------
# The corpus: parents with current and superseded versions. Built once; dates are
# kept relative to the stream and written out per stream.


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
        self.handbook: dict[int, list[_Chunk]] = {}
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
        if fingerprints and rnd() < 0.03:  # boilerplate copied between documents
            fingerprint = fingerprints[int(rnd() * len(fingerprints))]
        else:
            fingerprint = "%016x" % rng.getrandbits(64)
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
            fingerprint = prints[c] if same else "%016x" % rng.getrandbits(64)
            parent.old.append(_Chunk(f"{parent.id}#v{version - 1}.c{c}", parent, spec.name, older, None,
                                     "superseded", spec.authority, lo + int(rnd() * span), fingerprint))


_CORPUS = _Corpus()


# ---------------------------------------------------------------------------
# Traffic.


class _Draft:
    """One event before rendering; incidents edit this, never the traffic stream."""

    __slots__ = ("i", "ts_ms", "app", "ti", "persona", "query", "qtype", "k", "c", "m", "n", "chunks", "ranks",
                 "scores", "reranks", "pres", "packed", "adm", "order", "filters", "feedback", "latency",
                 "pipeline", "principal", "trace")


class _App:
    """An app spec with its lookups precomputed, so the per-event path only bisects."""

    def __init__(self, index: int, spec: _AppSpec):
        self.index = index
        self.spec = spec
        self.name = spec.name
        self.sources = tuple(name for name, _ in spec.sources)
        self.source_cum = _cumulative([w for _, w in spec.sources])
        self.owned_sources = tuple(s.name for s in _SOURCES if s.owned and s.name in self.sources)
        self.personas = tuple(name for name, _ in spec.personas)
        self.persona_cum = _cumulative([w for _, w in spec.personas])
        self.types = tuple(name for name, _ in spec.types)
        self.type_cum = _cumulative([w for _, w in spec.types])
        self.reranked = "reranker" in spec.pipeline
        self.bm25 = spec.scale == "bm25"


class _Traffic:
    """One stream's state: the three random streams, the corpus, and caches local to this stream."""

    def __init__(self, seed, start, rate, events, incidents, invalid_rate):
        self.rng = random.Random(seed)
        self.irng = random.Random(f"ragdrift:{seed}:incidents")
        self.vrng = random.Random(f"ragdrift:{seed}:invalid")
        self.start = start
        self.rate = rate
        self.step_ms = 1000.0 / rate
        self.jitter_ms = min(self.step_ms, 2000.0)
        self.invalid_rate = invalid_rate
        self.invalid_count = 0
        self.id_prefix = "%010x" % random.Random(f"ragdrift:{seed}:ids").getrandbits(40)
        horizon = min(_MAX_HORIZON_DAYS, (events + 1) / rate / 86400.0 + 1.0)
        self.end = start + timedelta(days=horizon)
        self.corpus = _CORPUS
        self.bases: dict[_Chunk, tuple[dict, dict]] = {}
        self.apps = tuple(_App(i, spec) for i, spec in enumerate(_APPS))
        span = INCIDENT_MINUTES * 60_000
        self.windows = tuple((inc.kind, inc.minute * 60_000, inc.minute * 60_000 + span) for inc in incidents)
        self.pools: dict[tuple[str, int, str], _Pool] = {}
        self.mixes: dict[tuple[int, int, str], _Mix] = {}
        self.queries: dict[tuple[int, int, int], tuple[dict, str]] = {}
        self.groups = {
            (ti, persona): frozenset(_group(tenant, role) for role in roles)
            for ti, tenant in enumerate(_TENANTS)
            for persona, roles in _PERSONAS.items()
        }
        self.principals = {
            (ti, persona, explicit): _principal(tenant, sorted(self.groups[(ti, persona)]), explicit)
            for ti, tenant in enumerate(_TENANTS)
            for persona in _PERSONAS
            for explicit in (False, True)
        }
        self.languages = tuple(
            (tuple(lang for lang, _ in mix), _cumulative([w for _, w in mix])) for mix in _TENANT_LANGUAGES
        )
        self.apply = {
            "leak": self._leak,
            "stale": self._stale,
            "score-drift": self._score_drift,
            "source-dominance": self._dominance,
            "filter-outage": self._filter_outage,
            "new-terms": self._new_terms,
        }

    def lines(self, events: int) -> Iterator[bytes]:
        dumps = orjson.dumps
        windows = self.windows
        vrandom = self.vrng.random
        invalid_rate = self.invalid_rate
        for i in range(events):
            draft = self._draw(i)
            if windows:
                self._incidents(draft)
            doc = self._render(draft)
            if invalid_rate and vrandom() < invalid_rate:
                yield self._corrupt(doc)
            else:
                yield dumps(doc)

    # -- the clean event ---------------------------------------------------

    def _draw(self, i: int) -> _Draft:
        rnd = self.rng.random
        d = _Draft()
        d.i = i
        offset = int(i * self.step_ms + rnd() * self.jitter_ms)
        if rnd() < 0.005:  # a producer flushing a buffer late
            offset = max(0, offset - int(rnd() * 20_000))
        d.ts_ms = offset
        app = self.apps[bisect(_APP_CUM, rnd())]
        spec = app.spec
        d.app = app
        ti = bisect(_TENANT_CUM, rnd())
        d.ti = ti
        persona = app.personas[bisect(app.persona_cum, rnd())]
        d.persona = persona
        query, qtype = self._query(app, ti, bisect(_QUERY_CUM, rnd()))
        d.query, d.qtype = query, qtype
        sl = _SLICES[qtype]
        k = spec.cutoffs[int(rnd() * len(spec.cutoffs))]
        d.k = k
        c = spec.candidates[int(rnd() * len(spec.candidates))]
        m = int(c * (0.25 + 0.6 * rnd()))
        language = query.get("language", "en")
        zero_filter = None
        if rnd() < sl.zero:  # nothing clears the similarity threshold
            n = 0
            if app.bm25 and rnd() < 0.5:  # no term matched at all
                c = m = 0
        else:
            n = spec.returned[int(rnd() * len(spec.returned))]
            if spec.over_k:
                n += k
            if sl.mu < 0.6:
                n = max(1, int(n * (0.3 + 0.7 * rnd())))
            n = min(n, m)
            # Legitimate filter-caused zeros: no Japanese docs; nothing effective in the asked period.
            if language == "ja" and "locale" in spec.filters and app.bm25 and rnd() < 0.2:
                zero_filter = "locale"
            elif qtype == "temporal" and "effective_date" in spec.filters and rnd() < 0.03:
                zero_filter = "effective_date"
            if zero_filter:
                n = 0
        d.filters = self._filters(app, c, m, language, qtype, zero_filter)
        if zero_filter:
            m = 0
        d.c, d.m, d.n = c, m, n
        d.pipeline = spec.pipeline
        d.principal = self.principals[(ti, persona, spec.claims_field)]
        d.latency = round(spec.latency_ms * self.rng.lognormvariate(0.0, 0.45) * (0.6 if n == 0 else 1.0), 1)

        ranks = list(range(1, n + 1))
        u = rnd()
        if n and u < 0.03:  # the app logs ranks after a pinned answer card
            ranks = [r + 1 for r in ranks]
        elif n > 2 and u < 0.06:  # a deduplicated result left a gap
            gap = 1 + int(rnd() * (n - 1))
            ranks = ranks[:gap] + [r + 1 for r in ranks[gap:]]
        d.ranks = ranks
        adm = [r <= k for r in ranks]
        packed = None
        if n and rnd() < spec.explicit_packed:
            packed = adm[:]
            if n > k and k >= 2 and rnd() < 0.5:  # token budget: one long chunk skipped, a later one packed
                skip = 1 + int(rnd() * (k - 1))
                later = next((j for j in range(skip + 1, n) if not packed[j]), None)
                if packed[skip] and later is not None:
                    packed[skip], packed[later] = False, True
            adm = packed
        d.packed, d.adm = packed, adm
        d.chunks = self._chunks(app, ti, persona, adm, n)

        s1 = min(0.97, max(0.15, self.rng.gauss(sl.mu, 0.07)))
        a = 0.02 + 0.05 * rnd()
        g = 0.004 * rnd()
        deepest = max(n, 30) - 1
        drop = a * _LOG[deepest] + g * deepest
        if drop > s1 - 0.02:  # flatten the decay rather than clamp every score
            a, g = a * (s1 - 0.02) / drop, g * (s1 - 0.02) / drop
        if app.bm25:
            s1, a, g = s1 * 24.0, a * 24.0, g * 24.0
        # Four decimals via int division: half the cost of round() and the same shortest repr.
        if app.reranked and n:
            pres = self._rerank(n, min(m, 30), sl.spread)
            d.pres = pres
            d.scores = [int((s1 - a * _LOG[p - 1] - g * (p - 1)) * 1e4 + 0.5) / 1e4 for p in pres]
            l1 = self.rng.gauss((sl.mu - 0.55) * 28.0, 1.8)
            la = 0.5 + 1.5 * rnd()
            lc = 0.15 * rnd()
            d.reranks = [math.floor((l1 - la * _LOG[j] - lc * j) * 1e3 + 0.5) / 1e3 for j in range(n)]
        else:
            d.pres = d.reranks = None
            d.scores = [int((s1 - a * _LOG[j] - g * j) * 1e4 + 0.5) / 1e4 for j in range(n)]

        order = None
        if n > 1 and rnd() < 0.03:  # listed in packing order, not rank order
            order = list(range(n))
            self.rng.shuffle(order)
        d.order = order

        feedback = None
        low = sl.mu < 0.6 or n == 0
        if rnd() < (0.15 if low else 0.05):
            v = rnd()
            thumbs = None if v < 0.3 else (-1 if v < (0.7 if low else 0.45) else (1 if v < 0.92 else 0))
            feedback = (rnd() < 0.4, rnd() < 0.12, thumbs, int(rnd() * 3) if n else 0)
        d.feedback = feedback
        # A newer producer SDK adds a field the agent does not read: it must be ignored and counted, not rejected.
        d.trace = "%032x" % self.rng.getrandbits(128) if spec.extra_field and rnd() < spec.extra_field else None
        return d

    def _rerank(self, n: int, width: int, spread: float) -> list[int]:
        """Retriever ranks of the reranker's top n: swaps and promotions, cheaper than sorting noisy scores."""
        rnd = self.rng.random
        pres = list(range(1, n + 1))
        for _ in range(int(spread * 0.6 * rnd())):
            a = int(rnd() * n)
            b = min(n - 1, a + 1 + int(rnd() * 3))
            pres[a], pres[b] = pres[b], pres[a]
        if width > n:
            for _ in range(int(spread * 0.3 * rnd())):
                deep = n + 1 + int(rnd() * (width - n))
                if deep not in pres:
                    pres[int(rnd() * n)] = deep
        return pres

    def _query(self, app: _App, ti: int, q: int) -> tuple[dict, str]:
        """The q-th most popular query of this app and tenant, the same for every seed so baselines carry over."""
        key = (app.index, ti, q)
        hit = self.queries.get(key)
        if hit is not None:
            return hit
        h = hashlib.blake2b(b"%d|%d|%d" % key, digest_size=64, person=b"ragdrift-query").digest()
        u = struct.unpack_from("<12I", h, 16)
        qtype = app.types[bisect(app.type_cum, u[0] * _INV32)]
        langs, lang_cum = self.languages[ti]
        language = langs[bisect(lang_cum, u[1] * _INV32)]
        lo, hi = _SLICES[qtype].terms
        count = lo + u[2] % (hi - lo + 1)
        terms = [_token(b"term:%d" % bisect(_VOCABULARY_CUM, u[3 + j] * _INV32), 12) for j in range(count)]
        query = {"id": base64.urlsafe_b64encode(h[:16]).rstrip(b"=").decode(), "terms": terms}
        if ((u[2] >> 8) & 0xFFFF) / 65536.0 < app.spec.typed:
            query["type"] = qtype
        query["language"] = language
        hit = self.queries[key] = (query, qtype)
        return hit

    def _filters(self, app: _App, c: int, m: int, language: str, qtype: str, zero_filter: str | None) -> list:
        rnd = self.rng.random
        rows: list[dict] = []
        applied: list[dict] = []
        for name in app.spec.filters:
            if name == "locale":
                runs = not language.startswith("en")
            elif name == "effective_date":
                runs = qtype == "temporal"
            else:
                share = _FILTER_RUNS[name]
                runs = share >= 1.0 or rnd() < share
            if not runs:
                rows.append({"name": name, "status": "skipped", "removed": 0})
            elif name not in _SECURITY_FILTERS and rnd() < 0.003:
                rows.append({"name": name, "status": "error", "removed": 0})  # fails open: nothing removed
            else:
                row = {"name": name, "status": "applied", "removed": 0}
                rows.append(row)
                applied.append(row)
        total = c - m
        if applied and total > 0:
            weight = sum(_FILTER_WEIGHTS[row["name"]] for row in applied)
            left = total
            for row in applied[:-1]:
                row["removed"] = int(total * _FILTER_WEIGHTS[row["name"]] / weight)
                left -= row["removed"]
            applied[-1]["removed"] = left
        if zero_filter:
            for row in rows:
                if row["name"] == zero_filter:
                    row["status"] = "applied"
                    row["removed"] += m
        return rows

    def _chunks(self, app: _App, ti: int, persona: str, adm: list[bool], n: int) -> list[_Chunk]:
        if not n:
            return []
        rng = self.rng
        rnd = rng.random
        key = (app.index, ti, persona)
        mix = self.mixes.get(key)
        if mix is None:
            pools = [self._pool(source, ti, persona) for source in app.sources]
            shares = [w for _, w in app.spec.sources]
            mix = self.mixes[key] = _Mix(pools, shares)
        fresh, fresh_cum, total = mix.fresh, mix.fresh_cum, mix.fresh_cum[-1]
        chunks = [fresh[bisect(fresh_cum, rnd() * total)] for _ in range(n)]
        if False in adm:  # below the cutoff: anything visible, stale versions included
            for j in range(n):
                if not adm[j] and rnd() < 0.2:
                    chunks[j] = mix.any[bisect(mix.any_cum, rnd() * mix.any_cum[-1])]
        for _ in range(int(n * 0.4 * rnd())):  # the next chunk of the same document
            j = int(rnd() * n)
            if j:
                siblings = chunks[j - 1].parent.fresh if adm[j] else chunks[j - 1].parent.current
                if siblings:
                    chunks[j] = siblings[int(rnd() * len(siblings))]
        if len(set(chunks)) < n:
            seen: set[_Chunk] = set()
            for j in range(n):
                chunk = chunks[j]
                for _ in range(5):
                    if chunk not in seen:
                        break
                    chunk = mix.fresh[bisect(mix.fresh_cum, rnd() * mix.fresh_cum[-1])]
                chunks[j] = chunk
                seen.add(chunk)
        return chunks

    def _pool(self, source: str, ti: int, persona: str) -> _Pool:
        # Shared sources are open to everyone: one pool serves every principal.
        key = (source, ti, persona) if source in _OWNED else (source, 0, "")
        pool = self.pools.get(key)
        if pool is not None:
            return pool
        pool = self.pools[key] = _Pool()
        groups = self.groups[(ti, persona)]
        for parent in self.corpus.parents[(source, ti)]:
            if parent.acl and parent.acl.isdisjoint(groups):
                pool.forbidden.extend(parent.fresh)
                continue
            if parent.fresh:
                pool.fresh.append(parent.fresh)
            pool.any.append(parent.current + parent.old)
            pool.stale.extend(parent.old)
            if not parent.fresh:
                pool.stale.extend(parent.current)
            pool.pairs.extend(zip(parent.old, parent.fresh))
        pool.fresh_flat = _flatten(pool.fresh)
        pool.any_flat = _flatten(pool.any)
        return pool

    # -- incidents: only the incident stream, only the draft -----------------

    def _incidents(self, d: _Draft) -> None:
        irandom = self.irng.random
        for kind, lo, hi in self.windows:
            if lo <= d.ts_ms < hi and irandom() < INCIDENT_SHARE[kind]:
                self.apply[kind](d)

    def _leak(self, d: _Draft) -> None:
        """Results outside the principal's tenant or groups; sometimes claims are missing altogether."""
        if not d.n:
            return
        irandom = self.irng.random
        if irandom() < 0.2:
            d.principal = _principal(_TENANTS[d.ti], [], True, claims=False)
            return
        admitted = [j for j in range(d.n) if d.adm[j]]
        for _ in range(1 if irandom() < 0.7 else 2):
            j = admitted[int(irandom() * len(admitted))] if admitted and irandom() < 0.75 else int(irandom() * d.n)
            source = d.app.owned_sources[int(irandom() * len(d.app.owned_sources))]
            items = self._pool(source, d.ti, d.persona).forbidden if irandom() < 0.5 else None
            if not items:
                other = (d.ti + 1 + int(irandom() * (len(_TENANTS) - 1))) % len(_TENANTS)
                items = self.corpus.owned_fresh[(source, other)]
            chunk = items[int(irandom() * len(items))]
            if chunk not in d.chunks:
                d.chunks[j] = chunk

    def _stale(self, d: _Draft) -> None:
        """Superseded, tombstoned, draft, expired or future content admitted; often beside its current version."""
        admitted = [j for j in range(d.n) if d.adm[j]]
        if not admitted:
            return
        irandom = self.irng.random
        if len(admitted) >= 2 and irandom() < 0.5:
            pair = self._pick(d, "pairs")
            if pair is not None:
                a, b = self.irng.sample(admitted, 2)
                taken = {c.id for j, c in enumerate(d.chunks) if j not in (a, b)}
                if pair[0].id not in taken and pair[1].id not in taken:
                    d.chunks[a], d.chunks[b] = pair
                    return
        for _ in range(1 if irandom() < 0.6 else 2):
            chunk = self._pick(d, "stale")
            if chunk is not None and all(c.id != chunk.id for c in d.chunks):
                d.chunks[admitted[int(irandom() * len(admitted))]] = chunk

    def _pick(self, d: _Draft, kind: str):
        sources = list(d.app.sources)
        self.irng.shuffle(sources)
        for source in sources:
            items = getattr(self._pool(source, d.ti, d.persona), kind)
            if items:
                return items[int(self.irng.random() * len(items))]
        return None

    def _score_drift(self, d: _Draft) -> None:
        """A canary on a new embedding model: renamed model, scores shifted down and compressed."""
        drift = d.app.spec.drift_pipeline
        if drift is None:
            return
        d.pipeline = drift
        d.scores = [int((0.45 * s + 0.15) * 1e4 + 0.5) / 1e4 for s in d.scores]

    def _dominance(self, d: _Draft) -> None:
        """One parent of one source fills the admitted set."""
        admitted = [j for j in range(d.n) if d.adm[j]]
        if not admitted:
            return
        if len(admitted) > 1 and self.irng.random() < 0.3:
            admitted = admitted[1:]  # the top hit survives
        taken = {c.id for j, c in enumerate(d.chunks) if j not in admitted}
        book = [c for c in self.corpus.handbook[d.ti] if c.id not in taken]
        for j, chunk in zip(admitted, self.irng.sample(book, min(len(admitted), len(book)))):
            d.chunks[j] = chunk

    def _filter_outage(self, d: _Draft) -> None:
        """The lifecycle filter fails closed (or is misconfigured) and removes every candidate."""
        if d.c == 0:
            return
        for row in d.filters:
            if row["name"] == _OUTAGE_FILTER:
                row["status"] = "error" if self.irng.random() < 0.7 else "applied"
                row["removed"] += d.m
        d.m = d.n = 0
        d.chunks, d.ranks, d.scores, d.adm = [], [], [], []
        d.reranks = d.pres = d.packed = d.order = None

    def _new_terms(self, d: _Draft) -> None:
        """A burst of never-seen query terms (a launch, a new product name, a bot)."""
        rng = self.irng

        def fresh(size: int = 12) -> str:
            return base64.urlsafe_b64encode(rng.randbytes(size)).rstrip(b"=").decode()

        terms = [fresh() if rng.random() < 0.7 else t for t in d.query["terms"]]
        terms.extend(fresh() for _ in range(1 + int(rng.random() * 3)))
        d.query = {**d.query, "id": fresh(16), "terms": terms[:64]}

    # -- rendering -----------------------------------------------------------

    def _render(self, d: _Draft) -> dict:
        app = d.app
        n = d.n
        stages = {"candidates": d.c, "after_filter": d.m}
        if app.reranked:
            stages["after_rerank"] = n
        stages["packed"] = sum(d.adm)
        results = []
        chunks, ranks, scores = d.chunks, d.ranks, d.scores
        bases = self.bases
        reranks, pres = d.reranks, d.pres
        which = 0 if reranks is None else 1
        for j in range(n):
            chunk = chunks[j]
            pair = bases.get(chunk)
            if pair is None:
                pair = bases[chunk] = chunk.bases(self.start, self.end)
            result = pair[which].copy()
            result["rank"] = ranks[j]
            result["score"] = scores[j]
            if which:
                result["rerank_score"] = reranks[j]
                result["pre_rerank_rank"] = pres[j]
            results.append(result)
        if d.packed is not None:
            for result, packed in zip(results, d.packed):
                result["packed"] = packed
        doc = {
            "schema": SCHEMA,
            "event_id": f"{self.id_prefix}-{d.i:09d}",
            "ts": (self.start + timedelta(milliseconds=d.ts_ms)).isoformat(timespec="milliseconds")[:-6] + "Z",
            "app": app.name,
            "pipeline": d.pipeline,
            "query": d.query,
            "principal": d.principal,
            "cutoff_k": d.k,
            "stages": stages,
            "filters": d.filters,
            "results": results if d.order is None else [results[j] for j in d.order],
            "latency_ms": d.latency,
        }
        if d.trace is not None:
            doc["trace_id"] = d.trace
        if d.feedback is not None:
            rephrased, correction, thumbs, cited = d.feedback
            feedback: dict = {}
            if rephrased:
                feedback["rephrased"] = True
            if correction:
                feedback["correction"] = True
            if thumbs is not None:
                feedback["thumbs"] = thumbs
            cited_ids = [chunks[j].id for j in range(n) if d.adm[j]][:cited]
            if cited_ids:
                feedback["cited"] = cited_ids
            if feedback:
                doc["feedback"] = feedback
        return doc

    def _corrupt(self, doc: dict) -> bytes:
        """One invalid message in place of this event, cycling through the dead-letter reasons."""
        kind = INVALID_KINDS[self.invalid_count % len(INVALID_KINDS)]
        variant = self.invalid_count // len(INVALID_KINDS)
        self.invalid_count += 1
        if kind == "invalid_json":  # a producer died mid-write: any strict prefix of an object is not JSON
            line = orjson.dumps(doc)
            return line[: 1 + int(self.vrng.random() * (len(line) - 1))]
        if kind == "invalid_field":
            if doc["results"] and variant % 2:
                doc["results"][0]["rank"] = 0
            else:
                doc["cutoff_k"] = 0
        elif kind == "unsupported_schema":
            doc["schema"] = "retrieval.v2"
        elif variant % 3 == 0:  # raw query text where its hash belongs
            doc["query"] = {**doc["query"], "id": _RAW_QUERIES[variant // 3 % len(_RAW_QUERIES)]}
        elif variant % 3 == 1:
            doc["query"] = {**doc["query"], "id": _EMAILS[variant // 3 % len(_EMAILS)]}
        else:
            principal = doc["principal"]
            doc["principal"] = {**principal, "groups": [_EMAILS[variant // 3 % len(_EMAILS)], *principal["groups"]]}
        return orjson.dumps(doc)


def _principal(tenant: str, groups: list[str], explicit: bool, claims: bool = True) -> dict:
    principal: dict = {"tenant": tenant, "groups": groups}
    if explicit or not claims:
        principal["claims_present"] = claims
    return principal
