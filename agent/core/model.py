"""The `retrieval.v1` event as typed structs: the contract's fields and rules.

Field rules live in the types (lengths, bounds, enums, run by msgspec in C)
and in `Event.__post_init__` (characters, dates, phone numbers, rank
uniqueness: agent/core/rules.py), so the decoder's fast and slow paths
enforce exactly the same rules.
"""

from __future__ import annotations

from datetime import datetime
from operator import attrgetter
from typing import Annotated, Literal, get_args

import msgspec

from agent.core.rules import DATE_PATTERN, HASH_PATTERN, LANGUAGE_PATTERN, TEXT_CHARS, check, check_text

SCHEMA = "retrieval.v1"

_RANK = attrgetter("rank")


def _characters(allowed: str, low: int, high: int) -> msgspec.Meta:
    """Lengths checked by msgspec, the characters by `Event.__post_init__`;
    the schema states both as one pattern."""
    return msgspec.Meta(min_length=low, max_length=high, extra_json_schema={"pattern": f"^{allowed}{{{low},{high}}}$"})


# Lengths checked by msgspec; characters, phone numbers and dates by the event.
HashToken = Annotated[str, msgspec.Meta(min_length=8, max_length=128, extra_json_schema={"pattern": HASH_PATTERN})]
EventId = Annotated[str, _characters("[A-Za-z0-9._:-]", 1, 128)]
AppName = Annotated[str, _characters("[a-z0-9_-]", 1, 64)]
Label = Annotated[str, _characters("[A-Za-z0-9_.:-]", 1, 64)]
LanguageTag = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": LANGUAGE_PATTERN})]
# Free text ends up in labels, logs and checkpoints, which must stay valid UTF-8.
Ident = Annotated[str, _characters(TEXT_CHARS, 1, 256)]
ShortText = Annotated[str, _characters(TEXT_CHARS, 1, 128)]
# Bounded so that sums over a partition's lifetime stay finite.
Score = Annotated[float, msgspec.Meta(ge=-1e12, le=1e12)]
Fingerprint = Annotated[str, _characters("[0-9a-fA-F]", 1, 128)]
DateText = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": DATE_PATTERN})]  # checked in epoch
# Integers fit in 32 bits, so that sums over a partition's lifetime fit the
# 64-bit integers of every checkpoint format.
MAX_INT = 2**31 - 1
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
Milliseconds = Annotated[float, msgspec.Meta(ge=0, le=1e12)]
ResultStatus = Literal["current", "superseded", "draft", "tombstoned", "unknown"]
FilterStatus = Literal["applied", "skipped", "error"]
FILTER_STATUSES: tuple[str, ...] = get_args(FilterStatus)

class _Strict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """Structs that never hold cycles skip the garbage collector's tracking."""


class _Frozen(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False, frozen=True):
    """`_Strict`, immutable: the parts of an event. Each subclass says frozen=True
    again: type checkers do not inherit it, and would take the subclass as mutable."""


class Pipeline(_Frozen, frozen=True):
    version: ShortText | None = None
    retriever: ShortText | None = None
    reranker: ShortText | None = None
    embedding_model: ShortText | None = None


class Query(_Frozen, frozen=True):
    id: HashToken
    terms: Annotated[list[HashToken], msgspec.Meta(max_length=64)] = []
    type: Label | None = None
    language: LanguageTag | None = None


class Principal(_Frozen, frozen=True):
    tenant: ShortText
    groups: Annotated[list[HashToken], msgspec.Meta(max_length=1024)]
    claims_present: bool = True


class Stages(_Frozen, frozen=True):
    candidates: Count | None = None
    after_filter: Count | None = None
    after_rerank: Count | None = None
    packed: Count | None = None


class Filter(_Frozen, frozen=True):
    name: Label
    status: FilterStatus
    removed: Count = 0


class Feedback(_Frozen, frozen=True):
    rephrased: bool = False
    correction: bool = False
    thumbs: Literal[-1, 0, 1] | None = None
    cited: Annotated[list[Ident], msgspec.Meta(max_length=1000)] = []


class Result(_Frozen, frozen=True):
    """One ranked result."""

    chunk_id: Ident
    parent_id: Ident
    source: Ident
    rank: PositiveInt
    score: Score
    rerank_score: Score | None = None
    pre_rerank_rank: PositiveInt | None = None
    effective_date: DateText | None = None
    expires_at: DateText | None = None
    status: ResultStatus | None = None
    authority: ShortText | None = None
    acl: Annotated[list[HashToken], msgspec.Meta(max_length=1024)] = []
    tenant: ShortText | None = None
    tokens: Count | None = None
    fingerprint: Fingerprint | None = None
    packed: bool | None = None


class Event(_Strict):
    schema: str
    event_id: EventId
    ts: Annotated[datetime, msgspec.Meta(tz=True)]
    app: AppName
    query: Query
    principal: Principal
    cutoff_k: PositiveInt
    results: Annotated[list[Result], msgspec.Meta(max_length=1000)]
    pipeline: Pipeline | None = None
    stages: Stages | None = None
    filters: Annotated[list[Filter], msgspec.Meta(max_length=64)] = []
    latency_ms: Milliseconds | None = None
    feedback: Feedback | None = None

    def __post_init__(self) -> None:
        if self.schema != SCHEMA:
            raise ValueError("schema: unsupported")
        check(self)
        results = self.results
        if len(set(map(_RANK, results))) != len(results):
            check_text(self)  # a character error comes first, as in document order
            raise ValueError("results: ranks are not unique")
        results.sort(key=_RANK)


def encode(event: Event) -> bytes:
    """Serialize an event back to `retrieval.v1` JSON (tests and the generator)."""
    return msgspec.json.encode(event)
