"""Bounded label values: a fixed list, or the first N distinct values seen.

The core keeps at most `max_label_values` distinct values per dimension and
folds the rest into `other`; the exporter then shows the top N of those by
volume. Memory and series counts stay bounded whatever the traffic sends.
"""

from __future__ import annotations

OTHER = "other"


class LabelSet:
    """The admitted values of one label dimension."""

    __slots__ = ("fixed", "limit", "seen")

    def __init__(self, limit: int, fixed: tuple[str, ...] | None = None, seen: list[str] = ()):
        self.fixed = frozenset(fixed) if fixed else None
        self.limit = limit
        self.seen: set[str] = set(seen)

    def __call__(self, value: str) -> str:
        if self.fixed is not None:
            return value if value in self.fixed else OTHER
        if value in self.seen:
            return value
        if len(self.seen) < self.limit:
            self.seen.add(value)
            return value
        return OTHER

    def to_list(self) -> list[str]:
        return sorted(self.seen)
