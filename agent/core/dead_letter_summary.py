"""What a dead-letter topic says about why events are refused, summed for the producer team.

A reason is `kind` or `kind:path` (agent/core/reasons.py); paths name list
positions (`results[3].score`), which are folded (`results[].score`) so one
broken field of every result counts as one reason. Every text here comes from
the topic, which anyone may write to: reasons and topic names are cut to
`TEXT_BOUND` characters, at most `TRACKED` distinct ones are counted apiece
(the rest are counted as untracked), and only the `shown` largest are listed,
the others summed. An event id is shown only when it can be read without
reading anything else of the payload: from a payload the agent forwarded
(never a privacy suspect's, which is withheld anyway) whose top-level
`event_id` has the contract's form and does not look like raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from agent.core.privacy import looks_raw
from agent.core.reasons import INVALID_FIELD, UNSUPPORTED_SCHEMA

TEXT_BOUND = 200  # longest reason or topic name kept; a longer one is cut and marked
TRACKED = 10_000  # distinct reasons (kinds, source partitions) counted apiece
SHOWN = 50  # distinct reasons (kinds, source partitions) listed; the rest are summed as others
CUT = "..."

# Kinds whose payload the agent forwards as it came, parsed and passed by the privacy guard:
# the only ones an event id is read from.
_READABLE = frozenset((INVALID_FIELD, UNSUPPORTED_SCHEMA))
_EVENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")  # the contract's event_id (agent/schema/retrieval.v1.json)
_POSITION = re.compile(r"\[\d+\]")


class _Id(msgspec.Struct):
    """The one field read of a forwarded payload; the rest is skipped unread."""

    event_id: Any = None


_IDS = msgspec.json.Decoder(_Id)


@dataclass(frozen=True, kw_only=True)
class Letter:
    """What the summary takes of one dead letter: where it sits, why, where it came from, and a safe id."""

    partition: int
    offset: int
    written: float | None  # the record's timestamp (epoch s)
    reason: str | None  # the reason header; None when there is none
    source: tuple[str, int, int] | None = None  # source topic, partition, offset, when the headers say
    event_id: str | None = None


def bounded(text: str) -> str:
    """`text` cut to `TEXT_BOUND` characters, the cut marked."""
    return text if len(text) <= TEXT_BOUND else text[:TEXT_BOUND - len(CUT)] + CUT


def grouped(reason: str) -> tuple[str, str]:
    """(kind, path) of a reason, list positions folded: `invalid_field:results[3].score` ->
    (`invalid_field`, `results[].score`)."""
    kind, _, path = reason.partition(":")
    return kind, _POSITION.sub("[]", path)


def event_id(kind: str, payload: bytes | None) -> str | None:
    """The event id of a forwarded payload (`payload` None when it was withheld), or None when it
    cannot be shown safely: a kind whose payload is not read, no JSON object, no `event_id` of the
    contract's form, or one that looks like raw text (a phone number)."""
    if kind not in _READABLE or not payload:
        return None
    try:
        found = _IDS.decode(payload).event_id
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if isinstance(found, str) and _EVENT_ID.match(found) and not looks_raw(found):
        return found
    return None


class Counts:
    """Counts by key, at most `TRACKED` keys apiece; records of a key beyond them are `untracked`."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.untracked = 0

    def add(self, key: str) -> bool:
        """Count `key`; False when it is not tracked."""
        if key in self.counts:
            self.counts[key] += 1
        elif len(self.counts) < TRACKED:
            self.counts[key] = 1
        else:
            self.untracked += 1
            return False
        return True

    def top(self, shown: int) -> tuple[list[tuple[str, int]], int, int]:
        """The `shown` largest (count down, then key), and how many records and tracked keys the rest hold."""
        ordered = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        rest = ordered[shown:]
        return ordered[:shown], sum(n for _, n in rest) + self.untracked, len(rest)


@dataclass
class _Span:
    """First and last offset (and time) of the letters of one partition."""

    count: int = 0
    first: int = -1
    last: int = -1
    first_written: float | None = None
    last_written: float | None = None

    def add(self, offset: int, written: float | None = None) -> None:
        self.count += 1
        if self.first < 0 or offset < self.first:
            self.first = offset
        if offset > self.last:
            self.last = offset
        if written is not None:
            self.first_written = written if self.first_written is None else min(self.first_written, written)
            self.last_written = written if self.last_written is None else max(self.last_written, written)


class Summary:
    """The dead letters read so far, summed: `add` each, then `to_dict`."""

    def __init__(self, examples: int = 3, shown: int = SHOWN):
        self.examples = examples
        self.shown = shown
        self.total = 0
        self.without_reason = 0
        self.without_source = 0
        self.kinds = Counts()
        self.reasons = Counts()
        self.found: dict[str, list[tuple[str | None, tuple[str, int, int] | None]]] = {}  # examples by reason
        self.partitions: dict[int, _Span] = {}
        self.sources = Counts()
        self.source_spans: dict[str, _Span] = {}

    def add(self, letter: Letter) -> None:
        self.total += 1
        self.partitions.setdefault(letter.partition, _Span()).add(letter.offset, letter.written)
        if letter.source is None:
            self.without_source += 1
        else:
            topic, partition, offset = letter.source
            key = f"{bounded(topic)}/{partition}"
            if self.sources.add(key):
                self.source_spans.setdefault(key, _Span()).add(offset)
        if not letter.reason:
            self.without_reason += 1
            return
        kind, path = grouped(letter.reason)
        self.kinds.add(bounded(kind))
        reason = bounded(f"{kind}:{path}" if path else kind)
        if self.reasons.add(reason):
            self._example(self.found.setdefault(reason, []), letter)

    def _example(self, found: list[tuple[str | None, tuple[str, int, int] | None]], letter: Letter) -> None:
        """The first letters of a reason, each once: a letter sent again (dead letters are at-least-once)
        names the same source offset."""
        if len(found) >= self.examples or (letter.event_id is None and letter.source is None):
            return
        source = None if letter.source is None else (bounded(letter.source[0]), *letter.source[1:])
        example = (letter.event_id, source)
        if example not in found:
            found.append(example)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain data (texts as read, cut to `TEXT_BOUND`; escaping is the writer's)."""
        kinds, kinds_rest, kinds_rest_keys = self.kinds.top(self.shown)
        reasons, reasons_rest, reasons_rest_keys = self.reasons.top(self.shown)
        sources, sources_rest, sources_rest_keys = self.sources.top(self.shown)
        return {
            "total": self.total,
            "without_reason": self.without_reason,
            "without_source": self.without_source,
            "partitions": [
                {"partition": p, **_span(span, times=True)} for p, span in sorted(self.partitions.items())
            ],
            "kinds": [{"kind": kind, "count": n} for kind, n in kinds],
            "other_kinds": _others(kinds_rest, kinds_rest_keys, self.kinds),
            "reasons": [self._reason(reason, n) for reason, n in reasons],
            "other_reasons": _others(reasons_rest, reasons_rest_keys, self.reasons),
            "sources": [self._source(key, n) for key, n in sources],
            "other_sources": _others(sources_rest, sources_rest_keys, self.sources),
        }

    def _reason(self, reason: str, count: int) -> dict[str, Any]:
        kind, _, path = reason.partition(":")
        return {
            "reason": reason, "kind": kind, "path": path or None, "count": count,
            "examples": [
                {"event_id": event, "source": None if source is None else dict(zip(("topic", "partition", "offset"), source))}
                for event, source in self.found[reason]
            ],
        }

    def _source(self, key: str, count: int) -> dict[str, Any]:
        topic, _, partition = key.rpartition("/")
        return {"topic": topic, "partition": int(partition), **_span(self.source_spans[key])}


def _span(span: _Span, times: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"count": span.count, "first_offset": span.first, "last_offset": span.last}
    if times:
        out["first_written"] = _rfc3339(span.first_written)
        out["last_written"] = _rfc3339(span.last_written)
    return out


def _others(records: int, keys: int, counts: Counts) -> dict[str, Any]:
    """The letters not listed: how many, under how many distinct tracked keys, and whether untracked ones exist."""
    return {"count": records, "distinct": keys, "untracked": counts.untracked}


def _rfc3339(when: float | None) -> str | None:
    if when is None:
        return None
    try:
        moment = datetime.fromtimestamp(when, UTC)
    except (OverflowError, ValueError, OSError):  # a timestamp no calendar holds
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
