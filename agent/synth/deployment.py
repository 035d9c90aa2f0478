"""The deployment the traffic stands for: tenants, groups, sources, apps, query slices.

None of it depends on the seed: one deployment with its own HMAC salt.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

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


def _principal(tenant: str, groups: list[str], explicit: bool, claims: bool = True) -> dict:
    principal: dict = {"tenant": tenant, "groups": groups}
    if explicit or not claims:
        principal["claims_present"] = claims
    return principal
