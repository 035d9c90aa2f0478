"""The `retrieval.v1` event as typed structs: the contract's fields and rules.

Field rules live in the types (lengths, bounds) and in each struct's
`__post_init__` (characters, dates, rank uniqueness), so the decoder's fast
and slow paths enforce exactly the same rules.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from functools import lru_cache
from typing import Annotated, Literal

import msgspec


SCHEMA = "retrieval.v1"

# Patterns are written as the JSON Schema has them (`$` = end of string).
# A hash token, and not a phone number spelled within its alphabet (the
# privacy guard rejects those first, as pii_suspected).
_HASH_PATTERN = r"^(?!(?=[0-9-]*-)-*(?:[0-9]-*){7,15}$)[A-Za-z0-9_-]{8,128}$"
_DATE_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}"
    r"([Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))?$"
)
_TEXT_CHARS = r"[^\x00-\x1f\x7f\ud800-\udfff]"  # no control characters, no lone surrogates


def _matching(pattern: str) -> msgspec.Meta:
    """Python's `$` also matches before a final newline; `\\Z` does not."""
    return msgspec.Meta(pattern=pattern.removesuffix("$") + r"\Z")


def _characters(allowed: str, low: int, high: int) -> msgspec.Meta:
    """Lengths checked by msgspec; the characters by the owning struct's
    `__post_init__`, one regex over all its strings instead of one per string
    (per-string patterns were most of the decoding time)."""
    return msgspec.Meta(min_length=low, max_length=high, extra_json_schema={"pattern": f"^{allowed}{{{low},{high}}}$"})


# Characters checked by the owning struct (one regex per struct), phone
# numbers by `_refuse_phones`.
HashToken = Annotated[str, msgspec.Meta(min_length=8, max_length=128, extra_json_schema={"pattern": _HASH_PATTERN})]
EventId = Annotated[str, _matching(r"^[A-Za-z0-9._:-]{1,128}$")]
AppName = Annotated[str, _matching(r"^[a-z0-9_-]{1,64}$")]
Label = Annotated[str, _matching(r"^[A-Za-z0-9_.:-]{1,64}$")]
LanguageTag = Annotated[str, _matching(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")]
# Free text ends up in labels, logs and checkpoints, which must stay valid UTF-8.
Ident = Annotated[str, _characters(_TEXT_CHARS, 1, 256)]
ShortText = Annotated[str, _characters(_TEXT_CHARS, 1, 128)]
# Bounded so that sums over a partition's lifetime stay finite.
Score = Annotated[float, msgspec.Meta(ge=-1e12, le=1e12)]
Fingerprint = Annotated[str, _characters("[0-9a-fA-F]", 1, 128)]
DateText = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": _DATE_PATTERN})]  # checked in _epoch
# Integers fit in 32 bits, so that sums over a partition's lifetime fit the
# 64-bit integers of every checkpoint format.
MAX_INT = 2**31 - 1
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
Milliseconds = Annotated[float, msgspec.Meta(ge=0, le=1e12)]
ResultStatus = Literal["current", "superseded", "draft", "tombstoned", "unknown"]

_NOT_HASH = re.compile(r"[^A-Za-z0-9_-]")
# A phone number within the hash alphabet (see _HASH_PATTERN), among tokens
# joined by spaces: one search per struct rather than one per token.
_PHONE_TOKEN = re.compile(r"(?:^| )(?=[0-9-]*-)-*(?:[0-9]-*){7,15}(?: |$)")
_NOT_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_NOT_HEX = re.compile(r"[^0-9a-fA-F]")
_DATE = re.compile(_DATE_PATTERN.removesuffix("$") + r"\Z")


def _refuse(bad: re.Pattern, fields: dict[str, str | list[str] | None]) -> None:
    """Raise naming the first field holding a character `bad` finds.

    Called only once a single search over all of a struct's strings failed,
    so the common case costs one regex call per struct.
    """
    for name, value in fields.items():
        for i, item in enumerate([value] if isinstance(value, str) else value or ()):
            if bad.search(item):
                raise ValueError(f"{name if isinstance(value, str) else f'{name}[{i}]'}: character not allowed")


def _refuse_phones(*tokens: str) -> None:
    """Fail the typed decode on a phone number in a hashed field, so that the
    decoder's slow path names it `pii_suspected`."""
    if _PHONE_TOKEN.search(" ".join(tokens)):
        raise ValueError("hashed field: looks like a phone number")


class _Strict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


class _Leaf(_Strict, gc=False):
    """Structs that never hold cycles skip the garbage collector's tracking."""


class Pipeline(_Leaf, frozen=True):
    version: ShortText | None = None
    retriever: ShortText | None = None
    reranker: ShortText | None = None
    embedding_model: ShortText | None = None

    def __post_init__(self) -> None:
        fields = {"version": self.version, "retriever": self.retriever,
                  "reranker": self.reranker, "embedding_model": self.embedding_model}
        if _NOT_TEXT.search("".join(v for v in fields.values() if v)):
            _refuse(_NOT_TEXT, fields)


class Query(_Leaf, frozen=True):
    id: HashToken
    terms: Annotated[list[HashToken], msgspec.Meta(max_length=64)] = []
    type: Label | None = None
    language: LanguageTag | None = None

    def __post_init__(self) -> None:
        if _NOT_HASH.search(self.id + "".join(self.terms)):
            _refuse(_NOT_HASH, {"id": self.id, "terms": self.terms})
        _refuse_phones(self.id, *self.terms)


class Principal(_Leaf, frozen=True):
    tenant: ShortText
    groups: Annotated[list[HashToken], msgspec.Meta(max_length=1024)]
    claims_present: bool = True

    def __post_init__(self) -> None:
        if _NOT_TEXT.search(self.tenant):
            _refuse(_NOT_TEXT, {"tenant": self.tenant})
        if _NOT_HASH.search("".join(self.groups)):
            _refuse(_NOT_HASH, {"groups": self.groups})
        _refuse_phones(*self.groups)


class Stages(_Leaf, frozen=True):
    candidates: Count | None = None
    after_filter: Count | None = None
    after_rerank: Count | None = None
    packed: Count | None = None


class Filter(_Leaf, frozen=True):
    name: Label
    status: Literal["applied", "skipped", "error"]
    removed: Count = 0


class Feedback(_Leaf, frozen=True):
    rephrased: bool = False
    correction: bool = False
    thumbs: Literal[-1, 0, 1] | None = None
    cited: Annotated[list[Ident], msgspec.Meta(max_length=1000)] = []

    def __post_init__(self) -> None:
        if _NOT_TEXT.search("".join(self.cited)):
            _refuse(_NOT_TEXT, {"cited": self.cited})


class Result(_Strict, dict=True):
    """One ranked result. `effective_ts`/`expires_ts` hold the parsed dates (epoch s)."""

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

    def __post_init__(self) -> None:
        text = self.chunk_id + self.parent_id + self.source
        if self.authority is not None:
            text += self.authority
        if self.tenant is not None:
            text += self.tenant
        if _NOT_TEXT.search(text):
            _refuse(_NOT_TEXT, {"chunk_id": self.chunk_id, "parent_id": self.parent_id, "source": self.source,
                                "authority": self.authority, "tenant": self.tenant})
        if self.acl:
            if _NOT_HASH.search("".join(self.acl)):
                _refuse(_NOT_HASH, {"acl": self.acl})
            _refuse_phones(*self.acl)
        if self.fingerprint is not None and _NOT_HEX.search(self.fingerprint):
            _refuse(_NOT_HEX, {"fingerprint": self.fingerprint})
        self.effective_ts = None if self.effective_date is None else _epoch(self.effective_date, "effective_date")
        self.expires_ts = None if self.expires_at is None else _epoch(self.expires_at, "expires_at")


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
        ranks = {r.rank for r in self.results}
        if len(ranks) != len(self.results):
            raise ValueError("results: ranks are not unique")
        self.results.sort(key=_rank)


def _rank(result: Result) -> int:
    return result.rank


@lru_cache(maxsize=1 << 16)
def _epoch(text: str, field: str) -> float:
    """Parse an RFC 3339 date-time, or a date taken as midnight UTC.

    Memoized: a corpus's chunks recur across events with the same dates, and
    parsing is a quarter of decoding otherwise. The memo is bounded.
    """
    if not _DATE.match(text):
        raise ValueError(f"{field}: not an RFC 3339 date or date-time")
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), timezone.utc).timestamp()
        return datetime.fromisoformat(text.upper()).timestamp()  # 3.11 refuses "t" and "z"
    except ValueError:
        raise ValueError(f"{field}: not a valid date") from None


def encode(event: Event) -> bytes:
    """Serialize an event back to `retrieval.v1` JSON (tests and the generator)."""
    return msgspec.json.encode(event)
