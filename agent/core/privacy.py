"""The privacy guard: raw text where only producer-side hashes belong.

Hashed fields carry HMACs of queries, terms and access groups. A value there
that looks like raw text means the producer leaked something, and the whole
message is withheld: its dead letter carries where and why, never the payload,
and nothing logs it. A message that cannot be parsed has no fields to trust,
so its bytes are scanned instead (`raw_suspect`), erring towards withholding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

HASHED_FIELDS = ("query.id", "query.terms[]", "principal.groups[]", "results[].acl[]")
HASH_BOUND = 128  # longest hash token

# A phone number written where a hash belongs: digits with the usual
# separators, 7-15 digits (E.164 has at most 15), and at least one separator
# or a leading +. Plain digits are not flagged: they cannot be told apart from
# a short decimal or hex hash.
_PHONE = re.compile(r"\+?[0-9 ().-]+\Z")
_PHONE_DIGITS = range(7, 16)


def looks_raw(value: str) -> bool:
    """Whitespace, `@`, a phone number, or longer than any hash token."""
    return (len(value) > HASH_BOUND or "@" in value or any(c.isspace() for c in value)
            or _phone_like(value))


def _phone_like(value: str) -> bool:
    if not _PHONE.match(value):
        return False
    digits = sum(c.isdigit() for c in value)
    return digits in _PHONE_DIGITS and digits < len(value)


# Where the hashed fields sit, as keys from the top of one event.
_HASHED_PATHS = tuple(tuple(part.removesuffix("[]") for part in field.split(".")) for field in HASHED_FIELDS)
_PATH_SHOWN = 200  # longest path a rejection names; a deeper finding names an ancestor

# A path under construction: None (the top) or (parent path, segment), rendered
# only for a finding, so a deeply nested document costs one small tuple per node
# rather than one long string.
_Path = Any


def privacy_violation(doc: Any) -> str:
    """Name the first hashed field holding text that looks raw, or ''.

    Runs before any shape check, so it trusts no shape: on the way to a hashed
    field every list is walked (a top-level array of events, `results`, or a
    list where an object belongs), and at a hashed field every string below it
    counts, whatever its type or nesting, object keys included. Only hashed
    fields count: raw text elsewhere is not a privacy suspect. The path names
    positions, never content: list positions are given (`query.terms[0][1]`,
    `[2].query.id` for the third event of a top-level array), but an object
    below a hashed field is named as a whole, since its keys are data too.
    """
    for path, text in _hashed_strings(doc):
        if looks_raw(text):
            return _render(path)
    return ""


def _hashed_strings(doc: Any) -> Iterator[tuple[_Path, str]]:
    """Every string at or below a hashed field, with its path, in document order.

    Iterative, since a parsed document may nest as deep as the parser allows.
    """
    stack: list[tuple[_Path, Any, tuple[tuple[str, ...], ...]]] = [(None, doc, _HASHED_PATHS)]
    while stack:
        path, node, wanted = stack.pop()
        if () in wanted:  # at a hashed field: everything below it counts
            yield from _strings(path, node)
        elif isinstance(node, list):
            stack.extend(((path, f"[{i}]"), node[i], wanted) for i in reversed(range(len(node))))
        elif isinstance(node, dict):
            heads = {head: None for head, *_ in wanted if head in node}  # ordered, unique
            for head in reversed(heads):
                rest = tuple(tuple(tail) for first, *tail in wanted if first == head)
                stack.append(((path, f".{head}" if path else head), node[head], rest))


def _strings(path: _Path, node: Any) -> Iterator[tuple[_Path, str]]:
    """Every string in `node`; below an object, each found at the object's path."""
    stack: list[tuple[_Path, Any, bool]] = [(path, node, False)]
    while stack:
        path, node, in_object = stack.pop()
        if isinstance(node, str):
            yield path, node
        elif isinstance(node, list):
            for i in reversed(range(len(node))):
                stack.append((path if in_object else (path, f"[{i}]"), node[i], in_object))
        elif isinstance(node, dict):  # keys are data: scanned, never named
            for key, value in reversed(node.items()):
                stack += ((path, value, True), (path, key, True))


def _render(path: _Path) -> str:
    segments = []
    while path is not None:
        path, segment = path
        segments.append(segment)
    text = ""
    for segment in reversed(segments):
        if len(text) + len(segment) > _PATH_SHOWN:
            break
        text += segment
    return text or "$"


# -- messages that cannot be parsed ---------------------------------------------

# The last key of each hashed field: in broken JSON the nesting cannot be
# trusted, so a value under any key of these names counts as hashed.
_HASHED_KEYS = frozenset(field.rsplit(".", 1)[-1].removesuffix("[]") for field in HASHED_FIELDS)
# A JSON string (perhaps cut off by the end of the message), a bare word, or punctuation.
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)("?)|([^\s{}\[\]:,"]+)|([:{}\[\],])', re.S)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_ESCAPED = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def raw_suspect(raw: bytes) -> bool:
    """Whether unparsable bytes may hold what the guard would call a suspect.

    An `@` anywhere (an e-mail address, escaped or not) is a suspect; so is
    any value under a hashed field's key that looks raw. A string cut off by
    the end of the message is not taken for a phone number (its digits may
    run on), but its whitespace, `@` and length count.
    """
    text = raw.decode("utf-8", "replace")
    if "@" in text or "\\u0040" in text.lower():
        return True
    key, pending = None, None  # the latest key, and a string that may turn out to be one
    for match in _TOKEN.finditer(text):
        string, closed, bare, mark = match.groups()
        if mark == ":":
            if pending is not None:
                key, pending = pending[0], None
            continue
        if pending is not None and key in _HASHED_KEYS and _suspect(*pending):
            return True
        pending = None
        if string is not None:
            pending = (_unescape(string), bool(closed))
        elif bare is not None and key in _HASHED_KEYS and _suspect(bare, False):
            return True
    return pending is not None and key in _HASHED_KEYS and _suspect(*pending)


def forwardable_key(key: bytes | None) -> bytes | None:
    """A record key to forward with its payload, or None when it could be raw text."""
    if key is None or raw_suspect(key) or looks_raw(key.decode("utf-8", "replace")):
        return None
    return key


def _suspect(value: str, complete: bool) -> bool:
    return looks_raw(value) if complete else (len(value) > HASH_BOUND or any(c.isspace() for c in value))


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match[1]
        return chr(int(code[1:], 16)) if len(code) == 5 else _ESCAPED.get(code, code)

    return _ESCAPE.sub(one, text)
