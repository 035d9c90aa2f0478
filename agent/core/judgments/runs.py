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
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import overload

from agent.core.judgments.formats import FormatError, Packed, Ranking, is_json, json_errors, ranked, trec_run
from agent.core.judgments.untrusted import first_repeat, shown, value, walk

FORMAT = "ragdrift.run.v1"
_CHUNK = 1 << 20  # characters of a JSON run's lines joined at a time
_TOP = {"format", "config", "corpus", "queries"}
_QUERY = {"results", "principal_groups", "latency_ms"}
_RESULT = {"doc", "authorized", "acl", "stale"}
_FACT = (None, False, True)  # a fact's code: unauthorized's code + 3 * stale's


@dataclass(frozen=True)
class Served:
    """One result and its facts (None: the run does not say)."""

    doc: str
    unauthorized: bool | None = None
    stale: bool | None = None


class Facts(Packed[Served]):
    """A query's results and their facts, held as its ranking and a byte each, not an object each."""

    __slots__ = ("_docs", "_codes")

    def __init__(self, docs: Ranking, codes: bytes) -> None:
        self._docs, self._codes = docs, codes

    def __len__(self) -> int:
        return len(self._codes)

    def __iter__(self) -> Iterator[Served]:
        return map(_served_as, self._docs, self._codes)

    @overload
    def __getitem__(self, index: int) -> Served: ...
    @overload
    def __getitem__(self, index: slice) -> list[Served]: ...
    def __getitem__(self, index: int | slice) -> Served | list[Served]:
        if isinstance(index, slice):
            return list(map(_served_as, list(self._docs)[index], self._codes[index]))
        return _served_as(self._docs[index], self._codes[index])


def _served_as(doc: str, code: int) -> Served:
    return Served(doc, _FACT[code % 3], _FACT[code // 3])


@dataclass(frozen=True, kw_only=True)
class Run:
    ranking: Mapping[str, Sequence[str]]
    # per query, in rank order; empty for a plain run. A query not judged (`read_run`) is here only when
    # one of its results states a fact, and keeps only the ids of its unauthorized or stale results (the others "")
    served: Mapping[str, Sequence[Served]] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    config: str | None = None
    corpus: str | None = None
    unjudged: frozenset[str] = frozenset()  # queries read past, not in the qrels (`read_run`)


def read_run(lines: Iterable[str], reject_duplicates: bool, judged: Container[str]) -> Run:
    """A run from its lines as a text file yields them, ends kept; only the queries in
    `judged` are kept (the others by name, and what the hard gates read of them). A TREC
    run is read as the lines come: its memory is about the judged lines' length. A JSON
    run is held as its text, each query read on its own (`json_run`)."""
    lines = iter(lines)
    head: list[str] = []
    for line in lines:
        head.append(line if head else line.removeprefix("\ufeff"))  # a byte order mark is not part of the text
        if line.strip():
            break
    if is_json("".join(head)):
        return json_run(_text(head, lines), reject_duplicates, judged)
    ranking, unjudged = trec_run((part for line in chain(head, lines) for part in line.splitlines()),
                                 reject_duplicates, judged)
    return Run(ranking=ranking, unjudged=unjudged)


def _text(head: list[str], lines: Iterator[str]) -> str:
    """The lines after `head` joined to it, which is emptied (a first line may be the whole
    run). Joined a megabyte at a time: one `"".join` of them all would first hold every line
    as an object of its own."""
    chunks: list[str] = []
    pending = head[:]
    head.clear()
    size = sum(map(len, pending))
    for line in lines:
        pending.append(line)
        size += len(line)
        if size >= _CHUNK:
            chunks.append("".join(pending))
            pending.clear()
            size = 0
    chunks.append("".join(pending))
    pending.clear()
    return chunks[0] if len(chunks) == 1 else "".join(chunks)


def parse_any_run(text: str, reject_duplicates: bool) -> Run:
    """A run in the facts format, or a plain JSON or TREC run (without facts), every query kept."""
    text = text.removeprefix("\ufeff")
    if is_json(text):
        return json_run(text, reject_duplicates, None)
    return Run(ranking=trec_run(text.splitlines(), reject_duplicates)[0])


def json_run(text: str, reject_duplicates: bool, judged: Container[str] | None) -> Run:
    """A JSON run, with facts or plain, read one member at a time (`_Reader`); only the queries
    in `judged` (all when None) kept. Results and errors are those of reading it whole."""
    reader = _Reader(text, reject_duplicates, judged)
    with json_errors():
        walk(text, reader.member)
        return reader.run()


@dataclass
class _Kept:
    """What a reading keeps: the judged queries' rankings (and facts), the others' names, its first problem."""

    ranking: dict[str, Sequence[str]] = field(default_factory=dict)
    served: dict[str, Facts] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    unjudged: set[str] = field(default_factory=set)
    error: FormatError | None = None


class _Reader:
    """A JSON run's text walked member by member: each query's value is parsed on its own and
    kept at once in its compact form, so memory holds the text and the judged queries' ids,
    not an object per result. Plain or with facts is known once `format` is read: a `queries`
    object read before it is walked again then. Each reading keeps its first problem without
    raising it, so that a JSON error anywhere in the text comes first, as reading it whole
    raises it, and the problems of one reading come in the order they always came."""

    def __init__(self, text: str, reject_duplicates: bool, judged: Container[str] | None) -> None:
        self.text, self.reject_duplicates, self.judged = text, reject_duplicates, judged
        self.top: dict[str, object] = {}  # format, config and corpus
        self.stray: str | None = None  # the least (sorted) of the top-level keys a facts run does not know
        self.queries: int | None = None  # where the queries object starts
        self.walked = False  # its queries read as a facts run's
        self.plain, self.facts = _Kept(), _Kept()

    def member(self, key: str, at: int) -> int:
        if key not in _TOP:
            self.stray = key if self.stray is None else min(self.stray, key)
        if key == "queries" and self.text.startswith("{", at):
            self.queries = at
            self._plain(key, {})  # not a list: a plain run's problem
            self.walked = isinstance(self.top.get("format"), str)
            return walk(self.text, self.query if self.walked else self.skip, at)
        found, end = value(self.text, at)
        if key in _TOP:
            self.top[key] = found
        self._plain(key, found)
        return end

    def _plain(self, query: str, found: object) -> None:
        kept = self.plain
        if kept.error is None:
            try:
                ranking = ranked(query, found, self.reject_duplicates)
            except FormatError as exc:
                kept.error = exc
                return
            if self.judged is None or query in self.judged:
                kept.ranking[query] = ranking
            else:
                kept.unjudged.add(query)

    def query(self, query: str, at: int) -> int:
        entry, end = value(self.text, at)
        kept = self.facts
        if kept.error is None:
            try:
                docs, codes, latency = _entry(query, entry, self.reject_duplicates)
            except FormatError as exc:
                kept.error = exc
                return end
            if self.judged is None or query in self.judged:
                ranking = kept.ranking[query] = Ranking(docs)
                kept.served[query] = Facts(ranking, codes)
                if latency is not None:
                    kept.latency[query] = latency
            else:
                kept.unjudged.add(query)
                if any(codes):  # what the hard gates read: the facts, the ids of the results flagged
                    flagged = [doc if 2 in (code % 3, code // 3) else "" for doc, code in zip(docs, codes)]
                    kept.served[query] = Facts(Ranking(flagged), codes)
        return end

    def skip(self, _: str, at: int) -> int:
        return value(self.text, at)[1]

    def run(self) -> Run:
        form = self.top.get("format")
        if not isinstance(form, str):
            if self.plain.error is not None:
                raise self.plain.error
            return Run(ranking=self.plain.ranking, unjudged=frozenset(self.plain.unjudged))
        if form != FORMAT:
            raise FormatError(None, f"format {shown(form)} is not {FORMAT!r}")
        _keys(() if self.stray is None else (self.stray,), _TOP, "the run")
        for name in ("config", "corpus"):
            if name in self.top and not isinstance(self.top[name], str):
                raise FormatError(None, f"{name} must be a text, got {shown(self.top[name])}")
        if self.queries is None:
            raise FormatError(None, "queries must map each query to {results: [...]}")
        if not self.walked:
            walk(self.text, self.query, self.queries)
        kept = self.facts
        if kept.error is not None:
            raise kept.error
        config, corpus = self.top.get("config"), self.top.get("corpus")
        return Run(ranking=kept.ranking, served=kept.served, latency_ms=kept.latency, config=config if isinstance(config, str) else None,
                   corpus=corpus if isinstance(corpus, str) else None, unjudged=frozenset(kept.unjudged))


def _entry(query: str, entry: object, reject_duplicates: bool) -> tuple[list[str], bytes, float | None]:
    """A facts run's query: its doc ids in rank order, their facts' codes and its latency."""
    where = f"query {shown(query)}"
    if not isinstance(entry, dict):
        raise FormatError(None, f"{where}: expected {{results: [...]}}, got {shown(entry)}")
    _keys(entry, _QUERY, where)
    results, groups = entry.get("results"), entry.get("principal_groups", [])
    if not isinstance(results, list):
        raise FormatError(None, f"{where}: results must be a list")
    if not _texts(groups):
        raise FormatError(None, f"{where}: principal_groups must be a list of texts")
    latency = None
    if "latency_ms" in entry:
        latency = entry["latency_ms"]
        if not _number(latency) or latency < 0:
            raise FormatError(None, f"{where}: latency_ms must be a number >= 0, got {shown(latency)}")
        latency = float(latency)
    served = [_served(result, set(groups), f"{where}, result {n}") for n, result in enumerate(results, 1)]
    docs = [doc for doc, _ in served]
    repeated = first_repeat(docs) if reject_duplicates else None
    if repeated is not None:
        raise FormatError(None, f"{where}: duplicate doc id {shown(repeated)}")
    return docs, bytes(code for _, code in served), latency


def _served(result: object, groups: set[str], where: str) -> tuple[str, int]:
    """A result's doc id and the code of its facts."""
    if isinstance(result, str):
        return result, 0
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
    return doc, _FACT.index(unauthorized) + 3 * _FACT.index(result.get("stale"))


def _keys(keys: Iterable[str], known: set[str], where: str) -> None:
    unknown = min(set(keys) - known, default=None)
    if unknown is not None:
        raise FormatError(None, f"{where}: unknown key {shown(unknown)}; expected {', '.join(sorted(known))}")


def _texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
