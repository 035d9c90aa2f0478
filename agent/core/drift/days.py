"""What each event adds to the daily drift counts, per partition, as deltas.

Per (UTC day of the event time, app) a partition counts each numeric
feature's values on its fine grid (`Grids`) and each mix's categories
(docs/drift.md). Counts only add, so what `take` returns since its last call
is an exact delta: the checkpoint that moves the offsets past the events adds
it to the stored counts (`count = count + delta`), which makes the stored
days exactly once, summed over partitions and replicas. Between checkpoints
only the deltas are held; a restored partition starts with none.

Values come from the event's `Facts`, raw (not the metrics' bounded label
sets, which depend on what each partition saw first): the counts do not
depend on how the stream was partitioned.

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

`query_cluster` is not counted yet.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import date

from agent.core.drift.baseline import Counts
from agent.core.drift.features import (
    CONTENT_AGE,
    FEATURES,
    FILTER_OUTCOME,
    LANGUAGE,
    LATENCY,
    MEAN_SCORE,
    PARENT_DIVERSITY,
    QUERY_TYPE,
    RESULT_COUNT,
    SCORE_GAP,
    SOURCE,
    TOP1_SCORE,
    Grids,
)
from agent.core.facts import Facts

DAY = 86400
UNKNOWN = "unknown"
COUNTED_MIXES = (SOURCE, QUERY_TYPE, LANGUAGE, FILTER_OUTCOME)
_SLOTS = FEATURES + COUNTED_MIXES  # one dict of counts per name, in this order
_T1, _MEAN, _GAP, _AGE, _COUNT, _LAT, _DIV = (FEATURES.index(f) for f in (
    TOP1_SCORE, MEAN_SCORE, SCORE_GAP, CONTENT_AGE, RESULT_COUNT, LATENCY, PARENT_DIVERSITY))
_SRC, _QT, _LANG, _FILT = (len(FEATURES) + COUNTED_MIXES.index(m) for m in COUNTED_MIXES)

Key = tuple[str, str]  # (ISO day, app)
Row = tuple[str, str, str, str]  # (ISO day, app, feature or mix, fine cell as text or category)


@dataclass(frozen=True)
class DriftConfig:
    grids: Grids = field(default_factory=Grids)


class DriftDays:
    """One partition's daily drift counts since the last `take`."""

    __slots__ = ("config", "_pending", "_edges", "_days", "_last")

    def __init__(self, config: DriftConfig = DriftConfig()):
        self.config = config
        self._pending: dict[Key, list[dict]] = {}
        self._edges: dict[str, tuple[list[float], ...]] = {}  # app -> each feature's grid edges, as lists
        self._days: dict[int, str] = {}  # day number -> ISO date, memoized
        self._last: tuple[int, str, list[dict]] | None = None  # the (day, app) the last event went to

    def observe(self, facts: Facts) -> None:
        event = facts.event
        app = event.app
        day = int(facts.ts // DAY)
        last = self._last
        if last is not None and last[0] == day and last[1] == app:
            slots = last[2]
        else:
            slots = self._slots(day, app)
        edges = self._edges.get(app) or self._grids(app)
        x = facts.top1
        if x is not None:
            _inc(slots[_T1], bisect_right(edges[_T1], x))
        x = facts.admitted_score
        if x is not None:
            _inc(slots[_MEAN], bisect_right(edges[_MEAN], x))
        x = facts.gap
        if x is not None:
            _inc(slots[_GAP], bisect_right(edges[_GAP], x))
        ages = facts.ages
        if ages:
            c, e = slots[_AGE], edges[_AGE]
            for x in ages:
                _inc(c, bisect_right(e, x))
        _inc(slots[_COUNT], bisect_right(edges[_COUNT], len(event.results)))
        x = event.latency_ms
        if x is not None:
            _inc(slots[_LAT], bisect_right(edges[_LAT], x / 1000.0))
        admitted = len(facts.admitted)
        if admitted:
            _inc(slots[_DIV], bisect_right(edges[_DIV], len(facts.parents) / admitted))
            c = slots[_SRC]
            for source, n in facts.sources.items():
                c[source] = c.get(source, 0) + n
        query = event.query
        _inc(slots[_QT], query.type or UNKNOWN)
        _inc(slots[_LANG], query.language or UNKNOWN)
        filters = event.filters
        if filters:
            c = slots[_FILT]
            for f in filters:
                _inc(c, f"{f.name}:{f.status}")

    def take(self) -> dict[Row, int]:
        """The counts added since the last call, one per (day, app, feature, cell or category)."""
        out = {}
        for (day, app), slots in self._pending.items():
            for name, counts in zip(_SLOTS, slots):
                for key, n in counts.items():
                    out[(day, app, name, str(key))] = n
        self._pending = {}
        self._last = None
        return out

    def _slots(self, day: int, app: str) -> list[dict]:
        iso = self._days.get(day)
        if iso is None:
            if len(self._days) >= 64:
                self._days.clear()
            iso = self._days[day] = _iso(day)
        slots = self._pending.get((iso, app))
        if slots is None:
            slots = self._pending[(iso, app)] = [{} for _ in _SLOTS]
        self._last = (day, app, slots)
        return slots

    def _grids(self, app: str) -> tuple[list[float], ...]:
        if len(self._edges) >= 1024:
            self._edges.clear()
        grids = self.config.grids
        # bisect_right over the edges is Grid.index (np.searchsorted, side="right"), without numpy per value.
        edges = self._edges[app] = tuple(grids.grid(app, f).edges.tolist() for f in FEATURES)
        return edges


def _inc(counts: dict, key) -> None:
    counts[key] = counts.get(key, 0) + 1


def _iso(day: int) -> str:
    return date.fromordinal(date(1970, 1, 1).toordinal() + day).isoformat()


def merge(into: dict[Row, int], delta: dict[Row, int]) -> None:
    """Add `delta` to `into` (both as `take` returns them)."""
    for row, n in delta.items():
        into[row] = into.get(row, 0) + n


def counts_of(rows: dict[Row, int]) -> dict[str, dict[str, Counts]]:
    """Rows (stored or taken) as {ISO day: {app: Counts}}, what `freeze` and `evaluate` read."""
    numeric_names = frozenset(FEATURES)
    days: dict[str, dict[str, tuple[dict, dict]]] = {}
    for (day, app, name, key), n in rows.items():
        numeric, mixes = days.setdefault(day, {}).setdefault(app, ({}, {}))
        if name in numeric_names:
            cells = numeric.setdefault(name, {})
            cells[int(key)] = cells.get(int(key), 0) + n
        else:
            cats = mixes.setdefault(name, {})
            cats[key] = cats.get(key, 0) + n
    return {day: {app: Counts(n, m) for app, (n, m) in apps.items()} for day, apps in days.items()}


def window(days: dict[str, dict[str, Counts]]) -> dict[str, Counts]:
    """Several days' counts summed per app: one window for `evaluate`."""
    rows: dict[Row, int] = {}
    for day, apps in days.items():
        for app, counts in apps.items():
            for name, cells in counts.to_dict()["numeric"].items():
                for key, n in cells.items():
                    merge(rows, {("w", app, name, key): n})
            for name, cats in counts.mixes.items():
                for key, n in cats.items():
                    merge(rows, {("w", app, name, key): n})
    return counts_of(rows).get("w", {})
