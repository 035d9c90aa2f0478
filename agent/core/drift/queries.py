"""The query mix from hashed terms: a bounded daily sample, the baseline's vocabulary and query clusters.

Per (UTC day, app) the agent keeps a sample of the day's queries' hashed terms
(docs/event.md: terms arrive hashed, no raw text is ever needed): the
`SAMPLE` events with the smallest `sample_key`, a hash of the event id. A
bottom-k sample merges by union (keep the k smallest keys), so it is the same
however the stream was partitioned, and counting an event twice changes
nothing.

Freezing a baseline fits, from its days' samples (all apps together, in key
order, with a fixed seed, so the same days give the same model):
- the vocabulary: a frozen Bloom filter (`Vocabulary`) of every sampled term;
  from the moment the baseline is active, every partition measures its
  new-term rate against it.
- the clusters: scikit-learn's `HashingVectorizer` over the terms (each hashed
  term one token, l2-normalized rows) and `MiniBatchKMeans`; the centres are
  kept rounded to 6 decimals, and assignments use the rounded centres.

A query's category in the `query_cluster` mix: `new` when at least half of
its terms are outside the vocabulary, `c<i>` its nearest centre otherwise;
queries without terms are not counted. For a baseline day, "outside" means
outside the other days' sampled terms (leave one day out, as the thresholds
are calibrated), so a window's share of `new` queries has a baseline: a burst
of never-seen terms shows up as a jump of `new`.

The sample bounds what the vocabulary holds: a term used less than about
once in `SAMPLE` of a day's events of every app may be missing, which raises
the new-term rate a little (by how much: docs/drift.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from sklearn.cluster import MiniBatchKMeans
from sklearn.feature_extraction.text import HashingVectorizer

from agent.core.vocabulary import EMPTY_DIGEST, Vocabulary

QUERIES = "query_terms"  # the stored row of a day's sample
SAMPLE = 512  # sampled events per day and app
NEW = "new"

Sample = Mapping[str, Sequence[str]]  # sample key -> the event's hashed query terms


def sample_key(event_id: str) -> str:
    digest = EMPTY_DIGEST.copy()
    digest.update(event_id.encode())
    return digest.hexdigest()


def merge_sample(into: dict[str, Any], sample: Sample, k: int = SAMPLE) -> dict[str, Any]:
    """Add a sample to `into` (in place) and keep the k smallest keys."""
    into.update(sample)
    if len(into) > k:
        for key in sorted(into)[k:]:
            del into[key]
    return into


def _terms(doc: Sequence[str]) -> Sequence[str]:
    return doc


class _Known(Protocol):
    """Terms counted as known: a vocabulary, or a set of terms."""

    def __contains__(self, term: str, /) -> bool: ...


@dataclass(frozen=True, eq=False)
class QueryModel:
    """The baseline's vocabulary and cluster centres over hashed terms."""

    n_features: int
    centres: tuple[tuple[float, ...], ...]
    vocabulary: Vocabulary

    def __eq__(self, other: object) -> bool:
        """Equal content; unhashable, as any class that defines `__eq__` alone."""
        return isinstance(other, QueryModel) and self.to_dict() == other.to_dict()

    def _vectors(self, queries: Sequence[Sequence[str]]) -> Any:  # a scipy sparse matrix
        return HashingVectorizer(n_features=self.n_features, analyzer=_terms, alternate_sign=False,
                                 norm="l2").transform(queries)  # fmt: skip

    def assign(self, queries: Sequence[Sequence[str]]) -> np.ndarray:
        """The nearest centre of each query (by squared Euclidean distance)."""
        c = np.asarray(self.centres)
        scores: np.ndarray = np.asarray(self._vectors(queries) @ c.T)
        nearest: np.ndarray = np.argmin((c * c).sum(axis=1) - 2 * scores, axis=1)
        return nearest

    def categories(self, queries: Iterable[Sequence[str]], known: _Known | None = None) -> dict[str, int]:
        """`query_cluster` counts; a term is known when `in known` (default: the vocabulary)."""
        vocabulary: _Known = self.vocabulary if known is None else known
        out: dict[str, int] = {}
        placed: list[Sequence[str]] = []
        for terms in queries:
            if not terms:
                continue
            if 2 * sum(t not in vocabulary for t in terms) >= len(terms):
                out[NEW] = out.get(NEW, 0) + 1
            else:
                placed.append(terms)
        if placed:
            for i, n in zip(*np.unique(self.assign(placed), return_counts=True)):
                out[f"c{int(i)}"] = int(n)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"n_features": self.n_features, "centres": [list(c) for c in self.centres],
                "vocabulary": self.vocabulary.to_dict()}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryModel:
        return cls(int(data["n_features"]), tuple(tuple(float(x) for x in c) for c in data["centres"]),
                   Vocabulary.from_dict(data["vocabulary"]))  # fmt: skip


def fit(days: Sequence[Sequence[Sample]], clusters: int = 8, seed: int = 0, n_features: int = 1 << 10,
        bits: int = 1 << 20, hashes: int = 7) -> tuple[QueryModel, list[list[dict[str, int]]]] | None:
    """The model from the baseline days' samples (days x apps), and each sample's `query_cluster`
    counts with the other days' terms as the vocabulary; None when no sampled query has terms."""
    queries = [tuple(s[k]) for day in days for s in day for k in sorted(s) if s[k]]
    if not queries:
        return None
    vocabulary = Vocabulary(bits, hashes)
    vocabulary.add_all([t for q in queries for t in q])
    frozen = Vocabulary.from_dict({**vocabulary.to_dict(), "frozen": True})
    model = QueryModel(n_features, (), frozen)
    k = min(clusters, len(set(queries)))
    kmeans = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=3, batch_size=1024).fit(model._vectors(queries))
    centres = tuple(tuple(round(float(x), 6) for x in row) for row in kmeans.cluster_centers_)
    model = QueryModel(n_features, centres, frozen)
    per_day = [{t for s in day for terms in s.values() for t in terms} for day in days]
    counts = []
    for d, day in enumerate(days):
        others = set().union(*(terms for e, terms in enumerate(per_day) if e != d))
        counts.append([model.categories((s[k] for k in sorted(s)), others) for s in day])
    return model, counts
