"""A judge's label: the unit that comes back from a judged batch.

One label is one judge's grade of one blinded chunk of one item of one batch,
with the tags the judge ticked and, for multi-hop queries, the evidence group
the chunk belongs to (chunks of one item that share a group together form a
complete answer). Labels are plain data: importers make them from files or
Label Studio, the store versions them, the report reads them with the batch's
key. They never hold text.
"""

from __future__ import annotations

import msgspec

GRADES = (0, 1, 2, 3)  # 0 irrelevant, 1 marginally relevant, 2 relevant, 3 highly relevant
TAGS = ("stale", "duplicate", "unauthorized", "wrong_locale", "wrong_version", "low_authority")


class Label(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One judge's grade of one chunk of one item."""

    batch_id: str
    item: str  # the blinded item id, "<batch>-0001"
    chunk: str  # the blinded chunk id, "<item>-1"
    judge: str
    grade: int  # one of GRADES
    tags: tuple[str, ...] = ()  # a subset of TAGS, sorted
    evidence_group: str | None = None  # chunks of one item sharing a group form a complete answer

    @property
    def pair(self) -> tuple[str, str, str, str]:
        """What a new version of this label replaces: the same judge on the same chunk."""
        return (self.batch_id, self.item, self.chunk, self.judge)
