"""A weekly judgment batch: what judges see, and the private key behind it.

Pure: the candidates of one week in, three plain documents out. Judges see
items (a query and the chunks that entered its context) in a shuffled order,
each item's chunks shuffled too, with no score, rank, pipeline, app or
stratum: nothing that tells them which system produced what. Both orders,
and so the item numbers, are keyed with a secret derived from the salt: the
items and this code alone do not tell the order back (an unkeyed shuffle
could be recomputed from the item ids), which is why a batch needs a salt.
The key maps every blinded item and chunk back to its event, rank, score and
sampling weight; it stays with the team, and so does the regression list,
whose chunks are in rank order. The same candidates, configuration and salt
give the same batch, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from agent.core.sampling import Candidate, ResultRef, Selection, budget_for, estimate_total, in_holdout, select

FORMAT = "ragdrift.batch.v1"
_T = TypeVar("_T")


class Unsalted(ValueError):
    """No salt to key the order with: judges could recompute it."""

    def __init__(self) -> None:
        super().__init__("judgment.salt is empty: set it (or RAGDRIFT_JUDGMENT__SALT) to a long random secret,"
                         " the same on every replica, before building a batch; it keys the order judges see")


@dataclass(frozen=True, kw_only=True)
class BatchConfig:
    budgets: Mapping[str, int]  # K per stratum
    default_budget: int  # K of a stratum with no budget of its own
    holdout_share: float = 0.10  # of query ids, sealed away from regression sets
    double_judged_share: float = 0.10  # of items, judged by two people for agreement
    salt: str = ""
    configuration: Mapping[str, object] | None = None  # recorded in the manifest as is
    baseline: str | None = None  # the active baseline's version


@dataclass(frozen=True, kw_only=True)
class Batch:
    batch_id: str
    manifest: dict[str, Any]
    items: list[dict[str, Any]]  # blinded, for judges
    key: list[dict[str, Any]]  # private: blinded ids back to events, ranks, scores and weights
    regression: list[dict[str, Any]]  # judged queries a regression set may use: never a holdout query


def build(week: str, candidates: Iterable[Candidate], config: BatchConfig) -> Batch:
    """The batch of `week` from every replica's candidates of that week."""
    if not config.salt:
        raise Unsalted()
    secret = _order_key(config.salt)
    by_stratum: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        if candidate.week == week:
            by_stratum[candidate.stratum].append(candidate)
    selections: dict[str, Selection] = {
        stratum: select(found, budget_for(config.budgets, stratum, config.default_budget))
        for stratum, found in sorted(by_stratum.items())
    }
    batch_id = f"{week}-{_digest(week, config.salt, *sorted(c.event_id for s in selections.values() for c in s.items))[:8]}"
    chosen = _shuffled([(stratum, c) for stratum, s in selections.items() for c in s.items], secret, batch_id)
    items: list[dict[str, Any]] = []
    key: list[dict[str, Any]] = []
    regression: list[dict[str, Any]] = []
    n = 0
    for stratum, c in chosen:
        # An event with nothing admitted (a zero result) has no chunk to grade:
        # it stays in the key, with its weight, but judges get no item for it.
        item = None
        if c.results:
            n += 1
            item = f"{batch_id}-{n:04d}"
        order = _shuffled(list(range(len(c.results))), secret, item or c.event_id)
        double = item is not None and _share(config.salt, "double", batch_id, item) < config.double_judged_share
        holdout = in_holdout(c.query_id, config.holdout_share, config.salt)
        tau = selections[stratum].tau
        chunks = [(f"{item}-{j}", c.results[i]) for j, i in enumerate(order, 1)]
        if item is not None:
            items.append({
                "item": item,
                "judges": 2 if double else 1,
                "query": {"id": c.query_id, "text": None},
                "chunks": [{"chunk": chunk, "chunk_id": result.chunk_id, "text": None} for chunk, result in chunks],
            })
            if not holdout:
                regression.append({"item": item, "query_id": c.query_id, "chunk_ids": [r.chunk_id for r in c.results]})
        key.append({
            "item": item, "event_id": c.event_id, "ts": c.ts, "week": week, "stratum": stratum,
            "app": c.app, "query_id": c.query_id, "query_type": c.query_type, "language": c.language,
            "pipeline_version": c.pipeline_version, "cutoff_k": c.cutoff_k,
            "w": c.w, "u": c.u, "priority": c.priority, "tau": tau, "weight": max(c.w, tau) / c.w,
            "signals": list(c.signals), "holdout": holdout, "judges": 2 if double else (1 if item else 0),
            "chunks": [_key_chunk(chunk, r) for chunk, r in chunks],
        })
    manifest = {
        "format": FORMAT,
        "batch_id": batch_id,
        "week": week,
        "strata": {
            stratum: {"k": budget_for(config.budgets, stratum, config.default_budget), "tau": s.tau,
                      "events": estimate_total(s, _one), "sampled": len(s.items)}
            for stratum, s in selections.items()
        },
        "counts": {
            "items": len(items),
            "chunks": sum(len(i["chunks"]) for i in items),
            "double_judged": sum(i["judges"] == 2 for i in items),
            "holdout": sum(k["holdout"] for k in key),
            "without_chunks": sum(k["item"] is None for k in key),  # sampled, nothing admitted to judge
        },
        "configuration": dict(config.configuration or {}),
        "configuration_version": _digest(json.dumps(config.configuration or {}, sort_keys=True))[:12],
        "baseline": config.baseline,
    }
    return Batch(batch_id=batch_id, manifest=manifest, items=items, key=key, regression=regression)


def _key_chunk(chunk: str, r: ResultRef) -> dict[str, Any]:
    """A chunk's row of the key; its content age and citation only where the
    event told them (a batch of rows that never held them stays as it was)."""
    row = {"chunk": chunk, "chunk_id": r.chunk_id, "parent_id": r.parent_id, "source": r.source, "rank": r.rank,
           "score": r.score}
    if r.age_days is not None:
        row["age_days"] = r.age_days
    if r.cited is not None:
        row["cited"] = r.cited
    return row


def _one(_: Candidate) -> float:
    """Each event counts once: the sample's estimate of a stratum's events.
    (How many candidate rows the replicas stored depends on how the traffic
    was partitioned; the selection and its tau do not.)"""
    return 1.0


def _order_key(salt: str) -> bytes:
    """The secret the orders are keyed with, derived from the salt (a key of
    its own, so no other hash of the salt tells it)."""
    return hashlib.blake2b(salt.encode(), digest_size=64, person=b"ragdrift.order").digest()


def _shuffled(items: list[_T], key: bytes, seed: str) -> list[_T]:
    """A permutation fixed by the secret key and the seed (the batch or item id)."""
    ranks = [hashlib.blake2b(f"{seed}\x1f{i}".encode(), key=key, digest_size=16).digest() for i in range(len(items))]
    return [items[i] for i in sorted(range(len(items)), key=ranks.__getitem__)]


def _digest(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).hexdigest()


def _share(*parts: str) -> float:
    """A uniform draw in [0, 1) fixed by its parts."""
    return int(_digest(*parts)[:13], 16) / 16**13
