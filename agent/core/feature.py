"""What a per-partition feature is: one shape for the metric families, the judgment queue and the drift days.

A partition's state (agent/core/state.py) hands every event's `Facts` to
each of its features in turn, with one `Context` the state refills per event
(never built per event). The metric families (agent/core/metrics.py) come
first and always. What a feature counted leaves through `take`, into an
outbox slot (`outbox()`, keyed by its `name`) that the checkpoint writes as
rows in the same transaction as the offsets; a restored partition rebuilds
such a feature from those rows (the io side's `partition`). A feature may
also keep a section of the checkpointed state (`to_dict`, under its name;
the metric families keep their windows there) and take it back on a restore
(`restore`), with the parts of it that can no longer change stored apart
(`seals`); and it may count into the process's counters, read after every
poll (`added`). The agent counts, checkpoints and restores the metric
families through these members, as it does every other feature; what it
publishes is read from their windows (`PartitionState.windows`).

The checkpointed state is versioned as a whole: a feature that changes the
layout of its section raises `STATE_VERSION` and adds a migration of the
whole document to `MIGRATIONS` (agent/core/state.py).

Adding a feature is a module implementing `PartitionFeature` here, its io module
(agent/io/features/), its settings section, and one line in
agent/service.py `FEATURES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent.core.facts import Facts
from agent.core.tally import Tally

if TYPE_CHECKING:  # the state and the calibrations hand theirs in
    from agent.core.calibrated import Active
    from agent.core.state import ActiveBaseline


class Context:
    """The partition's context of one event: one per state, refilled per event, read and never kept."""

    __slots__ = ("app", "baseline", "calibrations", "future", "new_terms", "now", "pipeline_version",
                 "unknown_fields", "watermark")

    def __init__(self) -> None:
        self.app = ""  # the event's app as the bounded label set names it
        # Its pipeline version label, set by the metric families while split by version, else None.
        self.pipeline_version: str | None = None
        self.new_terms = 0  # query terms new to the vocabulary in use (the baseline's once one is active)
        self.baseline: ActiveBaseline | None = None  # the drift baseline in force, if any (supplied)
        self.calibrations: Active | None = None  # the score calibrations in force, if any (supplied)
        self.now: float | None = None  # when the event was written, if known
        self.unknown_fields = 0  # fields the decoder ignored
        self.watermark: float | None = None  # the windows' watermark, once the metric families saw the event
        # Dated further ahead of `now` than windows.max_future_seconds: the metric families' decision.
        self.future = False

    def lead(self) -> tuple[str, ...]:
        """The leading label values of the event's series: its app label, then its pipeline version
        label when split. After `ingest` the context still describes that event (the agent keys the
        exemplars of the event just ingested by these)."""
        version = self.pipeline_version
        return (self.app,) if version is None else (self.app, version)


# The context fields the state fills from each event before any feature observes it.
FROM_EVENT = frozenset({"app", "new_terms", "now", "unknown_fields"})
# The context fields held in force from one event to the next, each supplied by the feature named: its io
# side sets them between events (`PartitionState.supply`), or a restored state is built with the one its
# checkpoint names; None while nothing is in force (that feature off, or nothing stored yet). What is in
# force is the same on every partition, read from the store.
SUPPLIED: Mapping[str, str] = MappingProxyType({"baseline": "drift", "calibrations": "calibration"})
# What is filled before any feature observes an event; the other fields are filled by the feature that
# declares them in `writes`, for the features after it.
FILLED_BEFORE = FROM_EVENT | frozenset(SUPPLIED)


def alone(facts: Facts) -> Context:
    """The context of a feature fed on its own, outside a state (a tool, a test): the event's own app."""
    ctx = Context()
    ctx.app = facts.event.app
    return ctx


class Observer(Protocol):
    def observe(self, facts: Facts, ctx: Context) -> None:
        """Fold one event in."""


class Pending(Protocol):
    """A feature's taken values, held until a checkpoint commits them: a failed checkpoint keeps them."""

    def absorb(self, taken: Any) -> None:
        """Add what `PartitionFeature.take` returned, net of what is held."""

    def clear(self) -> None:
        """The checkpoint that wrote them committed."""


P = TypeVar("P", bound=Pending)  # a feature's own holder: only its feature reads it


class PartitionFeature(Observer, Protocol[P]):
    name: str  # its holder in the outbox, its section of the checkpointed state, `state.feature(name)`
    reads: frozenset[str]  # the `Context` fields its `observe` reads
    writes: frozenset[str]  # the `Context` fields its `observe` fills, for the features after it
    # Whether parts of its section, once sealed, are stored apart (`sealed_items`). At most one feature
    # of a state seals: the store keeps one numbered series of sealed parts per partition.
    seals: bool

    def take(self) -> Any:
        """What it queued since the last call, for its outbox holder."""

    def added(self) -> Tally:
        """What its events added to the process's counters since the last call: read after every poll
        and summed over the partitions into the counters /metrics shows. Never negative where each event
        added a non-negative amount, so the counters never go down."""

    def outbox(self) -> P:
        """An empty holder for what `take` returns."""

    def flush_due(self, held: P) -> bool:
        """Whether what it queues in memory, with what `held` holds, calls for a checkpoint now."""

    def to_dict(self, sealed_elsewhere: bool = False) -> dict[str, Any] | None:
        """Its section of the checkpointed state, or None: it is kept as rows. With `sealed_elsewhere`,
        the parts that never change again are left out (the checkpoint stores them apart, once)."""

    def restore(self, section: dict[str, Any] | None, sealed: Sequence[Sequence[Any]]) -> None:
        """Take back its section of a restored state (None when the state has none), with the parts
        stored apart (`sealed`: empty but for the feature that seals); raises ValueError, KeyError or
        TypeError when it is damaged."""

    def sealed_before(self) -> int:
        """Parts of its section below this index never change again (0 for a feature that seals nothing)."""

    def sealed_items(self, first: int) -> list[list[Any]]:
        """Its sealed parts from index `first` up to `sealed_before`, as `restore` takes them back."""

    def keep_from(self) -> int | None:
        """Its parts stored apart below this index are no longer needed: the store deletes them."""


class KeptAsRows:
    """The checkpointed-state half of a `PartitionFeature` kept only as rows: no section, nothing to
    take back, no counters, nothing sealed."""

    __slots__ = ()
    seals = False

    def added(self) -> Tally:
        return {}

    def to_dict(self, sealed_elsewhere: bool = False) -> None:
        return None

    def restore(self, section: dict[str, Any] | None, sealed: Sequence[Sequence[Any]]) -> None:
        """Rebuilt from its rows by its io side, not from the state."""

    def sealed_before(self) -> int:
        return 0

    def sealed_items(self, first: int) -> list[list[Any]]:
        return []

    def keep_from(self) -> int | None:
        return None


def check_context(features: Sequence[PartitionFeature[Any]]) -> None:
    """The features' order, checked once per state: each reads only context fields filled before any
    feature observes the event (`FILLED_BEFORE`) or by a feature before it, and each field has one filler.
    ValueError names the feature and the fields."""
    filled = set(FILLED_BEFORE)
    for feature in features:
        if unfilled := sorted(feature.reads - filled):
            raise ValueError(f"feature {feature.name!r} reads {unfilled} of the context, which nothing before it fills")
        if twice := sorted(feature.writes & filled):
            raise ValueError(f"feature {feature.name!r} fills {twice} of the context, which is filled before it")
        filled |= feature.writes


class Configuration(Protocol):
    """A feature's configuration, given to a new state by its feature's name."""

    def partition(self) -> PartitionFeature[Any]:
        """A fresh feature for one partition."""
