"""What each event adds to the daily drift counts, per partition, as deltas.

Per (UTC day of the event time, app) a partition counts each numeric
feature's values on its fine grid (`Grids`) and each mix's categories
(docs/drift.md). Counts only add, so what `take` returns since its last call
is an exact delta: the checkpoint that moves the offsets past the events adds
it to the stored counts (`count = count + delta`), which makes the stored
days exactly once, summed over partitions and replicas. Between checkpoints
only the deltas are held; a restored partition starts with none.

Values come from the event's `Facts`, raw; the app they count under is the
metrics' bounded label (agent/core/labels.py): the first `max_label_values`
apps a partition sees keep their name, later ones count under `other`. A
producer bug or an attack sending thousands of app names then adds at most
that many rows per day and feature, not one per name. Within that bound the
counts do not depend on how the stream was partitioned.

Split by pipeline version (the metric families set `ctx.pipeline_version`,
the app's bounded version label), a partition counts per (day, app, version) under the key
`app|version` where the app alone stood: no app name holds "|", so the key
tells both back (`app_version`). Readers sum each app's versions unless they
ask for them apart (`counts_of(..., split=True)`, `by_version`): a baseline
frozen from split days, and the drift of a whole app, are what they would be
unsplit. Not split, the key is the app: the rows are what they always were.

| feature | value(s) per event |
| --- | --- |
| top1_score, mean_admitted_score, score_gap | one, when defined |
| content_age_days | one per admitted result with an age |
| result_count | len(results) |
| latency_seconds | latency_ms / 1000, when reported |
| parent_diversity | unique parents in A / abs(A), when A is not empty |
| source (mix) | one per admitted result |
| query_type, language (mixes) | one, `unknown` when missing |
| filter_outcome (mix) | one per filter, `name:status` |
| query terms (sample) | the event's hashed terms, in the day's bottom-k sample (queries.py) |
| query_cluster (mix) | one per query with terms, only while a baseline's `QueryModel` is set, only in the sub-day windows |
| grids | per numeric feature counted, the digest of its grid (`Grid.digest`; features.py `GRIDS`) |

The daily `query_cluster` counts are not stored: they depend on the baseline,
so a stored day's clusters come from its sample when it is evaluated.

Windows shorter than a day (`RECENT`: 5m and 1h) are per replica, like the
other window gauges (docs/metrics.md, "Rolling windows"): the counts are held per 5-minute
slot of the event time, and what `take` hands over is also kept in a ring of
the newest `RECENT_SLOTS` slots, so `recent(now)` sums the whole slots each
window covers (5m: the last whole slot; 1h: the last 12), taken or not. The
ring is bounded by its slot count (times the apps); it is not checkpointed:
a restarted replica fills its windows again within the hour.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, cast

import numpy as np

from agent.core.drift.baseline import Counts
from agent.core.drift.features import (
    CONTENT_AGE,
    FEATURES,
    FILTER_OUTCOME,
    GRIDS,
    LANGUAGE,
    LATENCY,
    MEAN_SCORE,
    PARENT_DIVERSITY,
    QUERY_CLUSTER,
    QUERY_TYPE,
    RESULT_COUNT,
    SCORE_GAP,
    SOURCE,
    TOP1_SCORE,
    Grids,
    merge_grids,
)
from agent.core.drift.queries import QUERIES, SAMPLE, QueryModel, merge_sample, sample_key
from agent.core.facts import Facts
from agent.core.feature import Context, KeptAsRows

DAY = 86400
SLOT = 300  # seconds per slot of the sub-day windows
RECENT = (("5m", 300), ("1h", 3600))  # sub-day windows: the whole slots before the one holding `now`
RECENT_SLOTS = max(seconds for _, seconds in RECENT) // SLOT
UNKNOWN = "unknown"
COUNTED_MIXES = (SOURCE, QUERY_TYPE, LANGUAGE, FILTER_OUTCOME)
_SLOTS = FEATURES + COUNTED_MIXES + (QUERY_CLUSTER,)  # one dict of counts per name, in this order
_T1, _MEAN, _GAP, _AGE, _COUNT, _LAT, _DIV = (FEATURES.index(f) for f in (
    TOP1_SCORE, MEAN_SCORE, SCORE_GAP, CONTENT_AGE, RESULT_COUNT, LATENCY, PARENT_DIVERSITY))
_SRC, _QT, _LANG, _FILT, _CLUSTER = range(len(FEATURES), len(_SLOTS))

Key = tuple[int, str]  # (slot, app or app|version)
Row = tuple[str, str, str]  # (ISO day, app or app|version, feature or mix)
Deltas = dict[Row, dict[Any, Any]]  # -> {fine cell (int) or category (str): count}, zeros left out
Buffers = list["array[float]"]  # per numeric feature, its values since the last fold
Slotted = tuple[Buffers, list[dict[Any, int]], dict[str, Any], list[Any]]  # buffers, counts, sample, terms


@dataclass(frozen=True)
class DriftConfig:
    grids: Grids = field(default_factory=Grids)

    def partition(self) -> DriftDays:
        return DriftDays(self)


class HeldDeltas(dict[Row, dict[Any, Any]]):
    """Deltas taken from a partition, held until a checkpoint adds them to the stored counts (`Pending`)."""

    def absorb(self, taken: Deltas) -> None:
        merge(self, taken)


class DriftDays(KeptAsRows):
    """One partition's daily drift counts since the last `take` (a `PartitionFeature`).

    The hot path only appends each event's values to buffers per (5-minute
    slot, app); they are binned with numpy (and mixes counted) every
    `fold_every` events and at `take`, so memory stays bounded between
    checkpoints. Taken slots stay in the ring `recent` reads.
    """

    __slots__ = ("config", "fold_every", "queries", "_pending", "_days", "_last", "_buffered", "_ring", "_newest")
    name = "drift"
    reads = frozenset({"app", "pipeline_version"})
    writes: frozenset[str] = frozenset()

    def __init__(self, config: DriftConfig = DriftConfig(), fold_every: int = 16384) -> None:
        self.config = config
        self.fold_every = fold_every
        self.queries: QueryModel | None = None  # the active baseline's: counts `query_cluster` when set
        # (slot, app) -> (buffers, folded counts, sample, query terms to cluster)
        self._pending: dict[Key, Slotted] = {}
        self._days: dict[int, str] = {}  # day number -> ISO date, memoized
        self._last: dict[str, tuple[Any, ...]] = {}  # app -> the slot its last event went to, its buffers and counts
        self._buffered = 0  # events in the buffers
        self._ring: dict[Key, Deltas] = {}  # (slot, app) -> taken counts by ("", app, name), newest slots only
        self._newest = 0  # the newest slot taken

    def observe(self, facts: Facts, ctx: Context) -> None:
        """Buffer one event's values under `ctx.app`, the event's app as the bounded label set names it,
        and its version label when split by version."""
        event = facts.event
        app = ctx.app
        if ctx.pipeline_version is not None:
            app = f"{app}|{ctx.pipeline_version}"
        slot = int(facts.ts // SLOT)
        last = self._last.get(app)
        if last is None or last[0] != slot:
            last = self._slot(slot, app)
        b = last[2]
        x = facts.top1
        if x is not None:
            b[_T1].append(x)
        x = facts.admitted_score
        if x is not None:
            b[_MEAN].append(x)
        x = facts.gap
        if x is not None:
            b[_GAP].append(x)
        if facts.ages:
            b[_AGE].extend(facts.ages)
        b[_COUNT].append(len(event.results))
        x = event.latency_ms
        if x is not None:
            b[_LAT].append(x)  # in ms: divided by 1000 when binned
        # Mixes are counted here, while the event's strings are fresh in the cache.
        key: str | tuple[str, str] | None
        c = last[3]
        admitted = len(facts.admitted)
        if admitted:
            b[_DIV].append(len(facts.parents) / admitted)
            m = c[_SRC]
            for key, n in facts.sources.items():
                m[key] = m.get(key, 0) + n
        query = event.query
        m = c[_QT]
        key = query.type
        m[key] = m.get(key, 0) + 1
        m = c[_LANG]
        key = query.language
        m[key] = m.get(key, 0) + 1
        if event.filters:
            m = c[_FILT]
            for f in event.filters:
                key = f.name, f.status
                m[key] = m.get(key, 0) + 1
        terms = query.terms
        if terms:
            sample = last[4]
            sample[sample_key(event.event_id)] = terms
            if len(sample) >= 2 * SAMPLE:
                merge_sample(sample, {})
            if self.queries is not None:
                last[5].append(terms)
        self._buffered += 1
        if self._buffered >= self.fold_every:
            self._fold()

    def take(self) -> Deltas:
        """The counts added since the last call, per (day, app, feature or mix)."""
        self._fold()
        out: Deltas = {}
        for (slot, app), (_, counts, sample, _) in self._pending.items():
            rows = self._rows_of(app, counts)
            day = self._iso(slot * SLOT // DAY)
            merge(out, {(day, app, name): dict(found) for name, found in rows.items() if name != QUERY_CLUSTER})
            if sample:
                merge(out, {(day, app, QUERIES): merge_sample(sample, {})})
            merge(self._ring.setdefault((slot, app), {}), {("", app, name): found for name, found in rows.items()})
            self._newest = max(self._newest, slot)
        for key in [k for k in self._ring if k[0] <= self._newest - RECENT_SLOTS]:
            del self._ring[key]
        self._pending = {}
        self._last = {}
        return out

    def outbox(self) -> HeldDeltas:
        return HeldDeltas()

    def flush_due(self, held: HeldDeltas) -> bool:
        return False  # bounded: folded every `fold_every` events

    def recent(self, now: float, split: bool = False) -> dict[str, dict[str, Counts]]:
        """Each sub-day window's counts per app (`RECENT`): the whole slots before the one holding `now`
        (a window of the slot still filling would judge a few events at first, then more); with
        `split`, per `app|version` key (`counts_of`)."""
        self._fold()
        last = int(now // SLOT) - 1
        out: dict[str, dict[str, Counts]] = {}
        for name, seconds in RECENT:
            first = last - seconds // SLOT + 1
            rows: Deltas = {}
            for (slot, _), held in self._ring.items():
                if first <= slot <= last:
                    merge(rows, {key: dict(found) for key, found in held.items()})
            for (slot, app), (_, counts, _, _) in self._pending.items():
                if first <= slot <= last:
                    merge(rows, {("", app, n): found for n, found in self._rows_of(app, counts).items()})
            out[name] = counts_of(rows, split).get("", {})
        return out

    def _rows_of(self, app: str, counts: list[dict[Any, int]]) -> dict[str, dict[Any, Any]]:
        """A slot's rows (`_rows`) and, when it counted a numeric feature, the `GRIDS` row naming their grids."""
        rows = _rows(counts)
        app = app_version(app)[0]
        grids = {f: self.config.grids.grid(app, f).digest for f in FEATURES if f in rows}
        if grids:
            rows[GRIDS] = grids
        return rows

    def _slot(self, slot: int, app: str) -> tuple[Any, ...]:
        pending = self._pending.get((slot, app))
        if pending is None:
            pending = self._pending[(slot, app)] = (_empty(), [{} for _ in _SLOTS], {}, [])
        last = self._last[app] = (slot, app, *pending)
        return last

    def _iso(self, day: int) -> str:
        iso = self._days.get(day)
        if iso is None:
            if len(self._days) >= 64:
                self._days.clear()
            iso = self._days[day] = _iso(day)
        return iso

    def _fold(self) -> None:
        """Bin the buffered values into the counts, and empty the buffers."""
        grids = self.config.grids
        for (_, app), (b, counts, _, terms) in self._pending.items():
            if terms:
                if self.queries is not None:
                    _add(counts[_CLUSTER], self.queries.categories(terms))
                terms.clear()
            for i, feature in enumerate(FEATURES):
                if b[i]:
                    values = np.frombuffer(b[i], dtype=np.float64)
                    if i == _LAT:
                        values = values / 1000.0
                    grid = grids.grid(app_version(app)[0], feature)
                    # np.searchsorted(side="right") over the edges is Grid.index, for many values at once
                    dense = np.bincount(np.searchsorted(grid.edges, values, side="right"), minlength=grid.size)
                    cells = np.flatnonzero(dense)
                    found = dict(zip(cells.tolist(), dense[cells].tolist()))
                    if counts[i]:
                        _add(counts[i], found)
                    else:
                        counts[i] = found
            b[:] = _empty()
        self._buffered = 0


def _rows(counts: list[dict[Any, int]]) -> dict[str, dict[Any, Any]]:
    """A slot's counts by feature or mix, mixes keyed by their stored names (copies; empty ones left out)."""
    out = {}
    for i, (name, found) in enumerate(zip(_SLOTS, counts)):
        if i in (_QT, _LANG):
            found = {UNKNOWN if k is None else k: 0 for k in found}
            for k, n in counts[i].items():
                found[UNKNOWN if k is None else k] += n
        elif i == _FILT:
            found = {f"{f}:{status}": n for (f, status), n in found.items()}
        else:
            found = dict(found)
        if found:
            out[name] = found
    return out


def _empty() -> Buffers:
    return [array("d") for _ in FEATURES]


def _iso(day: int) -> str:
    return date.fromordinal(date(1970, 1, 1).toordinal() + day).isoformat()


def _add(into: dict[Any, int], counts: Mapping[Any, int]) -> None:
    for key, n in counts.items():
        into[key] = into.get(key, 0) + n


def merge(into: Deltas, delta: Deltas) -> None:
    """Add `delta` to `into` (both as `take` returns them); `delta`'s dicts may be taken over."""
    for row, counts in delta.items():
        held = into.get(row)
        if held is None:
            into[row] = counts
        elif row[2] == QUERIES:
            merge_sample(held, counts)
        elif row[2] == GRIDS:
            merge_grids(held, counts)
        else:
            _add(held, counts)


def app_version(key: str) -> tuple[str, str | None]:
    """A row's app and pipeline version label from its key (`app` or `app|version`)."""
    app, _, version = key.partition("|")
    return app, version if version else None


def counts_of(rows: Deltas, split: bool = False) -> dict[str, dict[str, Counts]]:
    """Deltas or stored rows as {ISO day: {app: Counts}}, what `freeze` and `evaluate` read: each app's
    versions summed, or with `split` each `app|version` key apart (`by_version` reads those)."""
    numeric_names = frozenset(FEATURES)
    days: dict[str, dict[str, tuple[dict[str, dict[int, int]], dict[str, dict[str, int]], dict[str, Any],
                                    dict[str, Any]]]] = {}
    for (day, app, name), counts in rows.items():
        if not split:
            app = app.partition("|")[0]
        numeric, mixes, queries, grids = days.setdefault(day, {}).setdefault(app, ({}, {}, {}, {}))
        if name == QUERIES:
            merge_sample(queries, {k: tuple(t) for k, t in counts.items()})
        elif name == GRIDS:
            merge_grids(grids, {str(f): str(g) for f, g in counts.items()})
        elif name in numeric_names:
            _add(numeric.setdefault(name, {}), {int(k): int(n) for k, n in counts.items()})
        else:
            _add(mixes.setdefault(name, {}), {str(k): int(n) for k, n in counts.items()})
    return {day: {app: Counts(numeric, mixes, queries, grids=grids) for app, (numeric, mixes, queries, grids) in apps.items()}
            for day, apps in sorted(days.items())}


def window(days: dict[str, dict[str, Counts]], split: bool = False) -> dict[str, Counts]:
    """Several days' counts summed per app (with `split`, per `app|version` key): one window for `evaluate`."""
    rows: Deltas = {}
    for apps in days.values():
        for app, counts in apps.items():
            for name, cells in counts.numeric.items():
                merge(rows, {("", app, name): dict(cast(Mapping[int, int], cells))})  # counts_of's are sparse
            for name, cats in counts.mixes.items():
                merge(rows, {("", app, name): dict(cats)})
            if counts.queries:
                merge(rows, {("", app, QUERIES): dict(counts.queries)})
            if counts.grids:
                merge(rows, {("", app, GRIDS): dict(counts.grids)})
    return counts_of(rows, split).get("", {})


def by_version(window: Mapping[str, Counts]) -> dict[str, dict[str, Counts]]:
    """A split window (`app|version` keys) as {version: {app: Counts}}, each version a window `evaluate`
    reads against the app's baseline; keys without a version (counted unsplit) are left out."""
    out: dict[str, dict[str, Counts]] = {}
    for key, counts in window.items():
        app, version = app_version(key)
        if version is not None:
            out.setdefault(version, {})[app] = counts
    return {version: out[version] for version in sorted(out)}


def recent_windows(partitions: Iterable[DriftDays], now: float, split: bool = False) -> dict[str, dict[str, Counts]]:
    """The sub-day windows of several partitions (`DriftDays`), summed per app (with `split`, per
    `app|version` key): what a replica evaluates."""
    held = [p.recent(now, split) for p in partitions]
    return {name: window({str(i): r[name] for i, r in enumerate(held)}, split) for name, _ in RECENT}
