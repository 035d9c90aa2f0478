"""What the agent decides about the partitions it owns, with time passed in.

Which to checkpoint, when to pause, what the lag is, and whether a partition's
log is still the one its state describes: plain data in, decisions out, so
each rule is tested without a broker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.core.feature import PartitionFeature, Pending
from agent.core.state import PartitionState

NO_OFFSET = -1  # a partition with no checkpoint, until its start offset is known
LOG_SHORTFALL_SECONDS = 10.0  # a log ending before the checkpoint this long was recreated
PAUSE_AFTER_FAILURES = 3  # failed checkpoints in a row before consumption pauses


@dataclass
class Outbox:
    """What each feature took from a partition's state, held (one holder per
    feature name) until a checkpoint commits it as rows: a failed checkpoint
    keeps it for the next one."""

    held: dict[str, Pending] = field(default_factory=dict)

    def holder(self, feature: PartitionFeature[Any]) -> Pending:
        """The feature's holder (`held[feature.name]`), made empty on first use."""
        held = self.held.get(feature.name)
        if held is None:
            held = self.held[feature.name] = feature.outbox()
        return held

    def take(self, state: PartitionState) -> None:
        """Move what the state's features queued since the last call in here, net of each other."""
        for feature in state.features.values():
            self.holder(feature).absorb(feature.take())

    def clear(self) -> None:
        for held in self.held.values():
            held.clear()


@dataclass(kw_only=True)
class Owned:
    """A partition this replica owns: its state and where it stands in its log."""

    state: PartitionState
    next_offset: int
    checkpointed_offset: int
    stored_before: int  # sealed parts below this index are in the store already
    verified: bool = True  # False until the log is known to reach the stored offset
    short_since: float | None = None  # when the log was first seen ending before the offset
    topic_id: str | None = None  # the log's identity when loaded; a new id means a recreated topic
    outbox: Outbox = field(default_factory=Outbox)

    @classmethod
    def fresh(cls, state: PartitionState, offset: int = NO_OFFSET, topic_id: str | None = None) -> Owned:
        return cls(state=state, next_offset=offset, checkpointed_offset=NO_OFFSET, stored_before=0, topic_id=topic_id)

    @classmethod
    def restored(cls, state: PartitionState, offset: int, topic_id: str | None) -> Owned:
        """Loaded from a checkpoint: its log must be shown to reach the offset."""
        return cls(state=state, next_offset=offset, checkpointed_offset=offset,
                   stored_before=state.sealed_before(), verified=False, topic_id=topic_id)

    @property
    def dirty(self) -> bool:
        """Processed past its checkpoint (a partition whose start is unknown has nothing to save)."""
        return self.next_offset != NO_OFFSET and self.next_offset != self.checkpointed_offset

    def saved(self) -> None:
        """Its checkpoint, and the rows of its outbox, were written at `next_offset`."""
        self.checkpointed_offset = self.next_offset
        self.outbox.clear()
        self.stored_before = self.state.sealed_before()


def recreated(owned: Owned, topic_id: str | None, high: int | None, now: float) -> bool:
    """Whether the partition's log is no longer the one its state describes.

    A topic id other than the one loaded says so at once, whatever the new
    log's length. Without topic ids, a log that ends before the checkpoint was
    recreated; a new partition leader can report a low watermark for a moment,
    so only a shortfall that lasts `LOG_SHORTFALL_SECONDS` counts.
    """
    if owned.topic_id is None:
        owned.topic_id = topic_id
    elif topic_id is not None and topic_id != owned.topic_id:
        return True
    if owned.verified or high is None:
        return False
    if high >= owned.next_offset:
        owned.verified = True
        return False
    if owned.short_since is None:
        owned.short_since = now
    return now - owned.short_since >= LOG_SHORTFALL_SECONDS


def flush_due(owned: Owned) -> bool:
    """Whether a feature holds so much in memory that it calls for a checkpoint now."""
    return any(f.flush_due(owned.outbox.holder(f)) for f in owned.state.features.values())


def paused(failures: int) -> bool:
    """While checkpoints keep failing, consumption stops: the work to redo
    after a crash, and the dead letters held in memory, stay bounded."""
    return failures >= PAUSE_AFTER_FAILURES


def lag(owned: Owned, *log_ends: int | None) -> int | None:
    """Messages waiting: the latest known log end minus the next offset.

    The fetcher's high watermark is fresh while consuming, a probe's log end
    while paused; a log end only grows, so the larger is the latest.
    """
    ends = [end for end in log_ends if end is not None]
    if not ends or owned.next_offset == NO_OFFSET:
        return None
    return max(0, max(ends) - owned.next_offset)
