"""Plain values in, one `retrieval.v1` event out, within the contract's bounds.

An app's values are not always what the contract takes. Each value is kept,
brought within bounds by one rule below (and the rule counted), or, where no
rule can keep it truthful, the whole event is dropped with a reason: never
an invented value.

| input | rule | counted as |
| --- | --- | --- |
| query not a string | event dropped | dropped `invalid_query` |
| no tenant | event dropped | dropped `missing_tenant` |
| event_id, chunk_id, parent_id or source missing, empty, or not text, a whole number or a UUID | event dropped | dropped `missing_<field>` |
| ts not a date-time, or one whose UTC time is outside years 1-9999 | event dropped | dropped `invalid_ts` |
| cutoff_k not a whole number | event dropped | dropped `invalid_cutoff_k` |
| score missing | event dropped | dropped `missing_score` |
| score not a number, NaN or infinite | event dropped | dropped `invalid_score` |
| more than 1024 groups, or ACL entries on a result | event dropped | dropped `too_many_groups` |
| the encoded event larger than `max_event_bytes` | event dropped | dropped `too_large` |
| more than 1000 results | the first 1000 kept | adjusted `results_truncated` |
| more than 64 query terms, 64 filters or 1000 cited ids | the first ones kept | adjusted `truncated` |
| an id over 256 characters, a text over 128 or with control characters | replaced by `~` and its keyed hash | adjusted `hashed_text` |
| an event id other than 1-128 of `A-Za-z0-9._:-` | replaced by its keyed hash | adjusted `hashed_text` |
| a number beyond the contract's range (score +-1e12, counts 0..2^31-1, cutoff_k 1..2^31-1, latency) | clamped to the range | adjusted `clamped` |
| a label (query type, filter name) with other characters than `A-Za-z0-9_.:-` | each replaced by `_`, cut to 64 | adjusted `label_cleaned` |
| a date or time without an offset | taken as UTC | adjusted `assumed_utc` |
| a date or time whose offset is not whole minutes | converted to UTC | (none) |
| an unreadable optional value (date, language, status, thumbs, rank, rerank score, tokens) | left out | adjusted `left_out` |
| groups, an ACL or cited ids given as one text instead of a list | one item | (none) |
| a group or ACL entry that is not text or a whole number (None, say) | left out | adjusted `left_out` |

Text is hashed, fingerprinted or counted here and never stored in the event.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID

from ragdrift_producer.hashing import ID, Hasher
from ragdrift_producer.values import Feedback, Filter, Pipeline, Result, Stages, User, When

MAX_RESULTS = 1000
MAX_TERMS = 64
MAX_FILTERS = 64
MAX_GROUPS = 1024
MAX_CITED = 1000
MAX_COUNT = 2**31 - 1
MAX_SCORE = 1e12
STATUSES = frozenset({"current", "superseded", "draft", "tombstoned", "unknown"})

_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.:-]")
_LANGUAGE = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*\Z")
_EVENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")


class Dropped(Exception):
    """The event cannot be sent truthfully; `reason` is one of a fixed set."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Builder:
    """Builds events for one app and key; `adjusted(rule)` is told each rule applied."""

    def __init__(self, hasher: Hasher, app: str, adjusted: Callable[[str], None]) -> None:
        self.hasher = hasher
        self.app = app
        self.adjusted = adjusted

    def event(self, *, event_id: str, ts: datetime, query: str, user: User, results: Sequence[Result],
              cutoff_k: int, query_type: str | None = None, language: str | None = None,
              pipeline: Pipeline | None = None, stages: Stages | None = None,
              filters: Sequence[Filter] = (), latency_ms: float | None = None,
              feedback: Feedback | None = None) -> dict[str, Any]:
        if not isinstance(query, str):
            raise Dropped("invalid_query")
        query_id, terms = self.hasher.query(query, most=MAX_TERMS + 1)  # one more tells a truncation
        if len(terms) > MAX_TERMS:
            terms = terms[:MAX_TERMS]
            self.adjusted("truncated")
        event: dict[str, Any] = {
            "schema": "retrieval.v1", "event_id": self._event_id(event_id), "ts": self._instant(ts),
            "app": self.app,
        }
        body: dict[str, Any] = {"id": query_id, "terms": terms}
        if query_type is not None and (label := self._label(query_type)):
            body["type"] = label
        if language is not None:
            if isinstance(language, str) and _LANGUAGE.match(language):
                body["language"] = language
            else:
                self.adjusted("left_out")
        event["query"] = body
        event["principal"] = self._principal(user)
        event["cutoff_k"] = self._cutoff(cutoff_k)
        if pipeline is not None:
            versions = {name: self._text(getattr(pipeline, name), 128) for name in
                        ("version", "retriever", "reranker", "embedding_model") if getattr(pipeline, name)}
            if versions:
                event["pipeline"] = versions
        if stages is not None:
            counts = {name: self._count(getattr(stages, name)) for name in
                      ("candidates", "after_filter", "after_rerank", "packed")
                      if getattr(stages, name) is not None}
            event["stages"] = {name: n for name, n in counts.items() if n is not None}
        if filters:
            event["filters"] = self._filters(filters)
        if len(results) > MAX_RESULTS:
            results = results[:MAX_RESULTS]
            self.adjusted("results_truncated")
        event["results"] = [self._result(r, rank) for rank, r in enumerate(results, 1)]
        if latency_ms is not None:
            latency = self._number(latency_ms, 0.0, MAX_SCORE)
            if latency is not None:
                event["latency_ms"] = latency
        if feedback is not None:
            event["feedback"] = self._feedback(feedback)
        return event

    def _principal(self, user: User) -> dict[str, Any]:
        if not user.tenant:
            raise Dropped("missing_tenant")
        groups = self._names(user.groups)
        if len(groups) > MAX_GROUPS:
            raise Dropped("too_many_groups")
        principal: dict[str, Any] = {"tenant": self._text(user.tenant, 128),
                                     "groups": [self.hasher.group(g) for g in groups]}
        if not user.claims_present:
            principal["claims_present"] = False
        return principal

    def _result(self, result: Result, rank: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "chunk_id": self._id(result.chunk_id, "chunk_id"),
            "parent_id": self._id(result.parent_id, "parent_id"),
            "source": self._id(result.source, "source"),
            "rank": rank,
        }
        score = result.score
        if score is None:
            raise Dropped("missing_score")
        if isinstance(score, bool) or not isinstance(score, int | float) or not _finite(score):
            raise Dropped("invalid_score")
        out["score"] = float(self._clamp(score, -MAX_SCORE, MAX_SCORE))
        if result.rerank_score is not None:
            rerank = self._number(result.rerank_score, -MAX_SCORE, MAX_SCORE)
            if rerank is not None:
                out["rerank_score"] = rerank
        before = result.pre_rerank_rank
        if before is not None:
            if isinstance(before, int) and not isinstance(before, bool) and 1 <= before <= MAX_COUNT:
                out["pre_rerank_rank"] = before
            else:  # a rank out of range is no rank: not clamped into another one
                self.adjusted("left_out")
        for name in ("effective_date", "expires_at"):
            value = getattr(result, name)
            if value is not None and (text := self._date(value)) is not None:
                out[name] = text
        if result.status is not None:
            if result.status in STATUSES:
                out["status"] = result.status
            else:
                self.adjusted("left_out")
        if result.authority:
            out["authority"] = self._text(result.authority, 128)
        if result.acl:
            acl = self._names(result.acl)
            if len(acl) > MAX_GROUPS:
                raise Dropped("too_many_groups")
            if acl:
                out["acl"] = [self.hasher.group(g) for g in acl]
        if result.tenant:
            out["tenant"] = self._text(result.tenant, 128)
        tokens = result.tokens
        if result.text is not None and isinstance(result.text, str):
            out["fingerprint"] = self.hasher.fingerprint(result.text)
            if tokens is None:
                tokens = -(-len(result.text) // 4)
        if tokens is not None and (count := self._count(tokens)) is not None:
            out["tokens"] = count
        if result.packed is not None:
            out["packed"] = bool(result.packed)
        return out

    def _filters(self, filters: Sequence[Filter]) -> list[dict[str, Any]]:
        if len(filters) > MAX_FILTERS:
            filters = filters[:MAX_FILTERS]
            self.adjusted("truncated")
        out = []
        for f in filters:
            name = self._label(f.name)
            if name is None:  # counted by _label
                continue
            if f.status not in ("applied", "skipped", "error"):
                self.adjusted("left_out")
                continue
            out.append({"name": name, "status": f.status, "removed": self._count(f.removed) or 0})
        return out

    def _feedback(self, feedback: Feedback) -> dict[str, Any]:
        out: dict[str, Any] = {"rephrased": bool(feedback.rephrased), "correction": bool(feedback.correction)}
        if feedback.thumbs is not None:
            if feedback.thumbs in (-1, 0, 1) and not isinstance(feedback.thumbs, bool):
                out["thumbs"] = int(feedback.thumbs)
            else:
                self.adjusted("left_out")
        cited = [feedback.cited] if isinstance(feedback.cited, str) else list(feedback.cited)
        if len(cited) > MAX_CITED:
            cited = cited[:MAX_CITED]
            self.adjusted("truncated")
        out["cited"] = [self._id(c, "chunk_id") for c in cited]
        return out

    # -- one rule per kind of value -----------------------------------------------

    def _names(self, values: str | Sequence[object]) -> list[str]:
        """Group names or ACL entries: one text is one name; an entry that is not a name is left out."""
        if isinstance(values, str):
            return [values]
        names = []
        for value in values:
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                names.append(str(value))
            else:
                self.adjusted("left_out")
        return names

    def _id(self, value: object, field: str) -> str:
        if isinstance(value, int | UUID) and not isinstance(value, bool):
            value = str(value)
        if not value or not isinstance(value, str):
            raise Dropped(f"missing_{field}")
        return self._text(value, 256)

    def _event_id(self, value: object) -> str:
        if isinstance(value, int | UUID) and not isinstance(value, bool):
            value = str(value)
        if not value or not isinstance(value, str):
            raise Dropped("missing_event_id")
        if _EVENT_ID.match(value):
            return value
        self.adjusted("hashed_text")
        return self.hasher.token(ID, value)

    def _cutoff(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Dropped("invalid_cutoff_k")
        if 1 <= value <= MAX_COUNT:
            return value
        self.adjusted("clamped")
        return min(max(value, 1), MAX_COUNT)

    def _text(self, value: str, limit: int) -> str:
        value = str(value)
        if len(value) <= limit and not _CONTROL.search(value):
            return value
        self.adjusted("hashed_text")
        return self.hasher.identifier(value)

    def _label(self, value: object) -> str | None:
        if not isinstance(value, str) or not value:
            self.adjusted("left_out")
            return None
        if len(value) <= 64 and not _LABEL_BAD.search(value):
            return value
        self.adjusted("label_cleaned")
        return _LABEL_BAD.sub("_", value)[:64]

    def _count(self, value: object) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.adjusted("left_out")
            return None
        if 0 <= value <= MAX_COUNT:
            return value
        self.adjusted("clamped")
        return min(max(value, 0), MAX_COUNT)

    def _number(self, value: object, low: float, high: float) -> float | None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
            self.adjusted("left_out")
            return None
        return float(self._clamp(value, low, high))

    def _clamp(self, value: float, low: float, high: float) -> float:
        if low <= value <= high:
            return value
        self.adjusted("clamped")
        return min(max(value, low), high)

    def _instant(self, value: object) -> str:
        if not isinstance(value, datetime) or (aware := self._aware(value)) is None:
            raise Dropped("invalid_ts")
        return aware.isoformat(timespec="milliseconds")

    def _date(self, value: When) -> str | None:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value) if len(value) > 10 else date.fromisoformat(value)
            except ValueError:
                self.adjusted("left_out")
                return None
        if isinstance(value, datetime):
            if (aware := self._aware(value)) is not None:
                return aware.isoformat()
        elif isinstance(value, date):
            return value.isoformat()
        self.adjusted("left_out")
        return None

    def _aware(self, value: datetime) -> datetime | None:
        """With a whole-minute offset, as the contract takes; None if its UTC time is beyond year 1-9999."""
        offset = value.utcoffset()
        if offset is None:
            self.adjusted("assumed_utc")
            return value.replace(tzinfo=UTC)
        if offset.total_seconds() % 60:
            try:
                return value.astimezone(UTC)
            except OverflowError:
                return None
        return value


def _finite(value: float) -> bool:
    """An int is finite however large (math.isfinite cannot take one beyond the float range)."""
    return isinstance(value, int) or math.isfinite(value)
