"""A run with what each result was: the JSON run format that carries access and freshness facts.

`{"format": "ragdrift.run.v1", "config": ..., "corpus": ..., "queries": {query: {...}}}`,
each query `{"results": [...], "principal_groups": [...], "latency_ms": ...}` (only `results`
required), each result a doc id or `{"doc": id, "authorized": bool, "acl": [group],
"stale": bool}` (only `doc` required). A result is unauthorized when `authorized` is
false, or when it has a non-empty `acl` disjoint from the query's `principal_groups` (the
agent's own rule); stale when `stale` is true. Any other text is a plain run
(agent/core/judgments/formats.py), without facts. Hostile input: every problem is
a `FormatError` naming the query, and an unknown key is refused rather than ignored,
so a misspelt `stael` cannot pass a leak or a stale result as clean.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from agent.core.judgments.formats import FormatError, parse_run, trec_run
from agent.core.judgments.untrusted import first_repeat, loads, shown

FORMAT = "ragdrift.run.v1"
_TOP = {"format", "config", "corpus", "queries"}
_QUERY = {"results", "principal_groups", "latency_ms"}
_RESULT = {"doc", "authorized", "acl", "stale"}


@dataclass(frozen=True)
class Served:
    """One result and its facts (None: the run does not say)."""

    doc: str
    unauthorized: bool | None = None
    stale: bool | None = None


@dataclass(frozen=True)
class Run:
    ranking: Mapping[str, Sequence[str]]
    served: dict[str, list[Served]] = field(default_factory=dict)  # per query, in rank order; empty for a plain run
    latency_ms: dict[str, float] = field(default_factory=dict)
    config: str | None = None
    corpus: str | None = None
    unjudged: frozenset[str] = frozenset()  # queries of a TREC run read past, not in the qrels (`read_run`)


def read_run(lines: Iterable[str], reject_duplicates: bool, judged: Container[str]) -> Run:
    """A run from its lines as a text file yields them, ends kept. A TREC run
    is read as the lines come, and only the queries in `judged` are kept
    (the others by name): its memory is about the judged lines' length. A
    JSON run, one document, is read whole (`parse_any_run`)."""
    lines = iter(lines)
    head: list[str] = []
    for line in lines:
        head.append(line if head else line.removeprefix("\ufeff"))  # a byte order mark is not part of the text
        if line.strip():
            break
    if "".join(head).lstrip().startswith("{"):
        return parse_any_run("".join(chain(head, lines)), reject_duplicates)
    ranking, unjudged = trec_run((part for line in chain(head, lines) for part in line.splitlines()),
                                 reject_duplicates, judged)
    return Run(ranking, unjudged=unjudged)


def parse_any_run(text: str, reject_duplicates: bool) -> Run:
    """A run in the facts format, or a plain JSON or TREC run (without facts)."""
    text = text.removeprefix("\ufeff")
    if text.lstrip().startswith("{"):
        try:
            data = loads(text)
        except ValueError:
            data = None  # the plain parser reports it, with the line
        if isinstance(data, dict) and isinstance(data.get("format"), str):
            return _facts_run(data, reject_duplicates)
    return Run(parse_run(text, reject_duplicates))


def _facts_run(data: dict[str, Any], reject_duplicates: bool) -> Run:
    if data["format"] != FORMAT:
        raise FormatError(None, f"format {shown(data['format'])} is not {FORMAT!r}")
    _keys(data, _TOP, "the run")
    for name in ("config", "corpus"):
        if name in data and not isinstance(data[name], str):
            raise FormatError(None, f"{name} must be a text, got {shown(data[name])}")
    queries = data.get("queries")
    if not isinstance(queries, dict):
        raise FormatError(None, "queries must map each query to {results: [...]}")
    ranking, served, latency = {}, {}, {}
    for query, entry in queries.items():
        where = f"query {shown(query)}"
        if not isinstance(entry, dict):
            raise FormatError(None, f"{where}: expected {{results: [...]}}, got {shown(entry)}")
        _keys(entry, _QUERY, where)
        results, groups = entry.get("results"), entry.get("principal_groups", [])
        if not isinstance(results, list):
            raise FormatError(None, f"{where}: results must be a list")
        if not _texts(groups):
            raise FormatError(None, f"{where}: principal_groups must be a list of texts")
        if "latency_ms" in entry:
            value = entry["latency_ms"]
            if not _number(value) or value < 0:
                raise FormatError(None, f"{where}: latency_ms must be a number >= 0, got {shown(value)}")
            latency[query] = float(value)
        served[query] = [_served(result, set(groups), f"{where}, result {n}") for n, result in enumerate(results, 1)]
        ranking[query] = [s.doc for s in served[query]]
        repeated = first_repeat(ranking[query]) if reject_duplicates else None
        if repeated is not None:
            raise FormatError(None, f"{where}: duplicate doc id {shown(repeated)}")
    return Run(ranking, served, latency, data.get("config"), data.get("corpus"))


def _served(result: object, groups: set[str], where: str) -> Served:
    if isinstance(result, str):
        return Served(result)
    if not isinstance(result, dict):
        raise FormatError(None, f"{where}: expected a doc id or {{doc: ...}}, got {shown(result)}")
    _keys(result, _RESULT, where)
    doc = result.get("doc")
    if not isinstance(doc, str):
        raise FormatError(None, f"{where}: doc must be a text, got {shown(doc)}")
    for name in ("authorized", "stale"):
        if name in result and not isinstance(result[name], bool):
            raise FormatError(None, f"{where}: {name} must be true or false, got {shown(result[name])}")
    acl = result.get("acl", [])
    if not _texts(acl):
        raise FormatError(None, f"{where}: acl must be a list of texts")
    unauthorized = None
    if "authorized" in result:
        unauthorized = not result["authorized"]
    if acl:
        unauthorized = bool(unauthorized) or groups.isdisjoint(acl)
    return Served(doc, unauthorized, result.get("stale"))


def _keys(data: dict[Any, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise FormatError(None, f"{where}: unknown key {shown(unknown[0])}; expected {', '.join(sorted(known))}")


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
