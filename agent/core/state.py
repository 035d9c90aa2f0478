"""Per-partition state: windows, bounded labels, the vocabulary and the judgment queue.

This is what the agent checkpoints with the partition's next offset. Replaying
the same events into a fresh state, in the same order, gives an equal state.

The checkpointed form is versioned. A state written by an older release is
upgraded step by step through `MIGRATIONS` when it is loaded; one that cannot
be (written by a newer release, or damaged) raises `StateError`, and the
agent starts that partition afresh instead of crash-looping.

A frozen baseline's vocabulary is shared, not copied: the state holds a
reference to it and its checkpoint names it by version. The judgment queue's
sampler is rebuilt from its rows in the store (agent/core/judging.py), so it
is not in the checkpointed form either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agent.core.calibrated import Active
from agent.core.config import LABEL_DIMENSIONS, CoreConfig
from agent.core.decoder import DEFAULT_MAX_BYTES, decode
from agent.core.model import Event
from agent.core.families import OBSERVERS, UNKNOWN_FIELDS
from agent.core.labels import LabelSet
from agent.core.tally import Tally, inc, total
from agent.core.drift.days import DriftConfig, DriftDays
from agent.core.facts import Facts, facts_of
from agent.core.judging import JudgmentIntake, JudgingConfig
from agent.core.sampling import Candidate
from agent.core.view import Keys, Labelled, Table, View
from agent.core.vocabulary import Vocabulary
from agent.core.windows import Windows

STATE_VERSION = 2


class StateError(ValueError):
    """A checkpointed state this release cannot read."""


@dataclass(frozen=True)
class SharedVocabulary:
    """A frozen baseline's vocabulary, shared by every partition (and replica)."""

    version: str
    vocabulary: Vocabulary


class PartitionState:
    __slots__ = ("baseline", "calibrations", "config", "drift", "judging", "labels", "shared", "views", "vocabulary", "windows")

    def __init__(self, config: CoreConfig, baseline: SharedVocabulary | None = None, judging: JudgingConfig | None = None,
                 kept: Iterable[Candidate] = (), drift: DriftConfig | None = None):
        """`judging` turns the judgment queue on; `kept` are its stored candidates.
        `drift` turns the daily drift counts on (they start empty: only deltas are held)."""
        self.config = config
        self.baseline = baseline
        self.calibrations: Active | None = None  # set by the agent as stored fits change; never checkpointed
        self.judging = None if judging is None else JudgmentIntake(judging, kept)
        self.drift = None if drift is None else DriftDays(drift)
        self.labels = {
            dim: LabelSet(config.max_label_values, config.label_values.get(dim)) for dim in LABEL_DIMENSIONS
        }
        self.vocabulary = Vocabulary(config.vocabulary_bits, config.vocabulary_hashes)
        self.windows = Windows(config)
        self.views: dict[str, View] = {}  # per app label, with its family keys: derived, never checkpointed
        self.shared: dict[Table, Labelled] = {}  # key tables of families without an app label, for every view

    def ingest(self, event: Event, unknown_fields: int = 0, now: float | None = None) -> Facts:
        """Fold one event into its bucket and return its facts.

        `now` is when it was written, if known (see Windows.slot). What a run
        of events added is read back with `take_added`.
        """
        facts = facts_of(event)
        target, bookkeeping = self.windows.slot(facts.ts, now)
        if bookkeeping:
            target[(bookkeeping,)] = target.get((bookkeeping,), 0) + 1
        # New terms are new to the baseline once one is active (the same answer
        # on every partition), to this partition's own history before that.
        terms = event.query.terms
        new_terms = 0
        if terms:
            new_terms = (self.vocabulary if self.baseline is None else self.baseline.vocabulary).add_all(terms)
        app = self.labels["app"](event.app)
        view = self.views.get(app)
        if view is None:
            view = self.views[app] = View(Keys(app, self.config, self.labels, self.shared))
        view.facts, view.new_terms, view.calibrations = facts, new_terms, self.calibrations
        for observe in OBSERVERS:
            observe(view, target)
        if unknown_fields:
            inc(target, UNKNOWN_FIELDS.key(), unknown_fields)
        if self.judging is not None:
            self.judging.observe(facts, new_terms if self.baseline is not None else 0, self.windows.watermark, app)
        if self.drift is not None:
            self.drift.observe(facts, app)
        return facts

    def process(self, raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES, now: float | None = None) -> Facts:
        """Decode and ingest one message; raises `RejectedEvent` and changes nothing if bad."""
        decoded = decode(raw, max_bytes)
        return self.ingest(decoded.event, decoded.unknown_fields, now)

    def take_added(self) -> Tally:
        """What the events ingested since the last call added: whole events
        only, and never negative where each event added a non-negative amount,
        so the process-wide counters summed from it never go down."""
        return self.windows.take_added()

    def totals(self) -> Tally:
        return self.windows.totals()

    def to_dict(self, sealed_elsewhere: bool = False) -> dict:
        """Plain data. A day of minute buckets is large, and sealed buckets never
        change: with `sealed_elsewhere` they are left out, for a checkpoint that
        stores each of them once (`windows.sealed_items`)."""
        return {
            "version": STATE_VERSION,
            "baseline": None if self.baseline is None else self.baseline.version,
            "labels": {dim: labels.to_list() for dim, labels in self.labels.items()},
            "vocabulary": self.vocabulary.to_dict(),
            "windows": self.windows.to_dict(sealed_elsewhere),
        }

    @classmethod
    def from_dict(cls, config: CoreConfig, data: dict, sealed: list[list] = (),
                  baselines: Mapping[str, SharedVocabulary] = MappingProxyType({}), judging: JudgingConfig | None = None,
                  kept: Iterable[Candidate] = (), drift: DriftConfig | None = None) -> PartitionState:
        """Restore a checkpointed state, upgrading an older version first."""
        data = migrate(data)
        version = data["baseline"]
        if version is not None and version not in baselines:
            raise StateError(f"baseline {version!r} is not available")
        try:
            state = cls(config, None if version is None else baselines[version], judging, kept, drift)
            for dim, seen in data["labels"].items():
                state.labels[dim] = LabelSet(config.max_label_values, config.label_values.get(dim), seen)
            state.vocabulary = Vocabulary.from_dict(data["vocabulary"])
            state.windows = Windows.from_dict(config, data["windows"], sealed)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"damaged state: {exc!r}") from None
        return state


def sums(config: CoreConfig, states: Iterable[PartitionState], now: float) -> dict[str, Tally]:
    """Totals ("totals") and every configured window, summed over partitions in the order given."""
    states = list(states)
    out = {"totals": total(s.totals() for s in states)}
    for name, seconds in config.windows:
        out[name] = total(s.windows.window(seconds, now) for s in states)
    return out


def _v1_to_v2(data: dict) -> dict:
    """Version 2 names the baseline whose vocabulary the state uses (none before)."""
    return {**data, "version": 2, "baseline": None}


# MIGRATIONS[n] turns a version-n state into a version-(n + 1) one.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _v1_to_v2}


def migrate(data: dict, migrations: Mapping[int, Callable[[dict], dict]] = MIGRATIONS,
            latest: int = STATE_VERSION) -> dict:
    """Bring a checkpointed state to `latest`, one version at a time."""
    version = data.get("version") if isinstance(data, dict) else None
    if not isinstance(version, int) or not 1 <= version <= latest:
        raise StateError(f"unsupported state version {version!r} (this release reads 1 to {latest})")
    while version < latest:
        data = migrations[version](data)
        version += 1
    return data
