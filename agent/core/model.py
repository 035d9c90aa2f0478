"""The `retrieval.v1` event as typed structs: the contract's fields and rules.

Field rules live in the types (lengths, bounds, enums, run by msgspec in C)
and in `Event.__post_init__` (characters, dates, phone numbers, rank
uniqueness), so the decoder's fast and slow paths enforce exactly the same
rules. The event checks all of its strings in a handful of regex searches
over joined text (one per rule), not one call per struct or per string: that
was most of the decoding time. Only when a search finds something does it walk
the fields, in document order, to name the first offender.

The rule for free text (no control characters, DEL or lone surrogates) is the
exception: `check_text` runs it, and the decoder skips it for a message whose
bytes hold no backslash and no DEL, since JSON can carry the others only as
escapes.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from functools import lru_cache
from operator import attrgetter
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
_LANGUAGE_PATTERN = r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$"


def _characters(allowed: str, low: int, high: int) -> msgspec.Meta:
    """Lengths checked by msgspec, the characters by `Event.__post_init__`;
    the schema states both as one pattern."""
    return msgspec.Meta(min_length=low, max_length=high, extra_json_schema={"pattern": f"^{allowed}{{{low},{high}}}$"})


# Lengths checked by msgspec; characters, phone numbers and dates by the event.
HashToken = Annotated[str, msgspec.Meta(min_length=8, max_length=128, extra_json_schema={"pattern": _HASH_PATTERN})]
EventId = Annotated[str, _characters("[A-Za-z0-9._:-]", 1, 128)]
AppName = Annotated[str, _characters("[a-z0-9_-]", 1, 64)]
Label = Annotated[str, _characters("[A-Za-z0-9_.:-]", 1, 64)]
LanguageTag = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": _LANGUAGE_PATTERN})]
# Free text ends up in labels, logs and checkpoints, which must stay valid UTF-8.
Ident = Annotated[str, _characters(_TEXT_CHARS, 1, 256)]
ShortText = Annotated[str, _characters(_TEXT_CHARS, 1, 128)]
# Bounded so that sums over a partition's lifetime stay finite.
Score = Annotated[float, msgspec.Meta(ge=-1e12, le=1e12)]
Fingerprint = Annotated[str, _characters("[0-9a-fA-F]", 1, 128)]
DateText = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": _DATE_PATTERN})]  # checked in epoch
# Integers fit in 32 bits, so that sums over a partition's lifetime fit the
# 64-bit integers of every checkpoint format.
MAX_INT = 2**31 - 1
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_INT)]
Milliseconds = Annotated[float, msgspec.Meta(ge=0, le=1e12)]
ResultStatus = Literal["current", "superseded", "draft", "tombstoned", "unknown"]

# What finds a character a rule does not allow. Each rule's strings are joined
# and searched once; Python's `$` would also match before a final newline, so
# full matches end in `\Z`.
_NOT_HASH = re.compile(r"[^A-Za-z0-9_-]")
_NOT_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.:-]")  # event ids too: the same characters
_NOT_APP = re.compile(r"[^a-z0-9_-]")
_NOT_HEX = re.compile(r"[^0-9a-fA-F]")
_LANGUAGE = re.compile(_LANGUAGE_PATTERN.removesuffix("$") + r"\Z")
_DATE = re.compile(_DATE_PATTERN.removesuffix("$") + r"\Z")
# A phone number within the hash alphabet (see _HASH_PATTERN): searched for
# among tokens each preceded and followed by a space (a literal first
# character makes the search fast).
_PHONE = r"(?=[0-9-]*-)-*(?:[0-9]-*){7,15}"
_PHONE_TOKEN = re.compile(rf" {_PHONE}(?= )")
_PHONE_ALONE = re.compile(rf"{_PHONE}\Z")
_RANK = attrgetter("rank")


class _Strict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """Structs that never hold cycles skip the garbage collector's tracking."""


class Pipeline(_Strict, frozen=True):
    version: ShortText | None = None
    retriever: ShortText | None = None
    reranker: ShortText | None = None
    embedding_model: ShortText | None = None


class Query(_Strict, frozen=True):
    id: HashToken
    terms: Annotated[list[HashToken], msgspec.Meta(max_length=64)] = []
    type: Label | None = None
    language: LanguageTag | None = None


class Principal(_Strict, frozen=True):
    tenant: ShortText
    groups: Annotated[list[HashToken], msgspec.Meta(max_length=1024)]
    claims_present: bool = True


class Stages(_Strict, frozen=True):
    candidates: Count | None = None
    after_filter: Count | None = None
    after_rerank: Count | None = None
    packed: Count | None = None


class Filter(_Strict, frozen=True):
    name: Label
    status: Literal["applied", "skipped", "error"]
    removed: Count = 0


class Feedback(_Strict, frozen=True):
    rephrased: bool = False
    correction: bool = False
    thumbs: Literal[-1, 0, 1] | None = None
    cited: Annotated[list[Ident], msgspec.Meta(max_length=1000)] = []


class Result(_Strict, frozen=True):
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

    @property
    def effective_ts(self) -> float | None:
        """`effective_date` in epoch seconds (validated when the event was built)."""
        return None if self.effective_date is None else epoch(self.effective_date)

    @property
    def expires_ts(self) -> float | None:
        return None if self.expires_at is None else epoch(self.expires_at)


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
        _check(self)
        results = self.results
        if len({r.rank for r in results}) != len(results):
            check_text(self)  # a character error comes first, as in document order
            raise ValueError("results: ranks are not unique")
        results.sort(key=_RANK)


def _check(event: Event) -> None:
    """Every character rule of the event but the free-text one (`check_text`),
    one search per rule over joined text.

    A search that finds something hands over to `_offender`, which names the
    field; dates are parsed (memoized) as they are checked.
    """
    query, principal, results = event.query, event.principal, event.results
    hashes = [query.id, *query.terms, *principal.groups]
    hexes = []
    dates = []
    for r in results:
        if r.acl:
            hashes += r.acl
        if r.fingerprint is not None:
            hexes.append(r.fingerprint)
        if r.effective_date is not None:
            dates.append(r.effective_date)
        if r.expires_at is not None:
            dates.append(r.expires_at)
    labels = event.event_id + "".join([f.name for f in event.filters])
    if query.type is not None:
        labels += query.type
    try:
        for text_date in dates:
            epoch(text_date)
    except ValueError:
        _offender(event)
    if (
        _NOT_HASH.search("".join(hashes))
        or _PHONE_TOKEN.search(f" {' '.join(hashes)} ")
        or _NOT_LABEL.search(labels)
        or _NOT_APP.search(event.app)
        or (hexes and _NOT_HEX.search("".join(hexes)))
        or (query.language is not None and not _LANGUAGE.match(query.language))
    ):
        _offender(event)


def check_text(event: Event) -> None:
    """The free-text rule over every free-text field at once; raises like `_check`."""
    principal, pipeline, feedback = event.principal, event.pipeline, event.feedback
    text = [principal.tenant]
    for r in event.results:
        text += (r.chunk_id, r.parent_id, r.source)
        if r.authority is not None:
            text.append(r.authority)
        if r.tenant is not None:
            text.append(r.tenant)
    if pipeline is not None:
        text += (pipeline.version or "", pipeline.retriever or "", pipeline.reranker or "", pipeline.embedding_model or "")
    if feedback is not None:
        text += feedback.cited
    text = "".join(text)
    if not (text.isprintable() or not _NOT_TEXT.search(text)):  # printable: the common case, found fast
        _offender(event)


def _offender(event: Event) -> None:
    """Raise `ValueError("<path>: <why>")` for the first field, in document order, that breaks a rule."""
    for path, value, rule in _strings(event):
        if rule is _DATE:
            try:
                epoch(value)
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        elif rule is _LANGUAGE:
            if not rule.match(value):
                raise ValueError(f"{path}: not a language tag")
        elif rule.search(value):
            raise ValueError(f"{path}: character not allowed")
        elif rule is _NOT_HASH and _PHONE_ALONE.match(value):
            raise ValueError(f"{path}: looks like a phone number")


def _strings(event: Event):
    """(path, value, rule) for every string a rule applies to, in document order."""
    yield "event_id", event.event_id, _NOT_LABEL
    yield "app", event.app, _NOT_APP
    pipeline = event.pipeline
    if pipeline is not None:
        for name in Pipeline.__struct_fields__:
            if getattr(pipeline, name) is not None:
                yield f"pipeline.{name}", getattr(pipeline, name), _NOT_TEXT
    query = event.query
    yield "query.id", query.id, _NOT_HASH
    for i, term in enumerate(query.terms):
        yield f"query.terms[{i}]", term, _NOT_HASH
    if query.type is not None:
        yield "query.type", query.type, _NOT_LABEL
    if query.language is not None:
        yield "query.language", query.language, _LANGUAGE
    yield "principal.tenant", event.principal.tenant, _NOT_TEXT
    for i, group in enumerate(event.principal.groups):
        yield f"principal.groups[{i}]", group, _NOT_HASH
    for i, f in enumerate(event.filters):
        yield f"filters[{i}].name", f.name, _NOT_LABEL
    for i, r in enumerate(event.results):
        at = f"results[{i}]"
        yield f"{at}.chunk_id", r.chunk_id, _NOT_TEXT
        yield f"{at}.parent_id", r.parent_id, _NOT_TEXT
        yield f"{at}.source", r.source, _NOT_TEXT
        for name, rule in (("effective_date", _DATE), ("expires_at", _DATE), ("authority", _NOT_TEXT),
                           ("tenant", _NOT_TEXT), ("fingerprint", _NOT_HEX)):
            if getattr(r, name) is not None:
                yield f"{at}.{name}", getattr(r, name), rule
        for j, token in enumerate(r.acl):
            yield f"{at}.acl[{j}]", token, _NOT_HASH
    if event.feedback is not None:
        for i, cited in enumerate(event.feedback.cited):
            yield f"feedback.cited[{i}]", cited, _NOT_TEXT


@lru_cache(maxsize=1 << 16)
def epoch(text: str) -> float:
    """Parse an RFC 3339 date-time, or a date taken as midnight UTC.

    Memoized: a corpus's chunks recur across events with the same dates, and
    parsing is a quarter of decoding otherwise. The memo is bounded.
    """
    if not _DATE.match(text):
        raise ValueError("not an RFC 3339 date or date-time")
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), timezone.utc).timestamp()
        return datetime.fromisoformat(text.upper()).timestamp()  # 3.11 refuses "t" and "z"
    except ValueError:
        raise ValueError("not a valid date") from None


def encode(event: Event) -> bytes:
    """Serialize an event back to `retrieval.v1` JSON (tests and the generator)."""
    return msgspec.json.encode(event)
