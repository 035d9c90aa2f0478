"""Per-partition state: windows, bounded labels and the vocabulary.

This is what the agent checkpoints with the partition's next offset. Replaying
the same events into a fresh state, in the same order, gives an equal state.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.core.config import LABEL_DIMENSIONS, CoreConfig
from agent.core.decoder import DEFAULT_MAX_BYTES, decode
from agent.core.model import Event
from agent.core.families import OBSERVERS, UNKNOWN_FIELDS
from agent.core.labels import LabelSet
from agent.core.tally import Tally, inc, total
from agent.core.facts import Facts, facts_of
from agent.core.view import View
from agent.core.vocabulary import Vocabulary
from agent.core.windows import Windows

STATE_VERSION = 1


class PartitionState:
    __slots__ = ("config", "labels", "vocabulary", "windows")

    def __init__(self, config: CoreConfig):
        self.config = config
        self.labels = {
            dim: LabelSet(config.max_label_values, config.label_values.get(dim)) for dim in LABEL_DIMENSIONS
        }
        self.vocabulary = Vocabulary(config.vocabulary_bits, config.vocabulary_hashes)
        self.windows = Windows(config)

    def ingest(self, event: Event, unknown_fields: int = 0, now: float | None = None) -> Facts:
        """Fold one event in and return its facts; `now` is when it was written,
        if known (see Windows.slot)."""
        facts = facts_of(event)
        tally = self.windows.slot(facts.ts, now)
        view = View(facts, self.labels["app"](event.app), self.config, self.labels, self.vocabulary)
        for observe in OBSERVERS:
            observe(view, tally)
        if unknown_fields:
            inc(tally, (UNKNOWN_FIELDS.name,), unknown_fields)
        return facts

    def process(self, raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES, now: float | None = None) -> Facts:
        """Decode and ingest one message; raises `RejectedEvent` and changes nothing if bad."""
        decoded = decode(raw, max_bytes)
        return self.ingest(decoded.event, decoded.unknown_fields, now)

    def totals(self) -> Tally:
        return self.windows.totals()

    def to_dict(self, sealed_elsewhere: bool = False) -> dict:
        """Plain data. A day of minute buckets is large, and sealed buckets never
        change: with `sealed_elsewhere` they are left out, for a checkpoint that
        stores each of them once (`windows.sealed_items`)."""
        return {
            "version": STATE_VERSION,
            "labels": {dim: labels.to_list() for dim, labels in self.labels.items()},
            "vocabulary": self.vocabulary.to_dict(),
            "windows": self.windows.to_dict(sealed_elsewhere),
        }

    @classmethod
    def from_dict(cls, config: CoreConfig, data: dict, sealed: list[list] = ()) -> PartitionState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported state version {data.get('version')!r}")
        state = cls(config)
        for dim, seen in data["labels"].items():
            state.labels[dim] = LabelSet(config.max_label_values, config.label_values.get(dim), seen)
        state.vocabulary = Vocabulary.from_dict(data["vocabulary"])
        state.windows = Windows.from_dict(config, data["windows"], sealed)
        return state


def snapshot(config: CoreConfig, states: Iterable[PartitionState], now: float) -> dict[str, Tally]:
    """Totals and every configured window, summed over partitions (in the order given)."""
    states = list(states)
    out = {"totals": total(s.totals() for s in states)}
    for name, seconds in config.windows:
        out[name] = total(s.windows.window(seconds, now) for s in states)
    return out
