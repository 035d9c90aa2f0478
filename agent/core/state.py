"""Per-partition state: bounded labels, the vocabulary, and its features (metric families first).

This is what the agent checkpoints with the partition's next offset. Replaying
the same events into a fresh state, in the same order, gives an equal state.

The checkpointed form is the context every feature shares ("version",
"baseline", "labels", "vocabulary") and each feature's own section under its
name (agent/core/feature.py: the metric families' "windows"; a feature kept
as rows has none). It is versioned as a whole. A state written by an older
release is upgraded step by step through `MIGRATIONS` when it is loaded. One
written by a newer release raises `NewerState`: the agent leaves it untouched
for a replica that can read it. One that is damaged raises `StateError`: the
agent sets it aside in the store and starts that partition afresh at its
offset instead of crash-looping. A release that adds or changes a section
raises `STATE_VERSION`, so an older one never mistakes it for its own.

A frozen baseline's vocabulary is shared, not copied: the state holds a
reference to it and its checkpoint names it by version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from agent.core.config import LABEL_DIMENSIONS, CoreConfig
from agent.core.decoder import DEFAULT_MAX_BYTES, decode
from agent.core.facts import Facts, facts_of
from agent.core.feature import SUPPLIED, Configuration, Context, PartitionFeature, check_context
from agent.core.labels import LabelSet
from agent.core.metrics import MetricFamilies, metric_families
from agent.core.model import Event
from agent.core.sampling.risk import RiskReference
from agent.core.tally import Tally, total
from agent.core.vocabulary import Vocabulary
from agent.core.windows import Windows

STATE_VERSION = 2
Migration = Callable[[dict[str, Any]], dict[str, Any]]


class StateError(ValueError):
    """A checkpointed state this release cannot read."""


class NewerState(StateError):
    """A checkpointed state written by a newer release: this one must neither read nor overwrite it."""


@dataclass(frozen=True)
class ActiveBaseline:
    """What a partition holds of the drift baseline in force: its version, its vocabulary (shared by
    every partition, never copied) and what the judgment queue's risk signals read from it
    (`reference_from`). The drift baseline itself (agent/core/drift/baseline.py) stays in the store."""

    version: str
    vocabulary: Vocabulary
    reference: RiskReference | None = None


class PartitionState:
    """A partition's shared context and its features, the metric families first."""

    __slots__ = ("config", "context", "features", "labels", "observers", "sealing", "vocabulary")

    def __init__(self, config: CoreConfig, baseline: ActiveBaseline | None = None,
                 features: Iterable[PartitionFeature[Any]] = (), **configs: Configuration | None) -> None:
        """`features` are the partition's features beside the metric families, fresh or rebuilt from
        their rows; a configuration given by its feature's name (`judgment=`, `drift=`: None for off)
        builds a fresh one (`partition()`). Two features of one name raise ValueError."""
        self.config = config
        self.context = Context()
        self.context.baseline = baseline
        self.labels = {
            dim: LabelSet(config.max_label_values, config.label_values.get(dim)) for dim in LABEL_DIMENSIONS
        }
        self.vocabulary = Vocabulary(config.vocabulary_bits, config.vocabulary_hashes)
        families = metric_families(config, self.labels)
        made = {name: c.partition() for name, c in configs.items() if c is not None}
        if any(f.name != name for name, f in made.items()):
            raise TypeError(f"a configuration not given by its feature's name: {sorted(made)}")
        self.features: dict[str, PartitionFeature[Any]] = {}
        for feature in (families, *features, *made.values()):
            if feature.name in self.features:
                raise ValueError(f"two features named {feature.name!r}")
            if feature is not families and feature.name in RESERVED:
                raise ValueError(f"a feature may not be named {feature.name!r}: the state's own name")
            self.features[feature.name] = feature
        check_context(list(self.features.values()))
        sealing = [f for f in self.features.values() if f.seals]
        if len(sealing) != 1:  # the metric families seal, and nothing else may: one numbered series per partition
            raise ValueError(f"one feature seals parts of its section, not {[f.name for f in sealing]}")
        self.sealing = sealing[0]  # the one whose sealed parts the store keeps apart
        self.observers = tuple(f.observe for f in self.features.values())

    def feature(self, name: str) -> PartitionFeature[Any]:
        """A feature by its name: `state.feature("judgment")`; LookupError when the state has none."""
        try:
            return self.features[name]
        except KeyError:
            raise LookupError(f"no feature {name!r} in this state") from None

    def supply(self, feature: str, **fields: Any) -> None:
        """Set context fields held in force from the next event on, for `feature`, which supplies them
        (`SUPPLIED`); ValueError for a field it does not supply."""
        if wrong := sorted(name for name in fields if SUPPLIED.get(name) != feature):
            raise ValueError(f"feature {feature!r} does not supply {wrong} of the context")
        for name, value in fields.items():
            setattr(self.context, name, value)

    @property
    def windows(self) -> Windows:
        """The metric families' windows, which every published figure is a view of."""
        return cast(MetricFamilies, self.features[MetricFamilies.name]).windows

    def ingest(self, event: Event, unknown_fields: int = 0, now: float | None = None) -> Facts:
        """Fold one event into every feature and return its facts.

        `now` is when it was written, if known (see Windows.slot). What a run
        of events added to the counters is read back with `take_added`.
        """
        facts = facts_of(event)
        ctx = self.context
        # New terms are new to the baseline once one is active (the same answer
        # on every partition), to this partition's own history before that.
        terms = event.query.terms
        new_terms = 0
        if terms:
            baseline = ctx.baseline
            new_terms = (self.vocabulary if baseline is None else baseline.vocabulary).add_all(terms)
        ctx.new_terms = new_terms
        ctx.app = self.labels["app"](event.app)
        ctx.now = now
        ctx.unknown_fields = unknown_fields
        for observe in self.observers:
            observe(facts, ctx)
        return facts

    def process(self, raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES, now: float | None = None) -> Facts:
        """Decode and ingest one message; raises `RejectedEvent` and changes nothing if bad."""
        decoded = decode(raw, max_bytes)
        return self.ingest(decoded.event, decoded.unknown_fields, now)

    def take_added(self) -> Tally:
        """What the events ingested since the last call added to the counters, every feature's `added`:
        whole events only, and never negative where each event added a non-negative amount, so the
        process-wide counters summed from it never go down."""
        return total(f.added() for f in self.features.values())

    def totals(self) -> Tally:
        return self.windows.totals()

    def sealed_before(self) -> int:
        """Sealed parts below this index can no longer change (`PartitionFeature.sealed_before`)."""
        return self.sealing.sealed_before()

    def sealed_items(self, first: int) -> list[list[Any]]:
        """The sealed parts from index `first` on, stored apart by the checkpoint."""
        return self.sealing.sealed_items(first)

    def keep_from(self) -> int | None:
        """Sealed parts stored apart below this index are no longer needed."""
        return self.sealing.keep_from()

    def to_dict(self, sealed_elsewhere: bool = False) -> dict[str, Any]:
        """Plain data: the shared context, then each feature's section. Sealed parts never change:
        with `sealed_elsewhere` they are left out, for a checkpoint that stores each of them once
        (`sealed_items`)."""
        baseline = self.context.baseline
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "baseline": None if baseline is None else baseline.version,
            "labels": {dim: labels.to_list() for dim, labels in self.labels.items()},
            "vocabulary": self.vocabulary.to_dict(),
        }
        for name, feature in self.features.items():
            section = feature.to_dict(sealed_elsewhere)
            if section is not None:
                data[name] = section
        return data

    @classmethod
    def from_dict(cls, config: CoreConfig, data: dict[str, Any], sealed: Sequence[Sequence[Any]] = (),
                  baselines: Mapping[str, ActiveBaseline] = MappingProxyType({}),
                  features: Iterable[PartitionFeature[Any]] = (), **configs: Configuration | None) -> PartitionState:
        """Restore a checkpointed state, upgrading an older version first; `features` and `configs`
        as for a new state."""
        data = migrate(data)
        version = data.get("baseline")
        if version is not None and version not in baselines:
            raise StateError(f"baseline {version!r} is not available")
        state = cls(config, None if version is None else baselines[version], features, **configs)
        try:
            for dim, seen in data["labels"].items():
                state.labels[dim] = LabelSet(config.max_label_values, config.label_values.get(dim), seen)
            state.vocabulary = Vocabulary.from_dict(data["vocabulary"])
            for name, feature in state.features.items():
                feature.restore(data.get(name), sealed if feature is state.sealing else ())
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise StateError(f"damaged state: {exc!r}") from None
        return state


# Names a feature may not take: the checkpoint's own keys (a feature's section is stored under its name
# beside them).
RESERVED = frozenset({"version", "baseline", "labels", "vocabulary"})


def sums(config: CoreConfig, states: Iterable[PartitionState], now: float) -> dict[str, Tally]:
    """Totals ("totals") and every configured window, summed over partitions in the order given."""
    states = list(states)
    out = {"totals": total(s.totals() for s in states)}
    for name, seconds in config.windows:
        out[name] = total(s.windows.window(seconds, now) for s in states)
    return out


def recent(config: CoreConfig, states: Iterable[PartitionState]) -> Tally:
    """What the partitions counted in the last `pipeline_version_idle_seconds` of event time up to the
    newest watermark among them, summed: the pipeline versions with events there have not stopped
    (`Exposition.snapshot`). The newest, so that a partition without traffic keeps no version going."""
    states = list(states)
    newest = max((s.windows.watermark for s in states if s.windows.watermark is not None), default=None)
    if newest is None:
        return {}
    return total(s.windows.window(config.pipeline_version_idle_seconds, newest) for s in states)


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 names the baseline whose vocabulary the state uses (none before)."""
    return {**data, "version": 2, "baseline": None}


# MIGRATIONS[n] turns a version-n state into a version-(n + 1) one: the whole document, a feature's
# section included (a feature that changes its section's layout adds a version and its migration here).
MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}


def migrate(data: dict[str, Any], migrations: Mapping[int, Migration] = MIGRATIONS,
            latest: int = STATE_VERSION) -> dict[str, Any]:
    """Bring a checkpointed state to `latest`, one version at a time."""
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > latest:
        raise NewerState(f"state version {version} was written by a newer release (this one reads 1 to {latest})")
    if not isinstance(version, int) or not 1 <= version <= latest:
        raise StateError(f"unsupported state version {version!r} (this release reads 1 to {latest})")
    while version < latest:
        data = migrations[version](data)
        version += 1
    return data
