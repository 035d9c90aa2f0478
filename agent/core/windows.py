"""Event-time windows: minute buckets, allowed lateness, bounded history.

Each event lands in the bucket of its minute. Buckets older than the longest
window plus the allowed lateness are folded into `retired`, so memory is
bounded and `totals()` still covers every event. Events older than the
watermark minus the lateness are late: they count in the totals, not in any
window. Buckets are filled in stream order and folded in minute order, so the
sums do not depend on how the stream was cut into batches.
"""

from __future__ import annotations

from agent.core.config import CoreConfig
from agent.core.tally import Tally, add, from_items, inc, to_items, total


class Windows:
    __slots__ = ("config", "buckets", "retired", "watermark", "head")

    def __init__(self, config: CoreConfig):
        self.config = config
        self.buckets: dict[int, Tally] = {}
        self.retired: Tally = {}
        self.watermark: float | None = None
        self.head = 0  # the newest bucket index seen

    def slot(self, ts: float) -> Tally:
        """The tally an event at `ts` adds into: its bucket, or `retired` if late."""
        watermark = self.watermark
        if watermark is not None and ts < watermark - self.config.lateness_seconds:
            inc(self.retired, ("late_events",))
            return self.retired
        index = int(ts // self.config.bucket_seconds)
        if watermark is None or ts > watermark:
            self.watermark = ts
            if index > self.head or watermark is None:
                self.head = index
                self._retire()
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = {}
        return bucket

    def _retire(self) -> None:
        oldest = self.head - self.config.horizon_buckets + 1
        for index in sorted(i for i in self.buckets if i < oldest):
            add(self.retired, self.buckets.pop(index))

    def totals(self) -> Tally:
        """Everything ever ingested."""
        return total([self.retired, *(self.buckets[i] for i in sorted(self.buckets))])

    def window(self, seconds: int, now: float) -> Tally:
        """Sum of the buckets in the `seconds` ending at the bucket holding `now`."""
        last = int(now // self.config.bucket_seconds)
        first = last - seconds // self.config.bucket_seconds
        return total(self.buckets[i] for i in sorted(self.buckets) if first < i <= last)

    def to_dict(self) -> dict:
        return {
            "watermark": self.watermark,
            "head": self.head,
            "retired": to_items(self.retired),
            "buckets": [[i, to_items(self.buckets[i])] for i in sorted(self.buckets)],
        }

    @classmethod
    def from_dict(cls, config: CoreConfig, data: dict) -> Windows:
        windows = cls(config)
        windows.watermark = data["watermark"]
        windows.head = data["head"]
        windows.retired = from_items(data["retired"])
        windows.buckets = {i: from_items(items) for i, items in data["buckets"]}
        return windows
