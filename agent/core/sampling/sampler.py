"""The streaming side of priority sampling: per ISO week and stratum, the K + 1
largest priorities, in bounded memory, checkpointed as plain data.

The kept set of a (week, stratum) depends only on the set of candidates
offered, never on their order (ties go to the larger event id; an event
offered twice keeps its larger key). K + 1, not K, are kept so that the batch
can take tau, and so that replicas merge (`candidate.select`).

Memory is bounded three ways:
- strata: at most `max_strata` risk strata per week; a further new stratum
  folds into `other` (the candidate's stratum is rewritten). Which strata fold
  then depends on arrival order, so strata can differ between replicas, but
  each event still lands in exactly one stratum per replica, so every merged
  stratum remains a priority sample of the events offered to it: totals stay
  unbiased. Folding, rather than refusing, loses no traffic.
- weeks: `advance(current_week)` (the caller reads its clock, the core does
  not) keeps weeks from `keep_weeks - 1` weeks before the current one to the
  next one, drops the rest and refuses offers outside that range. Before the
  first `advance`, or whatever the timestamps, at most `keep_weeks + 1` weeks
  are held; offers for a further week are refused. `refused` counts refusals.
- candidates: K + 1 per (week, stratum); a candidate holds at most the
  event's admitted results (<= 1000 by the schema).

`take_changes` lets the agent keep a store of candidate rows up to date: the
net rows to upsert and delete since the last call. Dropping a week (`advance`)
deletes nothing: those rows are the week's sample and stay for the batch.
Rows of several samplers (partitions, replicas) sharing a store must be kept
apart by owner, else one sampler's delete removes a row another still holds;
the batch's `select` drops duplicate event ids.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agent.core.sampling.candidate import (
    OTHER,
    UNIFORM,
    Candidate,
    Selection,
    budget_for,
    check,
    select,
)
from agent.core.sampling.priority import shift_week

SAMPLER_VERSION = 1
RowKey = tuple[str, str, str]  # (week, stratum, event_id): one candidate row
NEW, RAISED = "new", "raised"  # a reservoir's change: an event added, or a kept one's priority raised


@dataclass(frozen=True, kw_only=True)
class Budgets:
    """How many events per week each stratum samples, and the memory bounds."""

    k: int = 20  # per risk stratum (app x query type [x pipeline version]) and week
    uniform_k: int = 50  # the uniform stratum, per week
    k_by_stratum: dict[str, int] = field(default_factory=dict)  # overrides of k, by stratum key (`budget_for`)
    max_strata: int = 200  # risk strata per week before folding into `other`
    keep_weeks: int = 2  # the current week and the one before (late events)

    def __post_init__(self) -> None:
        ks = [self.k, self.uniform_k, *self.k_by_stratum.values()]
        if any(not isinstance(k, int) or k < 0 for k in ks):
            raise ValueError("sample sizes must be integers >= 0")
        if self.max_strata < 0 or self.keep_weeks < 1:
            raise ValueError("max_strata must be >= 0 and keep_weeks >= 1")

    def k_for(self, stratum: str) -> int:
        return self.uniform_k if stratum == UNIFORM else budget_for(self.k_by_stratum, stratum, self.k)


class Changes(msgspec.Struct, frozen=True, gc=False):
    added: tuple[Candidate, ...]  # rows to upsert (new, or a kept event whose priority rose)
    evicted: tuple[RowKey, ...]  # rows to delete: (week, stratum, event_id)


class _Reservoir:
    """The K + 1 largest keys of one (week, stratum): a min-heap and the candidates by event id."""

    __slots__ = ("capacity", "heap", "items")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.heap: list[tuple[float, str]] = []
        self.items: dict[str, Candidate] = {}

    def offer(self, c: Candidate) -> tuple[bool, str | None, str | None]:
        """(kept, NEW / RAISED / None when nothing changed, evicted event id)."""
        key, heap = c.key, self.heap
        old = self.items.get(c.event_id)
        if old is not None:  # offered again: the larger key stays
            if key <= old.key:
                return True, None, None
            self.items[c.event_id] = c
            heap.remove(old.key)
            heap.append(key)
            heapq.heapify(heap)
            return True, RAISED, None
        if len(heap) < self.capacity:
            heapq.heappush(heap, key)
            self.items[c.event_id] = c
            return True, NEW, None
        if not heap or key <= heap[0]:
            return False, None, None
        _, out = heapq.heapreplace(heap, key)
        del self.items[out]
        self.items[c.event_id] = c
        return True, NEW, out


class Sampler:
    __slots__ = ("_changes", "_range", "_weeks", "budgets", "refused")

    def __init__(self, budgets: Budgets = Budgets()):
        self.budgets = budgets
        self.refused: dict[str, int] = {}  # candidates (not events) refused, by reason: late, early, weeks_full
        self._weeks: dict[str, dict[str, _Reservoir]] = {}
        self._range: tuple[str, str] | None = None  # weeks accepted, set by `advance`
        # Row key -> (held when the changes were last taken, candidate now or None).
        self._changes: dict[RowKey, tuple[bool, Candidate | None]] = {}

    def offer(self, candidate: Candidate) -> bool:
        """Offer one candidate; True when it is among the kept ones afterwards."""
        check(candidate)
        week = candidate.week
        if self._range is not None and not self._range[0] <= week <= self._range[1]:
            return self._refuse("late" if week < self._range[0] else "early")
        strata = self._weeks.get(week)
        if strata is None:
            if len(self._weeks) > self.budgets.keep_weeks:
                return self._refuse("weeks_full")
            strata = self._weeks[week] = {}
        stratum = candidate.stratum
        reservoir = strata.get(stratum)
        if reservoir is None and stratum not in (UNIFORM, OTHER) and self._full(strata):
            stratum = OTHER
            candidate = msgspec.structs.replace(candidate, stratum=OTHER)
            reservoir = strata.get(OTHER)
        if reservoir is None:
            reservoir = strata[stratum] = _Reservoir(self.budgets.k_for(stratum) + 1)
        kept, change, out = reservoir.offer(candidate)
        if out is not None:
            self._record((week, stratum, out), None, held=True)
        if change is not None:
            self._record((week, stratum, candidate.event_id), candidate, held=change == RAISED)
        return kept

    def may_keep(self, week: str, stratum: str, key: tuple[float, str]) -> bool:
        """False only when `offer` would surely refuse a candidate with this
        key: its reservoir is full of larger keys. Lets the caller skip
        building the candidate, which most events never need."""
        strata = self._weeks.get(week)
        reservoir = None if strata is None else strata.get(stratum)
        if reservoir is None:
            return True
        heap = reservoir.heap
        return len(heap) < reservoir.capacity or key > heap[0] or key[1] in reservoir.items

    def _full(self, strata: dict[str, _Reservoir]) -> bool:
        """Whether a week holds `max_strata` risk strata (other and uniform aside)."""
        return len(strata) - (UNIFORM in strata) - (OTHER in strata) >= self.budgets.max_strata

    def _refuse(self, reason: str) -> bool:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        return False

    def _record(self, row: RowKey, now: Candidate | None, held: bool) -> None:
        """`held`: whether the row was held just before this change; what counts
        is whether it was when the changes were last taken."""
        previous = self._changes.get(row)
        self._changes[row] = (previous[0] if previous is not None else held, now)

    def take_changes(self) -> Changes:
        """Rows to upsert and delete since the last call, net (a row added and
        evicted in between appears in neither), in (week, stratum, event_id) order."""
        added, evicted = [], []
        for row in sorted(self._changes):
            held, now = self._changes[row]
            if now is not None:
                added.append(now)
            elif held:
                evicted.append(row)
        self._changes = {}
        return Changes(tuple(added), tuple(evicted))

    def advance(self, current_week: str) -> tuple[str, ...]:
        """Hold weeks from `keep_weeks - 1` before `current_week` to the one after;
        drop the others (their rows stay in the store) and return them."""
        low = shift_week(current_week, 1 - self.budgets.keep_weeks)
        high = shift_week(current_week, 1)
        self._range = (low, high)
        dropped = tuple(sorted(w for w in self._weeks if not low <= w <= high))
        for week in dropped:
            del self._weeks[week]
        return dropped

    def weeks(self) -> tuple[str, ...]:
        return tuple(sorted(self._weeks))

    def strata(self, week: str) -> tuple[str, ...]:
        return tuple(sorted(self._weeks.get(week, {})))

    def kept(self, week: str, stratum: str) -> tuple[Candidate, ...]:
        """The kept candidates (K + 1 at most), largest priority first."""
        reservoir = self._weeks.get(week, {}).get(stratum)
        if reservoir is None:
            return ()
        return tuple(sorted(reservoir.items.values(), key=lambda c: c.key, reverse=True))

    def selection(self, week: str, stratum: str) -> Selection:
        """This replica's own sample of one stratum and week (the batch selects over all replicas)."""
        return select(self.kept(week, stratum), self.budgets.k_for(stratum))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data, pending changes included."""
        return {
            "version": SAMPLER_VERSION,
            "range": None if self._range is None else list(self._range),
            "refused": dict(self.refused),
            "weeks": {
                week: {stratum: [msgspec.to_builtins(c) for c in self.kept(week, stratum)] for stratum in strata}
                for week, strata in self._weeks.items()
            },
            "changes": [
                [*row, held, None if now is None else msgspec.to_builtins(now)]
                for row, (held, now) in self._changes.items()
            ],
        }

    @classmethod
    def from_dict(cls, budgets: Budgets, data: dict[str, Any]) -> Sampler:
        """Restore a checkpoint. Under smaller budgets the surplus is evicted
        (and reported by `take_changes`); raises ValueError if damaged."""
        if not isinstance(data, dict) or data.get("version") != SAMPLER_VERSION:
            version = data.get("version") if isinstance(data, dict) else None
            raise ValueError(f"unsupported sampler state version {version!r}")
        sampler = cls(budgets)
        try:
            if data["range"] is not None:
                low, high = data["range"]
                sampler._range = (str(low), str(high))
            sampler.refused = {str(k): int(v) for k, v in data["refused"].items()}
            for *row, held, now in data["changes"]:
                candidate = None if now is None else msgspec.convert(now, Candidate)
                sampler._changes[(row[0], row[1], row[2])] = (bool(held), candidate)
            for week, strata in data["weeks"].items():
                sampler._weeks[week] = {}
                for stratum, rows in strata.items():
                    reservoir = sampler._weeks[week][stratum] = _Reservoir(budgets.k_for(stratum) + 1)
                    for candidate in (msgspec.convert(row, Candidate) for row in rows):
                        check(candidate)
                        kept, _, out = reservoir.offer(candidate)
                        for gone in (out, None if kept else candidate.event_id):
                            if gone is not None:
                                sampler._record((week, stratum, gone), None, held=True)
        except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
            raise ValueError(f"damaged sampler state: {exc!r}") from None
        return sampler
