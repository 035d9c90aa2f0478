"""Bytes to a `retrieval.v1` event, or a rejection with exactly one reason.

The fast path is one typed msgspec decode that rejects unknown fields. Anything
that fails it takes the slow path: a generic parse, the privacy guard over every
hashed field, unknown fields stripped and counted, then the same typed
conversion, so both paths enforce exactly the same rules.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from agent.core.model import SCHEMA, Event, Feedback, Filter, Pipeline, Principal, Query, Result, Stages
from agent.core.privacy import privacy_violation, raw_suspect
from agent.core.reasons import (
    INVALID_FIELD,
    INVALID_JSON,
    PII_SUSPECTED,
    TOO_LARGE,
    UNSUPPORTED_SCHEMA,
    RejectedEvent,
)
from agent.core.rules import check_text

DEFAULT_MAX_BYTES = 1 << 20

_STRICT = msgspec.json.Decoder(Event)
_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[a-z_]+)`")
_FIELD = re.compile(r"[a-z_]+(\[\d+\])?(\.[a-z_]+(\[\d+\])?)*")  # "pipeline.version", "results[3].acl[0]"


class Decoded(msgspec.Struct):
    """A decoded event and how many fields the agent ignored in it."""

    event: Event
    unknown_fields: int = 0


def decode(raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> Decoded:
    """Decode one message into an event, or raise `RejectedEvent` with one reason."""
    if len(raw) > max_bytes:
        raise RejectedEvent(TOO_LARGE, f"{len(raw)} bytes > {max_bytes}")
    try:
        event = _STRICT.decode(raw)
        if not _plain(raw):
            check_text(event)
        return Decoded(event)
    except ValueError:  # msgspec's decode and validation errors, and the text rule's
        pass
    return _decode_slow(raw)


def _plain(raw: bytes) -> bool:
    """No string in the message can break the free-text rule. JSON writes a
    control character or a lone surrogate in a string only as an escape, and
    the strict parser refuses them as raw bytes (tests/test_event.py holds it
    to that), so without a backslash or a DEL byte there is nothing to find."""
    return b"\\" not in raw and b"\x7f" not in raw


def _decode_slow(raw: bytes) -> Decoded:
    try:  # strict JSON in UTF-8: no NaN, no BOM, no UTF-16
        doc = msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        if raw_suspect(raw):  # no fields to tell apart: a suspect anywhere withholds it
            raise RejectedEvent(PII_SUSPECTED, "$") from None
        raise RejectedEvent(INVALID_JSON, type(exc).__name__) from None
    leaked = privacy_violation(doc)
    if leaked:
        raise RejectedEvent(PII_SUSPECTED, leaked)
    if not isinstance(doc, dict):
        raise RejectedEvent(f"{INVALID_FIELD}:$", "not an object")
    if doc.get("schema") != SCHEMA:
        if isinstance(doc.get("schema"), str):
            raise RejectedEvent(UNSUPPORTED_SCHEMA, "schema is not retrieval.v1")
        raise RejectedEvent(f"{INVALID_FIELD}:schema", "missing or not a string")
    unknown = _strip_unknown(doc, Event)
    try:
        event = msgspec.convert(doc, Event)
        check_text(event)
    except ValueError as exc:  # msgspec's ValidationError, and the text rule's
        raise RejectedEvent(f"{INVALID_FIELD}:{_path(str(exc))}", str(exc)) from None
    return Decoded(event, unknown)


def _path(message: str) -> str:
    """Turn msgspec's "... - at `$.a[0]`" plus a rule's "field: ..." into `a[0].field`."""
    match = _AT.search(message)
    path = match["path"].lstrip(".") if match else ""
    head = message[: match.start()] if match else message
    missing = _MISSING.match(head)
    if missing:
        return f"{path}.{missing['name']}" if path else missing["name"]
    field, sep, _ = head.partition(": ")
    if sep and _FIELD.fullmatch(field):
        path = f"{path}.{field}" if path else field
    return path or "$"


def _strip_unknown(doc: dict[str, Any], struct: type[msgspec.Struct]) -> int:
    """Remove fields the model does not know, recursively; return how many."""
    known = set(struct.__struct_fields__)
    removed = [k for k in doc if k not in known]
    for key in removed:
        del doc[key]
    count = len(removed)
    for name, child in _CHILDREN.get(struct, {}).items():
        value = doc.get(name)
        if isinstance(value, dict):
            count += _strip_unknown(value, child)
        elif isinstance(value, list):
            count += sum(_strip_unknown(v, child) for v in value if isinstance(v, dict))
    return count


_CHILDREN: dict[type, dict[str, type]] = {
    Event: {
        "pipeline": Pipeline,
        "query": Query,
        "principal": Principal,
        "stages": Stages,
        "filters": Filter,
        "results": Result,
        "feedback": Feedback,
    },
}
