"""The metric families as a partition feature: each event into its window bucket, through every family.

The first feature of every state, always on; the others read the watermark
it leaves in the context. Its windows are its section of the checkpointed
state ("windows"), its sealed buckets stored apart (`seals`,
agent/core/windows.py). What its events added leaves through `added`, which
the agent sums into the process's counters after every poll; so nothing is
left for a checkpoint's outbox, whose holder (`Counted`) holds nothing.

Split by pipeline version (`CoreConfig.by_pipeline_version`), the families
are `ByPipelineVersion`: a view per app and version label, whose keys carry
both. Unsplit, an event costs what it did before the split existed: the
choice is made once, by the class (`metric_families`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.core.config import PIPELINE_VERSION, CoreConfig
from agent.core.facts import Facts
from agent.core.families import FUTURE_EVENTS, OBSERVERS, UNKNOWN_FIELDS
from agent.core.feature import Context
from agent.core.labels import OTHER, LabelSet
from agent.core.pipelines import NO_VERSION, conform, fold_versions, version_of
from agent.core.tally import Tally, inc
from agent.core.view import Keys, Labelled, Table, View
from agent.core.windows import Windows


class Counted:
    """The metric families' outbox slot: empty, their checkpointed part being the state itself."""

    __slots__ = ()

    def absorb(self, taken: None) -> None:
        """What they count leaves after every poll (`added`): nothing is left at a checkpoint."""

    def clear(self) -> None:
        pass


class Views(dict[str, View]):
    """Views by app label, each built on first use with the keys of its lead:
    the app label, then `tail` (the pipeline version label, when split)."""

    __slots__ = ("config", "labels", "shared", "tail")

    def __init__(self, tail: tuple[str, ...], config: CoreConfig, labels: dict[str, LabelSet], *,
                 shared: dict[Table, Labelled]) -> None:
        super().__init__()
        self.tail = tail
        self.config = config
        self.labels = labels
        self.shared = shared

    def __missing__(self, app: str) -> View:
        view = self[app] = View(Keys((app, *self.tail), self.config, self.labels, shared=self.shared))
        return view


class MetricFamilies:
    __slots__ = ("config", "labels", "shared", "views", "windows")
    name = "windows"
    seals = True  # a day of minute buckets is large: each is stored once, when it can no longer change
    reads = frozenset({"app", "now", "new_terms", "calibrations", "unknown_fields"})
    writes = frozenset({"watermark", "future", "pipeline_version"})  # the version: split, else None

    def __init__(self, config: CoreConfig, labels: dict[str, LabelSet]) -> None:
        self.config = config
        self.labels = labels  # the state's bounded label sets
        self.windows = Windows(config)
        self.shared: dict[Table, Labelled] = {}  # key tables of families without an app label, for every view
        self.views = Views((), config, labels, shared=self.shared)  # per app label: derived, never checkpointed

    def observe(self, facts: Facts, ctx: Context) -> None:
        windows = self.windows
        target, bookkeeping = windows.slot(facts.ts, ctx.now)
        if bookkeeping:
            target[(bookkeeping,)] = target.get((bookkeeping,), 0) + 1
        ctx.watermark = windows.watermark
        ctx.future = bookkeeping == FUTURE_EVENTS.name
        view = self.views[ctx.app]
        view.facts, view.new_terms, view.calibrations = facts, ctx.new_terms, ctx.calibrations
        for observe in OBSERVERS:
            observe(view, target)
        if ctx.unknown_fields:
            inc(target, UNKNOWN_FIELDS.key(), ctx.unknown_fields)

    def take(self) -> None:
        """Nothing waits for a checkpoint: their counts leave through `added`, their windows in the state."""

    def added(self) -> Tally:
        return self.windows.take_added()

    def outbox(self) -> Counted:
        return Counted()

    def flush_due(self, held: Counted) -> bool:
        return False

    def to_dict(self, sealed_elsewhere: bool = False) -> dict[str, Any]:
        return self.windows.to_dict(sealed_elsewhere)

    def sealed_before(self) -> int:
        return self.windows.sealed_before()

    def sealed_items(self, first: int) -> list[list[Any]]:
        return self.windows.sealed_items(first)

    def keep_from(self) -> int:
        return self.windows.oldest()

    def restore(self, section: dict[str, Any] | None, sealed: Sequence[Sequence[Any]]) -> None:
        """A state checkpointed with the split on or off is restored in the layout configured now
        (`conform`): the buckets counted before the switch keep their sums and age out."""
        if section is None:
            raise KeyError(self.name)  # every state has its windows
        windows = self.windows = Windows.from_dict(self.config, section, sealed)
        split = self.config.by_pipeline_version
        windows.retired = conform(windows.retired, split)
        windows.buckets = {index: conform(bucket, split) for index, bucket in windows.buckets.items()}


class ByPipelineVersion(MetricFamilies):
    """The metric families split by pipeline version: the views of each event's app and version label.

    Each app learns its own versions, up to `max_pipeline_versions` (or takes
    the configured list): the versions compared are those of one app. A
    learned version has stopped once it has no event in the last
    `pipeline_version_idle_seconds` of event time (its last event before the
    watermark less that); a stopped version is forgotten when a new one needs
    its slot. Versions are looked at only then, when the set is full and a new
    one arrives (`make_room`), with the watermark the events before it left.
    The minutes a forgotten version counted in keep its name until they leave
    the windows (they are its counts; /metrics folds a version it does not
    show into `other`, agent/core/snapshot.py); in `retired` every version no
    longer learned moves to `other`, so the totals of releases over months do
    not add up and their sum over versions stays the events counted. The
    versions and the event time each was last seen are checkpointed in the
    section, as `pipeline_versions` and `pipeline_versions_seen`, so that a
    state without the split checkpoints as before it existed."""

    __slots__ = ("by_label", "versions")

    def __init__(self, config: CoreConfig, labels: dict[str, LabelSet]) -> None:
        super().__init__(config, labels)
        self.by_label: dict[str, Views] = {}  # per version label, its views by app
        self.versions: dict[str, Versions] = {}  # per app label

    def observe(self, facts: Facts, ctx: Context) -> None:
        app = ctx.app
        versions = self.versions.get(app)
        if versions is None:
            versions = self.versions[app] = Versions(app, self._known(), self)
        views = self.views = versions[version_of(facts.event)]
        label = ctx.pipeline_version = views.tail[0]  # the features after the families split by the same label
        # Event time, as the windows place the counts: up to max_future_seconds
        # past the write time, as far ahead as a bucket is kept (further ahead the
        # counts go to `retired`). The version has not stopped until the watermark
        # passes that time; a clock far ahead must not keep a version for ever.
        ts, now = facts.ts, ctx.now
        if now is not None:
            ahead = now + self.config.max_future_seconds
            if ts > ahead:
                ts = ahead
        last = versions.last
        if ts > last.get(label, _NEVER):
            last[label] = ts
        MetricFamilies.observe(self, facts, ctx)  # not super(): no proxy built per event

    def _known(self, seen: Sequence[str] = ()) -> LabelSet:
        return LabelSet(self.config.max_pipeline_versions, self.config.label_values.get(PIPELINE_VERSION), seen)

    def views_of(self, label: str) -> Views:
        views = self.by_label.get(label)
        if views is None:
            views = self.by_label[label] = Views((label,), self.config, self.labels, shared=self.shared)
        return views

    def make_room(self, versions: Versions) -> None:
        """Forget the app's stopped versions, and move the versions no longer
        learned to `other` in `retired`. Only when one may be due (`Versions.due`):
        a full set that keeps its versions costs a comparison per event of a further one."""
        windows = self.windows
        if windows.watermark is None:
            return
        edge = windows.watermark - self.config.pipeline_version_idle_seconds  # stopped: last seen before
        if versions.due >= edge:
            return
        app, last = versions.app, versions.last
        for label in [v for v in versions.known.seen if last[v] < edge]:
            versions.forget(label)
            views = self.by_label.get(label)
            if views is not None:  # none for a version restored and not seen since
                views.pop(app, None)
                if not views:
                    del self.by_label[label]
        kept = {*versions.known, NO_VERSION, OTHER}
        for tally in windows.retired_readings():
            fold_versions(tally, app, kept)
        versions.due = min((last[v] for v in versions.known.seen), default=_EVER)

    def to_dict(self, sealed_elsewhere: bool = False) -> dict[str, Any]:
        section = super().to_dict(sealed_elsewhere)
        learned = {app: v for app, v in sorted(self.versions.items()) if v.known.seen}
        section["pipeline_versions"] = {app: v.known.to_list() for app, v in learned.items()}
        section["pipeline_versions_seen"] = {app: {label: v.last[label] for label in v.known.to_list()}
                                             for app, v in learned.items()}
        return section

    def restore(self, section: dict[str, Any] | None, sealed: Sequence[Sequence[Any]]) -> None:
        """Learned versions checkpointed without the time each was last seen
        (before it was kept) count as seen at the restored watermark."""
        super().restore(section, sealed)
        learned = (section or {}).get("pipeline_versions", {})  # none when checkpointed without the split
        if not isinstance(learned, dict) or not all(isinstance(seen, list) for seen in learned.values()):
            raise TypeError("pipeline_versions: expected each app's list of versions")
        seen_at = (section or {}).get("pipeline_versions_seen", {})
        if not isinstance(seen_at, dict) or not all(
                isinstance(times, dict) and all(isinstance(t, int | float) for t in times.values())
                for times in seen_at.values()):
            raise TypeError("pipeline_versions_seen: expected each app's event time of each version")
        restored_at = self.windows.watermark or 0.0
        self.versions = {}
        for app, seen in learned.items():
            known = self._known(seen)
            times = seen_at.get(app, {})
            last = {v: float(times.get(v, restored_at)) for v in known.seen}
            self.versions[app] = Versions(app, known, self, last=last)


_NEVER = float("-inf")  # last seen before any event
_EVER = float("inf")  # no learned version to forget


class Versions(dict[str | None, Views]):
    """One app's views by raw pipeline version (None: the event names none):
    those of its bounded label, `none`, the version as `known` keeps it, or
    `other`. As in `Labelled`, only a version kept as itself is remembered, so
    the mapping is bounded as the label set is."""

    __slots__ = ("app", "due", "families", "known", "last")

    def __init__(self, app: str, known: LabelSet, families: ByPipelineVersion, *,
                 last: dict[str, float] | None = None) -> None:
        super().__init__()
        self.app = app
        self.known = known  # the app's pipeline versions
        self.families = families
        self.last = last or {}  # label -> the latest event time counted under it
        # At most the earliest `last` of a learned version: none can be forgotten before the windows pass it.
        self.due = _NEVER

    def __missing__(self, version: str | None) -> Views:
        if version is None:
            label = NO_VERSION
        else:
            known = self.known
            if version not in known and not known.fixed and len(known) >= known.limit:
                self.families.make_room(self)
            label = known(version)
            if label == version:
                self.due = _NEVER  # learned (or kept): its time is not yet in `due`
        views = self.families.views_of(label)
        if version is None or label == version:
            self[version] = views
        return views

    def forget(self, label: str) -> None:
        """A learned version leaves the set, its slot free for a new one."""
        del self.known[label]
        self.pop(label, None)
        self.last.pop(label, None)


def metric_families(config: CoreConfig, labels: dict[str, LabelSet]) -> MetricFamilies:
    """The metric families, split by pipeline version when configured so."""
    return (ByPipelineVersion if config.by_pipeline_version else MetricFamilies)(config, labels)
