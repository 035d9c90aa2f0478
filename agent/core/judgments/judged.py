"""Labels joined back to the batch's key: each judged item in rank order.

Judges graded blinded chunks; the key says which event, rank, score and
sampling weight each blinded id stands for. Every figure of the report and
the score calibration start from this join, so it is done here once.

A chunk graded by two judges (the double-judged share) takes the mean of
their grades; agreement is measured on the separate grades.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.core.judgments.labels import Label


@dataclass(frozen=True, kw_only=True)
class JudgedChunk:
    chunk: str  # blinded id
    chunk_id: str
    parent_id: str
    source: str
    rank: int
    score: float
    grades: Mapping[str, int]  # judge -> grade; empty when no judge graded it
    tags: frozenset[str]  # every tag any judge ticked
    evidence_groups: frozenset[str]  # every group any judge put it in
    age_days: float | None = None  # content age at event time; None when unknown
    cited: bool | None = None  # cited by the answer; None when the event reports no citations

    @property
    def grade(self) -> float | None:
        """The mean of the judges' grades; None when nobody graded the chunk."""
        return sum(self.grades.values()) / len(self.grades) if self.grades else None


@dataclass(frozen=True)
class JudgedItem:
    key: Mapping[str, Any]  # the item's row of key.jsonl: event, stratum, weight, cutoff_k, slices ...
    chunks: tuple[JudgedChunk, ...]  # the admitted chunks in rank order

    @property
    def complete(self) -> bool:
        """Every chunk has at least one grade."""
        return all(c.grades for c in self.chunks)


@dataclass(frozen=True)
class Judged:
    """One batch as the report needs it: its manifest, its key rows and the latest version of every label."""

    manifest: Mapping[str, Any]
    key: Sequence[Mapping[str, Any]]
    labels: list[Label]


def judged(key: Iterable[Mapping[str, Any]], labels: Iterable[Label]) -> list[JudgedItem]:
    """The items of `key` that carry at least one label, with their labels.
    Labels of items or chunks the key does not know are an error: they belong
    to another batch or were edited."""
    by_chunk: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for label in labels:
        by_chunk[(label.item, label.chunk)].append(label)
    items: list[JudgedItem] = []
    known: set[tuple[str, str]] = set()
    for row in key:
        if row.get("item") is None:
            continue
        chunks = []
        for c in sorted(row["chunks"], key=lambda c: c["rank"]):
            pair = (row["item"], c["chunk"])
            known.add(pair)
            found = by_chunk.get(pair, ())
            chunks.append(JudgedChunk(
                chunk=c["chunk"], chunk_id=c["chunk_id"], parent_id=c["parent_id"], source=c["source"],
                rank=c["rank"], score=c["score"],
                grades={label.judge: label.grade for label in found},
                tags=frozenset(t for label in found for t in label.tags),
                evidence_groups=frozenset(label.evidence_group for label in found if label.evidence_group),
                age_days=c.get("age_days"), cited=c.get("cited"),
            ))
        if any(c.grades for c in chunks):
            items.append(JudgedItem(row, tuple(chunks)))
    unknown = sorted(set(by_chunk) - known)
    if unknown:
        item, chunk = unknown[0]
        raise ValueError(f"{len(unknown)} label(s) for chunks the batch's key does not hold, e.g. item {item} chunk {chunk}")
    return items
