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
from collections.abc import Iterator
from typing import Any, cast

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
    if _is_json(text):
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


def parse_run(text: str, reject_duplicates: bool) -> dict[str, list[str]]:
    text = text.removeprefix("\ufeff")
    if _is_json(text):
        data = _json(text)
        for query, ranked in data.items():
            if not isinstance(ranked, list) or not all(isinstance(doc, str) for doc in ranked):
                raise FormatError(None, f"query {shown(query)}: a run maps each query to a list of doc ids")
            if reject_duplicates:
                repeated = first_repeat(ranked)
                if repeated is not None:
                    raise FormatError(None, f"query {shown(query)}: duplicate doc id {shown(repeated)}")
        return data
    scored: dict[str, list[tuple[float, str]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for n, fields in _lines(text, 6, "qid Q0 docno rank score tag"):
        query, _, doc, _, score, _ = fields
        try:
            value = float(score) if score.isascii() else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise FormatError(n, f"score {shown(score)} is not a finite number")
        if reject_duplicates and (query, doc) in seen:
            raise FormatError(n, f"duplicate doc id {shown(doc)} for query {shown(query)} "
                                 f"(first on line {seen[query, doc]})")
        seen.setdefault((query, doc), n)
        scored.setdefault(query, []).append((value, doc))
    return {query: [doc for _, doc in sorted(docs, reverse=True)] for query, docs in scored.items()}


def _is_json(text: str) -> bool:
    return text.lstrip().startswith("{")


def _json(text: str) -> dict[str, Any]:
    try:
        return cast("dict[str, Any]", loads(text))  # a document that starts with "{"
    except json.JSONDecodeError as exc:
        raise FormatError(exc.lineno, f"not JSON: {exc.msg}") from None
    except ValueError as exc:  # a repeated key, a non-finite number
        raise FormatError(None, str(exc)) from None


def _lines(text: str, width: int, layout: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line, which must have `width` fields."""
    found = False
    for n, line in enumerate(text.splitlines(), 1):
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
