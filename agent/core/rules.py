"""The event's character rules: hash tokens, labels, app names, language
tags, fingerprints, dates, phone numbers and free text.

Most of an event's strings recur from event to event (query terms, groups,
ACL tokens, fingerprints, dates, labels), so each rule's verdicts are kept
in a bounded memo and a known string costs one dict lookup, not a regex call:
regex calls were most of the decoding time. Only when a string breaks a rule
does the event walk its fields, in document order, to name the first offender.

The rule for free text (no control characters, DEL or lone surrogates) is the
exception: `check_text` runs it, and the decoder skips it for a message whose
bytes hold no backslash and no DEL, since JSON can carry the others only as
escapes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the model calls these rules from Event.__post_init__
    from agent.core.model import Event

# Patterns are written as the JSON Schema has them (`$` = end of string).
# A hash token, and not a phone number spelled within its alphabet (the
# privacy guard rejects those first, as pii_suspected).
HASH_PATTERN = r"^(?!(?=[0-9-]*-)-*(?:[0-9]-*){7,15}$)[A-Za-z0-9_-]{8,128}$"
DATE_PATTERN = (
    r"^\d{4}-\d{2}-\d{2}"
    r"([Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))?$"
)
TEXT_CHARS = r"[^\x00-\x1f\x7f\ud800-\udfff]"  # no control characters, no lone surrogates
LANGUAGE_PATTERN = r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$"


# What finds a character a rule does not allow. Python's `$` would also match
# before a final newline, so full matches end in `\Z`.
_NOT_HASH = re.compile(r"[^A-Za-z0-9_-]")
_NOT_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.:-]")  # event ids too: the same characters
_NOT_APP = re.compile(r"[^a-z0-9_-]")
_NOT_HEX = re.compile(r"[^0-9a-fA-F]")
_LANGUAGE = re.compile(LANGUAGE_PATTERN.removesuffix("$") + r"\Z")
_DATE = re.compile(DATE_PATTERN.removesuffix("$") + r"\Z")
# A phone number within the hash alphabet (see HASH_PATTERN).
_PHONE_ALONE = re.compile(r"(?=[0-9-]*-)-*(?:[0-9]-*){7,15}\Z")
_HASH_TOKEN = re.compile(rf"(?!{_PHONE_ALONE.pattern})[A-Za-z0-9_-]*\Z")  # both in one call (lengths: msgspec)
KNOWN_STRINGS = 1 << 14  # bound of each memo of strings known to pass a rule
KNOWN_CHARS = 256  # longer strings are judged each time: a language tag has no length bound


_V = TypeVar("_V")


class Memo(dict[str, _V]):
    """A rule's verdict on strings seen before, bounded.

    Query terms, groups, ACL tokens, fingerprints, app names, labels, language
    tags and dates recur from event to event. A lookup of a known string is a
    dict lookup that runs no Python code, several times cheaper than a regex
    call or an `lru_cache` call; only a new string reaches `__missing__`.
    Only strings that pass are kept: one that breaks a rule (or makes it
    raise) may be personal data, and is kept nowhere. Only short ones are:
    memory stays bounded in bytes, not only in entries.
    """

    __slots__ = ("rule",)

    def __init__(self, rule: Callable[[str], _V]) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, text: str) -> _V:
        verdict = self.rule(text)
        if verdict and len(text) <= KNOWN_CHARS:
            if len(self) >= KNOWN_STRINGS:
                self.clear()
            self[text] = verdict
        return verdict


def _is_hash(token: str) -> bool:
    """The hash alphabet, and not a phone number spelled within it."""
    return _HASH_TOKEN.match(token) is not None


_HASH = Memo(_is_hash)
_LABEL = Memo(lambda text: _NOT_LABEL.search(text) is None)
_APP = Memo(lambda text: _NOT_APP.search(text) is None)
_HEX = Memo(lambda text: _NOT_HEX.search(text) is None)
_LANGUAGE_TAG = Memo(lambda text: _LANGUAGE.match(text) is not None)


def check(event: Event) -> None:
    """Every character rule of the event but the free-text one (`check_text`).

    Recurring strings go through the memos; the two new with each event (its
    id and the query id) are searched directly. A string that breaks a rule
    hands over to `_offender`, which names the first such field in document
    order.
    """
    query = event.query
    if not (
        _NOT_LABEL.search(event.event_id) is None
        and _APP[event.app]
        and _is_hash(query.id)
        and all(map(_HASH.__getitem__, query.terms))
        and all(map(_HASH.__getitem__, event.principal.groups))
        and (query.type is None or _LABEL[query.type])
        and (query.language is None or _LANGUAGE_TAG[query.language])
    ):
        _offender(event)
    for f in event.filters:  # a loop, not a generator: most events have a few filters
        if not _LABEL[f.name]:
            _offender(event)
    try:
        for r in event.results:
            if (r.acl and not all(map(_HASH.__getitem__, r.acl))) or (r.fingerprint is not None and not _HEX[r.fingerprint]):
                raise ValueError  # named by _offender
            if r.effective_date is not None:
                epoch(r.effective_date)
            if r.expires_at is not None:
                epoch(r.expires_at)
    except ValueError:
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
    joined = "".join(text)
    if not (joined.isprintable() or not _NOT_TEXT.search(joined)):  # printable: the common case, found fast
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


def _strings(event: Event) -> Iterator[tuple[str, Any, re.Pattern[str]]]:
    """(path, value, rule) for every string a rule applies to, in document order."""
    yield "event_id", event.event_id, _NOT_LABEL
    yield "app", event.app, _NOT_APP
    pipeline = event.pipeline
    if pipeline is not None:
        for name in type(pipeline).__struct_fields__:
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


def _parse_date(text: str) -> float:
    """Parse an RFC 3339 date-time, or a date taken as midnight UTC."""
    if not _DATE.match(text):
        raise ValueError("not an RFC 3339 date or date-time")
    try:
        if len(text) == 10:
            return datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC).timestamp()
        return datetime.fromisoformat(text.upper()).timestamp()  # 3.11 refuses "t" and "z"
    except ValueError:
        raise ValueError("not a valid date") from None


# `epoch(text)`: a date's epoch seconds, memoized (a corpus's chunks recur
# across events with the same dates, and parsing was a quarter of decoding);
# raises ValueError for text that is not a valid date.
epoch = Memo(_parse_date).__getitem__
