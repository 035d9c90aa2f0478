"""The event's character rules: hash tokens, labels, app names, language
tags, fingerprints, dates, phone numbers and free text.

The event checks all of its strings in a handful of regex searches over
joined text (one per rule), not one call per struct or per string: that was
most of the decoding time. Only when a search finds something does it walk
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
from typing import TYPE_CHECKING

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


# What finds a character a rule does not allow. Each rule's strings are joined
# and searched once; Python's `$` would also match before a final newline, so
# full matches end in `\Z`.
_NOT_HASH = re.compile(r"[^A-Za-z0-9_-]")
_NOT_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.:-]")  # event ids too: the same characters
_NOT_APP = re.compile(r"[^a-z0-9_-]")
_NOT_HEX = re.compile(r"[^0-9a-fA-F]")
_LANGUAGE = re.compile(LANGUAGE_PATTERN.removesuffix("$") + r"\Z")
_DATE = re.compile(DATE_PATTERN.removesuffix("$") + r"\Z")
# A phone number within the hash alphabet (see HASH_PATTERN): searched for
# among tokens each preceded and followed by a space (a literal first
# character makes the search fast).
_PHONE = r"(?=[0-9-]*-)-*(?:[0-9]-*){7,15}"
_PHONE_TOKEN = re.compile(rf" {_PHONE}(?= )")
_PHONE_ALONE = re.compile(rf"{_PHONE}\Z")


def check(event: Event) -> None:
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
