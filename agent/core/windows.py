"""Event-time windows: minute buckets, allowed lateness, bounded history.

Each event lands in the bucket of its minute. Buckets older than the longest
window plus the allowed lateness are folded into `retired`, so memory is
bounded and `totals()` still covers every event. Events older than the
watermark minus the lateness are late, and events dated too far ahead of
when they were written are future events: both count in the totals, not in
any window. Buckets are filled in stream order and folded in minute order, so the
sums do not depend on how the stream was cut into batches.

Events are written straight into their bucket. What a round of events added
(the process-wide counters grow by it) is read back by `take_added`, which
compares each tally the round wrote with a copy taken when the round first
wrote it: one copy per touched bucket per round, instead of a second write
of every key of every event.

Summing a day of minute buckets on every snapshot would cost a lot, so hours
whose buckets are all sealed (older than the lateness allows an event to
reach) are summed once and remembered. The memo is derived: it is not
checkpointed, and a restored state rebuilds the same sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.core.config import CoreConfig
from agent.core.families import FUTURE_EVENTS, LATE_EVENTS
from agent.core.tally import Tally, add, from_items, to_items, total


class Windows:
    __slots__ = ("config", "buckets", "retired", "watermark", "head", "_blocks", "_per_block", "_before")

    def __init__(self, config: CoreConfig):
        self.config = config
        self.buckets: dict[int, Tally] = {}
        self.retired: Tally = {}
        self.watermark: float | None = None
        self.head = 0  # the newest bucket index seen
        self._blocks: dict[int, Tally] = {}  # sealed hour -> sum of its buckets
        self._per_block = max(1, 3600 // config.bucket_seconds)
        self._before: dict[int, tuple[Tally, Tally]] = {}  # id -> (tally, its content when the round began)

    def slot(self, ts: float, now: float | None = None) -> tuple[Tally, str | None]:
        """The tally an event at `ts` adds into (its bucket, or `retired`), and
        the bookkeeping counter it raises when it stays out of the windows.

        `now` is the time the event was written, when known (the Kafka record
        timestamp). The watermark never passes it, and an event dated further
        ahead of it than allowed is kept out of the windows: one wrong clock
        must not move the watermark into the future and make later events late.
        """
        watermark = self.watermark
        if watermark is not None and ts < watermark - self.config.lateness_seconds:
            return self._touch(self.retired), LATE_EVENTS.name
        if now is not None and ts > now + self.config.max_future_seconds:
            return self._touch(self.retired), FUTURE_EVENTS.name
        mark = ts if now is None or ts <= now else now
        if watermark is None or mark > watermark:
            self.watermark = mark
            head = int(mark // self.config.bucket_seconds)
            if head > self.head or watermark is None:
                self.head = head
                self._retire()
        index = int(ts // self.config.bucket_seconds)
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = {}
        return self._touch(bucket), None

    def _touch(self, tally: Tally) -> Tally:
        if id(tally) not in self._before:
            self._before[id(tally)] = (tally, dict(tally))
        return tally

    def take_added(self) -> Tally:
        """What events added since the last call. Each value is one subtraction
        of two readings of one sum, so it is never negative where every event
        added a non-negative amount."""
        out: Tally = {}
        for tally, before in self._before.values():
            for key, value in tally.items():
                delta = value - before.get(key, 0)
                if delta:
                    out[key] = out.get(key, 0) + delta
        self._before.clear()
        return out

    def retired_readings(self) -> list[Tally]:
        """The retired sums and, when this round touched them, the reading
        `take_added` compares them with: a change that regroups the sums
        (moves, not adds) is made to both, so the round's additions stay."""
        before = self._before.get(id(self.retired))
        return [self.retired] if before is None else [self.retired, before[1]]

    def _retire(self) -> None:
        oldest = self.head - self.config.horizon_buckets + 1
        retired = self._before.get(id(self.retired))
        for index in sorted(i for i in self.buckets if i < oldest):
            bucket = self.buckets.pop(index)
            add(self.retired, bucket)
            if retired is not None:  # moved, not added: the bucket's own reading counts it
                add(retired[1], bucket)
        for block in [b for b in self._blocks if b * self._per_block < oldest]:
            del self._blocks[block]

    def totals(self) -> Tally:
        """Everything ever ingested."""
        if not self.buckets:
            return dict(self.retired)
        return total([self.retired, *self._parts(min(self.buckets), max(self.buckets))])

    def window(self, seconds: int, now: float) -> Tally:
        """Sum of the buckets in the `seconds` ending at the bucket holding `now`."""
        last = int(now // self.config.bucket_seconds)
        return total(self._parts(last - seconds // self.config.bucket_seconds + 1, last))

    def _parts(self, first: int, last: int) -> list[Tally]:
        """The tallies covering buckets first..last: sealed hours whole, the rest by minute."""
        if not self.buckets:
            return []
        oldest = min(self.buckets)
        first, last = max(first, oldest), min(last, max(self.buckets))
        per = self._per_block
        sealed = self.sealed_before()
        parts: list[Tally] = []
        index = first
        while index <= last:
            block = index // per
            end = index + per - 1
            if index % per == 0 and end <= last and end < sealed:
                parts.append(self._block(block))
                index += per
                continue
            bucket = self.buckets.get(index)
            if bucket:
                parts.append(bucket)
            index += 1
        return parts

    def sealed_before(self) -> int:
        """Buckets below this index can no longer change."""
        if self.watermark is None:
            return 0
        return int((self.watermark - self.config.lateness_seconds) // self.config.bucket_seconds)

    def _block(self, block: int) -> Tally:
        cached = self._blocks.get(block)
        if cached is None:
            start = block * self._per_block
            cached = self._blocks[block] = total(
                self.buckets[i] for i in range(start, start + self._per_block) if i in self.buckets
            )
        return cached

    def oldest(self) -> int:
        """Buckets below this index have been folded into `retired`."""
        return self.head - self.config.horizon_buckets + 1

    def sealed_items(self, first: int) -> list[list[Any]]:
        """Sealed buckets from index `first` on, in the form `to_dict` uses."""
        last = self.sealed_before()
        return [[i, to_items(self.buckets[i])] for i in sorted(self.buckets) if first <= i < last]

    def to_dict(self, sealed_elsewhere: bool = False) -> dict[str, Any]:
        """Plain data; with `sealed_elsewhere`, without the sealed buckets (see `sealed_items`)."""
        cut = self.sealed_before() if sealed_elsewhere else None
        return {
            "watermark": self.watermark,
            "head": self.head,
            "retired": to_items(self.retired),
            "buckets": [[i, to_items(self.buckets[i])] for i in sorted(self.buckets) if cut is None or i >= cut],
        }

    @classmethod
    def from_dict(cls, config: CoreConfig, data: dict[str, Any], sealed: Sequence[Sequence[Any]] = ()) -> Windows:
        """Restore, adding sealed buckets kept apart; any already retired are ignored."""
        windows = cls(config)
        windows.watermark = data["watermark"]
        windows.head = data["head"]
        windows.retired = from_items(data["retired"])
        oldest = windows.oldest()
        items = sorted([*data["buckets"], *(pair for pair in sealed if pair[0] >= oldest)], key=lambda pair: pair[0])
        windows.buckets = {i: from_items(bucket) for i, bucket in items}
        return windows
