"""What the app hands over per retrieval: plain values, its own words.

Texts given here (the query, a chunk's `text`, group names) are hashed,
fingerprinted and counted in the app's process, then dropped (the hasher
keeps the last few thousand group names in memory beside their tokens); only
the recorder, if the app gives one, keeps them, where the app keeps its own data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

When = datetime | date | str


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    """The asking user: a tenant and access group names (hashed before they leave)."""

    tenant: str
    groups: Sequence[str] = ()
    claims_present: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One ranked result; the list order is the rank."""

    chunk_id: str
    parent_id: str
    source: str
    score: float
    rerank_score: float | None = None
    pre_rerank_rank: int | None = None
    effective_date: When | None = None
    expires_at: When | None = None
    status: str | None = None
    authority: str | None = None
    acl: Sequence[str] = ()
    tenant: str | None = None
    text: str | None = None
    tokens: int | None = None
    packed: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Stages:
    candidates: int | None = None
    after_filter: int | None = None
    after_rerank: int | None = None
    packed: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Filter:
    name: str
    status: str = "applied"
    removed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Pipeline:
    version: str | None = None
    retriever: str | None = None
    reranker: str | None = None
    embedding_model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    rephrased: bool = False
    correction: bool = False
    thumbs: int | None = None
    cited: Sequence[str] = ()
