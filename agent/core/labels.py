"""Bounded label values: a fixed list, or the first N distinct values seen.

The core keeps at most `max_label_values` distinct values per dimension and
folds the rest into `other`; the published snapshot (agent/core/snapshot.py) then
shows the top N of those by volume, which the collectors render. Memory and
series counts stay bounded whatever the traffic sends.
"""

from __future__ import annotations

from collections.abc import Sequence

OTHER = "other"


class LabelSet(dict[str, str]):
    """The admitted values of one label dimension, each mapped to itself.

    A call returns the set's own copy of a value, not the caller's: every key
    that carries it then holds one string object, whose hash is computed once
    and which dictionaries compare by identity. A call is a dict lookup, so a
    known value never runs Python code; only a new one reaches `__missing__`.
    """

    __slots__ = ("fixed", "limit")

    def __init__(self, limit: int, fixed: tuple[str, ...] | None = None, seen: Sequence[str] = ()):
        super().__init__((value, value) for value in (fixed or seen))
        self.fixed = bool(fixed)  # a fixed list learns nothing
        self.limit = limit

    __call__ = dict.__getitem__

    def __missing__(self, value: str) -> str:
        if self.fixed or len(self) >= self.limit:
            return OTHER
        self[value] = value
        return value

    @property
    def seen(self) -> list[str]:
        """The values learned from traffic (none for a fixed list)."""
        return [] if self.fixed else list(self)

    def to_list(self) -> list[str]:
        return sorted(self.seen)
