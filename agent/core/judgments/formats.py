"""Qrels and runs from their text: JSON as the seed script reads it, or TREC lines.

- qrels: JSON `{query: {doc: grade}}`, or TREC qrels lines `qid iter docno rel`
  (rel an integer); every grade from -100 to 100 (`GRADES`): judges grade
  0-3, TREC's tracks -2 to 4, and nDCG's gain 2^g - 1 overflows a float
  from g = 1024, its sums before that;
- run: JSON `{query: [doc, ...]}` in rank order, or TREC run lines
  `qid Q0 docno rank score tag`, ordered as trec_eval orders them: by score,
  highest first, ties by docno in reverse (the rank column is ignored).

A byte order mark at the start is not part of the text. A text whose first
character (after blanks) is `{` is JSON. Every problem is a `FormatError`
with the line it is on (for JSON, the query it is under): a repeated
judgment, query or JSON key, a grade or score that is not a finite number
(NaN and Infinity included), a grade outside -100 to 100, a TREC relevance
that is not ASCII digits, and, when duplicates are rejected, a doc id
repeated in one query's ranking.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast, overload

from agent.core.judgments.untrusted import first_repeat, integer, loads, shown

GRADES = 100  # a grade is from -GRADES to GRADES (the module docstring says why)


class FormatError(ValueError):
    """A text that is not qrels or a run; says where."""

    def __init__(self, line: int | None, reason: str):
        super().__init__(f"line {line}: {reason}" if line is not None else reason)
        self.line = line
        self.reason = reason


def parse_qrels(text: str) -> dict[str, dict[str, float]]:
    text = text.removeprefix("\ufeff")
    if is_json(text):
        data = _json(text)
        if not all(isinstance(docs, dict) for docs in data.values()):
            raise FormatError(None, "qrels JSON must map each query to {doc: grade}")
        for query, docs in data.items():
            for doc, grade in docs.items():
                if not _number(grade):
                    raise FormatError(None, f"query {shown(query)}: grade of {shown(doc)} "
                                            f"is not a finite number: {shown(grade)}")
                if abs(grade) > GRADES:
                    raise FormatError(None, f"query {shown(query)}: grade of {shown(doc)} "
                                            f"is not from -{GRADES} to {GRADES}: {shown(grade)}")
        return data
    qrels: dict[str, dict[str, float]] = {}
    for n, fields in _lines(text, 4, "qid iter docno rel"):
        query, _, doc, rel = fields
        grade = integer(rel)
        if grade is None:
            raise FormatError(n, f"relevance {shown(rel)} is not an integer")
        if abs(grade) > GRADES:
            raise FormatError(n, f"relevance {grade} is not from -{GRADES} to {GRADES}")
        docs = qrels.setdefault(query, {})
        if doc in docs:
            raise FormatError(n, f"doc {shown(doc)} of query {shown(query)} is judged twice")
        docs[doc] = grade
    return qrels


def ranked(query: str, value: object, reject_duplicates: bool) -> Ranking:
    """A plain JSON run's ranking of `query`, from the query's value."""
    if not isinstance(value, list) or not all(isinstance(doc, str) for doc in value):
        raise FormatError(None, f"query {shown(query)}: a run maps each query to a list of doc ids")
    if reject_duplicates:
        repeated = first_repeat(value)
        if repeated is not None:
            raise FormatError(None, f"query {shown(query)}: duplicate doc id {shown(repeated)}")
    return Ranking(value)


def trec_run(lines: Iterable[str], reject_duplicates: bool,
             judged: Container[str] | None = None) -> tuple[dict[str, Sequence[str]], frozenset[str]]:
    """The rankings of a TREC run's lines (as `str.splitlines` gives them), read one at a
    time, and the queries left out. Only the queries in `judged` (all when None) are kept,
    their ids, scores and line numbers packed until the end, so a kept line costs about its
    own length; a line of a query left out is checked and dropped (a doc it repeats goes unseen)."""
    kept: dict[str, _Ranked] = {}
    others: set[str] = set()
    try:
        for n, fields in _rows(lines, 6, "qid Q0 docno rank score tag"):
            query, _, doc, _, score, _ = fields
            value = _score(score, n)
            if judged is None or query in judged:
                kept.setdefault(query, _Ranked()).add(doc, value, n)
            else:
                others.add(query)
    except FormatError:
        if reject_duplicates:  # a repeat on an earlier line comes first
            _no_repeat(kept)
        raise
    if reject_duplicates:
        _no_repeat(kept)
    return {query: ranked.ranking() for query, ranked in kept.items()}, frozenset(others)


T = TypeVar("T")


class Packed(Sequence[T]):
    """A sequence held packed rather than as an object per item: equal to any sequence of
    the same items, as the list or tuple it stands for is."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class Ranking(Packed[str]):
    """A query's doc ids in rank order, held as one text, not an object each (as a tuple
    when an id holds a line break, as a JSON id may)."""

    __slots__ = ("_ids", "_count")

    def __init__(self, ids: Sequence[str]) -> None:
        joined = "\n".join(ids)
        self._count = len(ids)
        self._ids = joined if joined.count("\n") == max(self._count - 1, 0) else tuple(ids)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        if isinstance(self._ids, tuple):
            return iter(self._ids)
        return iter(self._ids.split("\n") if self._count else ())

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        return list(self)[index]


class _Ranked:
    """One query's lines so far: ids packed in one buffer, scores and line numbers in arrays."""

    __slots__ = ("ids", "scores", "lines")

    def __init__(self) -> None:
        self.ids = bytearray()
        self.scores = array("d")
        self.lines = array("L")

    def add(self, doc: str, score: float, line: int) -> None:
        self.ids += f"{doc}\n".encode()
        self.scores.append(score)
        self.lines.append(line)

    def docs(self) -> list[str]:
        return self.ids.decode().split("\n")[:-1]

    def ranking(self) -> Ranking:
        """By score, highest first, ties by docno in reverse, as trec_eval orders them."""
        return Ranking([doc for _, doc in sorted(zip(self.scores, self.docs()), reverse=True)])


def _no_repeat(kept: dict[str, _Ranked]) -> None:
    """A `FormatError` at the first line (of all) that repeats a doc of its query."""
    first = None
    for query, ranked in kept.items():
        seen: dict[str, int] = {}
        for doc, n in zip(ranked.docs(), ranked.lines):
            if doc in seen:
                if first is None or n < first[0]:
                    first = n, doc, query, seen[doc]
                break
            seen[doc] = n
    if first is not None:
        n, doc, query, earlier = first
        raise FormatError(n, f"duplicate doc id {shown(doc)} for query {shown(query)} (first on line {earlier})")


def _score(text: str, n: int) -> float:
    try:
        value = float(text) if text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise FormatError(n, f"score {shown(text)} is not a finite number")
    return value


def is_json(text: str) -> bool:
    return text.lstrip().startswith("{")


def _json(text: str) -> dict[str, Any]:
    with json_errors():
        return cast("dict[str, Any]", loads(text))  # a document that starts with "{"


@contextmanager
def json_errors() -> Iterator[None]:
    """Strict JSON's errors as a `FormatError`: a syntax error with its line."""
    try:
        yield
    except json.JSONDecodeError as exc:
        raise FormatError(exc.lineno, f"not JSON: {exc.msg}") from None
    except FormatError:
        raise
    except ValueError as exc:  # a repeated key, a non-finite number
        raise FormatError(None, str(exc)) from None


def _lines(text: str, width: int, layout: str) -> Iterator[tuple[int, list[str]]]:
    return _rows(text.splitlines(), width, layout)


def _rows(lines: Iterable[str], width: int, layout: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line, which must have `width` fields."""
    found = False
    for n, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != width:
            raise FormatError(n, f"expected {width} fields ({layout}), got {len(fields)}")
        found = True
        yield n, fields
    if not found:
        raise FormatError(None, "empty: no qrels or run lines")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
