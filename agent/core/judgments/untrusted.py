"""What judges' files and offline runs hold, read as hostile input.

JSON is read strictly. `json.loads` keeps the last of a key repeated in one
object, and reads NaN, Infinity and numbers too large for a float (1e400) as
non-finite floats: a file would then say something other than what it
holds, silently. Here each of those is a `ValueError` naming the key or the
number, and a syntax error stays a `json.JSONDecodeError` with its line. So
is nesting deeper than the parser recurses (about 1000 levels): `TooDeep`,
at the line where the document passes that depth, never a RecursionError.
Every JSON a command reads from a file or a server goes through `loads`
(a large run through `walk`, one member at a time, with the same errors).
An integer is 1-18 ASCII digits (`int` and `str.isdigit` also take "²" and
other scripts' digits, and `int` fails on thousands of them). A value in a
message is `shown`: as it is only when it is a short token, so that a text
in a wrong column or field is never echoed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

_T = TypeVar("_T")
_BLANK = re.compile(r"\s")
_ID = re.compile(r"\S{1,96}\Z")  # at most the store's chunk column; blinded ids are about 25 characters
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[][{}]')  # a string, skipped whole, or a bracket
_DEPTH = 1000  # about where CPython's recursion limit stops its JSON parser


class TooDeep(json.JSONDecodeError):
    """A JSON document nested deeper than the parser can follow."""


def loads(text: str) -> Any:
    """The JSON value of `text`; a repeated key or a non-finite number is a ValueError,
    nesting too deep a `TooDeep`."""
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise _too_deep(text) from None


def value(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value at `pos` and where it ends, read as `loads` reads it."""
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise _too_deep(text) from None


def walk(text: str, member: Callable[[str, int], int], pos: int | None = None) -> int:
    """Read the JSON object at `pos` (its `{`; None: the whole text, blanks around it) one
    member at a time, so that a large document is never held as objects: `member(key, at)`
    reads the value at `at` (with `value`, or by walking it) and returns where it ends. Its
    errors are those `loads` raises, at the same places. Returns where the object ends."""
    whole = pos is None
    pos = _blanks(text, 0) if pos is None else pos
    if not text.startswith("{", pos):
        raise json.JSONDecodeError("Expecting value", text, pos)
    seen: set[str] = set()
    repeat: str | None = None
    pos = _blanks(text, pos + 1)
    more = not text.startswith("}", pos)
    while more:
        if not text.startswith('"', pos):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        key, pos = value(text, pos)  # a string
        pos = _blanks(text, pos)
        if not text.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        if key in seen and repeat is None:
            repeat = key
        seen.add(key)
        pos = _blanks(text, member(key, _blanks(text, pos + 1)))
        more = text.startswith(",", pos)
        if not more and not text.startswith("}", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _blanks(text, pos + 1) if more else pos
    if repeat is not None:
        raise ValueError(f"key {shown(repeat)} appears twice in one object")
    end = _blanks(text, pos + 1)
    if whole and end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return pos + 1


def _blanks(text: str, pos: int) -> int:
    """Where the blanks JSON takes between tokens, from `pos`, end."""
    while text.startswith((" ", "\t", "\n", "\r"), pos):
        pos += 1
    return pos


def _too_deep(text: str) -> TooDeep:
    """The error at the first bracket past `_DEPTH` levels (outside strings),
    else at the deepest one: the scan stops there, so a long run of brackets costs little."""
    depth = deepest = where = 0
    for token in _BRACKETS.finditer(text):
        kind = text[token.start()]
        if kind in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, token.start()
                if depth > _DEPTH:
                    break
        elif kind in "]}":
            depth -= 1
    return TooDeep(f"nested more than {deepest - 1} levels deep", text, where)


def integer(text: str) -> int | None:
    """The integer 1-18 ASCII digits (after an optional minus) spell, else None."""
    digits = text.removeprefix("-")
    return int(text) if len(digits) <= 18 and digits.isascii() and digits.isdigit() else None


def first_repeat(values: Iterable[_T]) -> _T | None:
    """The first value that comes a second time, else None."""
    seen: set[_T] = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def _unique(pairs: list[tuple[str, object]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        raise ValueError(f"key {shown(first_repeat(key for key, _ in pairs))} appears twice in one object")
    return out


def _constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{shown(text)} is too large: not a finite number")
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_unique, parse_constant=_constant, parse_float=_finite)


def shown(value: object, limit: int = 40) -> str:
    """A value as a message shows it: a short token (no blank, printable) as
    its repr; anything else, such as text in a wrong column, by its kind and
    size only, so that a judged or resolved text is never echoed."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= limit else f"(a number of {len(text)} characters)"
    if isinstance(value, str):
        if len(value) <= limit and value.isprintable() and not _BLANK.search(value):
            return repr(value)
        return f"(a text of {len(value)} characters)"
    if isinstance(value, list):
        return f"(a list of {len(value)})"
    if isinstance(value, dict):
        return f"(an object of {len(value)} keys)"
    return f"(a {type(value).__name__})"


def is_id(value: object) -> bool:
    """An item or chunk id a message may show: a printable token without blanks."""
    return isinstance(value, str) and _ID.match(value) is not None and value.isprintable()


def chunk_place(chunk: object, index: int) -> str:
    """Where a chunk's problems are, as a reason's prefix: its id, else its position."""
    return f"chunk {chunk}: " if is_id(chunk) else f"chunk {index + 1} of the item: "


def grade_of(value: object) -> object:
    """A grade given as text ("2") as its integer when it is ASCII digits; anything else as it is, to be refused."""
    number = integer(value) if isinstance(value, str) else None
    return value if number is None else number
