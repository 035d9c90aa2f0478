"""Tallies: the one additive data shape every metric family writes into.

A tally maps a key `(name, *label_values)` to a number. Tallies add, so
minute buckets sum into windows, partitions into a replica, and replicas in
PromQL. Histograms are three keys per label set: `<name>_bucket` with an `le`
label (not cumulative), `<name>_sum` and `<name>_count`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

Key = tuple[str, ...]
Tally = dict[Key, float]


# Families are compared and hashed by identity (eq=False): each is declared
# once, and a family is a dict key on the hot path (agent/core/view.py, Keys).
@dataclass(frozen=True, eq=False)
class Counter:
    name: str
    labels: tuple[str, ...]
    help: str
    _: KW_ONLY
    windowed: bool = True  # False: bookkeeping that never lands in a window

    def key(self, *labels: str) -> Key:
        """The key of one value of each of its labels, in order."""
        return (self.name, *labels)


@dataclass(frozen=True, eq=False)
class Histogram:
    name: str
    labels: tuple[str, ...]
    help: str
    _: KW_ONLY
    buckets: str  # which configured bucket set (see CoreConfig.buckets)
    if TYPE_CHECKING:  # set by __post_init__
        bucket_key: str = field(init=False)
        count_key: str = field(init=False)
        sum_key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bucket_key", self.name + "_bucket")
        object.__setattr__(self, "count_key", self.name + "_count")
        object.__setattr__(self, "sum_key", self.name + "_sum")

    def keys(self, labels: tuple[str, ...], buckets: Buckets) -> HistogramKeys:
        """Every key of one value of each of its labels, built once."""
        return HistogramKeys(buckets.bounds, tuple((self.bucket_key, *labels, le) for le in buckets.labels),
                             (self.count_key, *labels), sum=(self.sum_key, *labels))


@dataclass(frozen=True, slots=True)
class HistogramKeys:
    """One histogram's keys for one label value: counting an observation
    builds no key, and a tally finds each key by identity."""

    bounds: tuple[float, ...]
    buckets: tuple[Key, ...]  # the bucket key of each bound, then of +Inf
    count: Key
    _: KW_ONLY
    sum: Key

    def record(self, tally: Tally, value: float) -> None:
        """Count one observation into a tally (plain dict arithmetic, not prometheus-client)."""
        key = self.buckets[bisect_left(self.bounds, value)]
        tally[key] = tally.get(key, 0) + 1
        key = self.count
        tally[key] = tally.get(key, 0) + 1
        key = self.sum
        tally[key] = tally.get(key, 0) + value

    def record_all(self, tally: Tally, values: list[float]) -> None:
        """Count several observations at once: the count and the sum once.
        (Gathering the bucket counts in a dict first, to update each bucket
        once, cost twice as much as updating it per value.)"""
        if not values:
            return
        buckets, bounds = self.buckets, self.bounds
        for value in values:
            key = buckets[bisect_left(bounds, value)]
            tally[key] = tally.get(key, 0) + 1
        key = self.count
        tally[key] = tally.get(key, 0) + len(values)
        key = self.sum
        tally[key] = tally.get(key, 0) + sum(values)


Family = Counter | Histogram


def add(into: Tally, other: Mapping[Key, float]) -> Tally:
    """Add `other` into `into` in place and return it."""
    for key, value in other.items():
        into[key] = into.get(key, 0) + value
    return into


def total(tallies: Iterable[Mapping[Key, float]]) -> Tally:
    """Sum tallies in the order given (order fixes float rounding)."""
    out: Tally = {}
    for tally in tallies:
        add(out, tally)
    return out


@dataclass(frozen=True)
class Buckets:
    """Histogram upper bounds with their `le` label strings precomputed."""

    bounds: tuple[float, ...]
    if TYPE_CHECKING:  # set by __post_init__
        labels: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if list(self.bounds) != sorted(set(self.bounds)):
            raise ValueError(f"bucket bounds must be strictly increasing: {self.bounds}")
        labels = (*(_le(b) for b in self.bounds), "+Inf")
        object.__setattr__(self, "labels", labels)


def _le(bound: float) -> str:
    return repr(float(bound))


def inc(tally: Tally, key: Key, value: float = 1) -> None:
    tally[key] = tally.get(key, 0) + value


def to_items(tally: Mapping[Key, float]) -> list[list[Any]]:
    """JSON-friendly form: `[[key...], value]` pairs in sorted key order."""
    return [[list(k), v] for k, v in sorted(tally.items())]


def from_items(items: Iterable[Sequence[Any]]) -> Tally:
    return {tuple(k): v for k, v in items}
