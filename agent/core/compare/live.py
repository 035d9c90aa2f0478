"""What each event adds to the live release gate's rows, per partition, as deltas.

Two kinds of rows, both additive, so what `take` returns since its last call
is an exact delta and the checkpoint that moves the offsets past the events
adds it to the stored rows (exactly once, summed over partitions and
replicas), as the drift days do:

- a day row per (UTC day of the event time, app, pipeline version): events,
  zero results, filter-caused zero results, events with an unauthorized
  result, events with a stale conflict, and sum and count of each per-event
  measure (`MEASURES`); with the smallest `examples` event ids of each hard
  gate (`GATES`: a union keeping the smallest ids, so a replayed event adds
  nothing and any order of merging keeps the same ids).
- a query row per (day, app, version, query.id) for the query ids a hash
  keeps (`sample_rate`): the same counts and sums for that query, and its
  type and language. The hash is of the query id alone, so both versions
  keep the same queries and the gate can pair them.

Per-event measures: top-1 score; content age, the mean age in days of the
admitted results with one; source concentration, the HHI of the admitted
results' sources (sum of squared shares); latency in seconds. Each is
counted only where the event defines it.

The version is the event's `pipeline.version` (`none` without one). With
`versions` configured only those are counted; otherwise a partition gives
each app `max_versions` places on each UTC day (of the event time), taken by
the first versions it sees, and counts the rest as `OTHER`. A place is taken
while its version serves: one with no event for `IDLE` seconds of the
partition's time (the windows' watermark, `Context.watermark`: the newest
event time, never past its write time, so older or replayed events move it
not; without a context, the event's own time) gives its place to the next
new version, on the day of the partition's time only, so a canary launched
on a busy app is counted by name within the hour. Its rows keep its name
(what it counted is never moved into another's; `take` returns them), and if
it comes back it is a new version again. So a producer
sending thousands of versions adds at most `max_versions` rows an app at a
time and `max_versions` x (1 + DAY / IDLE) a day. A partition holds the
versions of 8 days; an event dated before the oldest of them counts as
`OTHER`, so old or hostile timestamps cannot learn new names for days
already forgotten. Events dated further ahead of their write time than
`windows.max_future_seconds` are not counted (the metric families decide,
`Context.future`): one wrong clock must not make a day row in the future.
Queries held between checkpoints are bounded by `max_held_queries`: beyond
it `flush_due` asks for a checkpoint.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from agent.core.facts import Facts
from agent.core.feature import Context, KeptAsRows
from agent.core.labels import OTHER
from agent.core.pipelines import NO_VERSION, version_of

DAY = 86400
MEASURES = ("top1_score", "content_age_days", "source_concentration", "latency_seconds")
GATES = ("unauthorized", "stale_conflict", "filter_zero")
COUNTS = ("events", "zero", *GATES)  # per day row; per query row only the first two are used
_SLOTS = len(COUNTS) + 2 * len(MEASURES)  # the counts, then (sum, n) of each measure
_SEEN = _SLOTS  # a day row's extra slot: the partition's time at its last event
_T1, _AGE, _HHI, _LAT = (len(COUNTS) + 2 * i for i in range(len(MEASURES)))
_SPACE = 1 << 32
_DAYS_HELD = 8  # days whose versions a partition holds at once
IDLE = 3600  # seconds of the partition's time without an event after which a version gives its place up
_NO_APPS: dict[str, dict[str, float]] = {}  # read, never written: a day without versions yet

DayKey = tuple[str, str, str]  # (ISO day, app, version)
QueryKey = tuple[str, str, str, str]  # (ISO day, app, version, query id)


@dataclass(frozen=True, kw_only=True)
class LiveConfig:
    versions: tuple[str, ...] = ()  # the versions counted; empty: any, bounded by max_versions
    max_versions: int = 8  # places per app and day for versions counted by name
    sample_rate: float = 1.0  # share of query ids whose query rows are kept
    examples: int = 5  # event ids kept per day, app, version and gate
    max_held_queries: int = 50_000  # query rows held between checkpoints before one is asked for

    def partition(self) -> VersionCounts:
        return VersionCounts(self)

    def sampled(self, query_id: str) -> bool:
        """Whether the query's rows are kept: by a hash of its id alone, the same for every version."""
        return self.sample_rate >= 1.0 or query_hash(query_id) < self.sample_rate * _SPACE


def query_hash(query_id: str) -> int:
    """The hash queries are kept by, here and where the compared queries are cut (CRC-32 of the id)."""
    return zlib.crc32(query_id.encode())


def empty_row(labels: bool = False) -> dict[str, Any]:
    """A day row (or with `labels` a query row) with nothing counted, as stored."""
    row: dict[str, Any] = dict.fromkeys(COUNTS, 0)
    row.update({name: [0.0, 0] for name in MEASURES})
    if labels:
        row.update(query_type=None, language=None)
    else:
        row["examples"] = {gate: [] for gate in GATES}
    return row


def add_row(into: dict[str, Any], delta: Mapping[str, Any], examples: int) -> None:
    """Add a delta row to a stored (or held) one: counts and sums add, examples keep the smallest ids,
    labels are the delta's where it has them."""
    for name in COUNTS:
        into[name] = into.get(name, 0) + delta.get(name, 0)
    for name in MEASURES:
        s, n = into.get(name, (0.0, 0))
        ds, dn = delta.get(name, (0.0, 0))
        into[name] = [s + ds, n + dn]
    if "examples" in delta:
        held = into.setdefault("examples", {})
        for gate, ids in delta["examples"].items():
            held[gate] = sorted(set(held.get(gate, ())) | set(ids))[:examples]
    for label in ("query_type", "language"):
        if delta.get(label) is not None:
            into[label] = delta[label]


class HeldRows:
    """Rows taken from a partition, held until a checkpoint adds them to the stored ones (`Pending`)."""

    __slots__ = ("days", "queries", "examples")

    def __init__(self, examples: int = 5) -> None:
        self.days: dict[DayKey, dict[str, Any]] = {}
        self.queries: dict[QueryKey, dict[str, Any]] = {}
        self.examples = examples

    def absorb(self, taken: tuple[dict[DayKey, dict[str, Any]], dict[QueryKey, dict[str, Any]]]) -> None:
        days, queries = taken
        for key, row in days.items():
            add_row(self.days.setdefault(key, {}), row, self.examples)
        for qkey, row in queries.items():
            add_row(self.queries.setdefault(qkey, {}), row, self.examples)

    def clear(self) -> None:
        self.days.clear()
        self.queries.clear()


class VersionCounts(KeptAsRows):
    """One partition's live gate rows since the last `take` (a `PartitionFeature`)."""

    __slots__ = ("config", "_days", "_queries", "_examples", "_labels", "_versions", "_gave_up", "_iso")
    name = "live_gate"
    reads = frozenset({"app", "future", "watermark"})
    writes: frozenset[str] = frozenset()

    def __init__(self, config: LiveConfig = LiveConfig()) -> None:
        self.config = config
        self._days: dict[tuple[int, str, str], list[float]] = {}
        self._queries: dict[tuple[int, str, str, str], list[float]] = {}
        self._examples: dict[tuple[int, str, str], dict[str, list[str]]] = {}
        self._labels: dict[tuple[int, str, str, str], tuple[str | None, str | None]] = {}
        # UTC day -> app -> the versions holding a place, each with the partition's time at its last event
        # as of the last `take` (a day row held since has the later one, `_SEEN`)
        self._versions: dict[int, dict[str, dict[str, float]]] = {}
        self._gave_up: list[tuple[tuple[int, str, str], list[float]]] = []  # day rows of versions that gave up
        self._iso: dict[int, str] = {}

    def observe(self, facts: Facts, ctx: Context) -> None:
        if ctx.future:
            return
        event = facts.event
        version = version_of(event) or NO_VERSION
        ts = facts.ts
        now = ctx.watermark or ts  # the partition's time
        day = int(ts // DAY)
        app = ctx.app
        key = (day, app, version)
        row = self._days.get(key)
        if row is None:  # the version's first event since the last `take`, or one without a place
            if self.config.versions:
                if version not in self.config.versions:
                    return
            else:
                held = self._versions.get(day, _NO_APPS).get(app)
                if held is None or version not in held:
                    version = self._learned(day, app, version, now)
                    key = (day, app, version)
            row = self._days.get(key)
            if row is None:
                row = self._days[key] = [0.0] * (_SLOTS + 1)
        row[_SEEN] = now
        flags = (not event.results, bool(facts.unauthorized), facts.stale_conflict, facts.filter_zero)
        values = _measures(facts)
        _count(row, flags[0], values)
        for i, (gate, hit) in enumerate(zip(GATES, flags[1:]), 2):
            if hit:
                row[i] += 1
                self._example(key, gate, event.event_id)
        query = event.query
        if self.config.sampled(query.id):
            qkey = (day, app, version, query.id)
            qrow = self._queries.get(qkey)
            if qrow is None:
                qrow = self._queries[qkey] = [0.0] * _SLOTS
            _count(qrow, flags[0], values)
            self._labels[qkey] = (query.type, query.language)

    def _learned(self, day: int, app: str, version: str, now: float) -> str:
        """The version's name, given a place of the app's that day (a free one, or on the partition's
        current day, `now`, one whose version has had no event for `IDLE` seconds), or `OTHER`."""
        apps = self._versions.get(day)
        if apps is None:
            if len(self._versions) >= _DAYS_HELD:  # the oldest day forgotten; days before it learn nothing
                oldest = min(self._versions)
                if day < oldest:
                    return OTHER
                del self._versions[oldest]
            apps = self._versions[day] = {}
        held = apps.setdefault(app, {})
        if len(held) >= self.config.max_versions:
            if day != int(now // DAY):
                return OTHER

            def seen(v: str) -> float:
                row = self._days.get((day, app, v))
                return held[v] if row is None else row[_SEEN]

            idle = min(held, key=seen)  # the longest without an event
            if seen(idle) > now - IDLE:
                return OTHER
            del held[idle]
            row = self._days.pop((day, app, idle), None)  # out of the way of its next event: no place
            if row is not None:
                self._gave_up.append(((day, app, idle), row))
        held[version] = now
        return version

    def _example(self, key: tuple[int, str, str], gate: str, event_id: str) -> None:
        held = self._examples.setdefault(key, {}).setdefault(gate, [])
        if event_id not in held:
            held.append(event_id)
            if len(held) > self.config.examples:
                held.sort()
                del held[self.config.examples:]

    def take(self) -> tuple[dict[DayKey, dict[str, Any]], dict[QueryKey, dict[str, Any]]]:
        """The rows added since the last call: ({(day, app, version): row}, {(day, app, version, query): row})."""
        for (d, app, v), found in self._days.items():  # each place's last event, for `_learned`
            held = self._versions.get(d, _NO_APPS).get(app)
            if held is not None and v in held:
                held[v] = found[_SEEN]
        days: dict[DayKey, dict[str, Any]] = {}
        for (d, app, v), found in [*self._gave_up, *self._days.items()]:
            row = _row(found, self._examples.get((d, app, v)))
            key = (self._day(d), app, v)
            if key in days:  # a version that gave its place up and took one again: its rows add up
                add_row(days[key], row, self.config.examples)
            else:
                days[key] = row
        queries = {}
        for (d, app, v, q), found in self._queries.items():
            row = _row(found, None)
            row["query_type"], row["language"] = self._labels[(d, app, v, q)]
            queries[(self._day(d), app, v, q)] = row
        self._days, self._queries, self._examples, self._labels, self._gave_up = {}, {}, {}, {}, []
        return days, queries

    def outbox(self) -> HeldRows:
        return HeldRows(self.config.examples)

    def flush_due(self, held: HeldRows) -> bool:
        return len(self._queries) + len(held.queries) >= self.config.max_held_queries

    def _day(self, day: int) -> str:
        iso = self._iso.get(day)
        if iso is None:
            if len(self._iso) >= 64:
                self._iso.clear()
            iso = self._iso[day] = date.fromordinal(date(1970, 1, 1).toordinal() + day).isoformat()
        return iso


def _measures(facts: Facts) -> tuple[float | None, ...]:
    """The event's value of each of `MEASURES`, None where it has none."""
    ages = facts.ages
    admitted = len(facts.admitted)
    latency = facts.event.latency_ms
    return (
        facts.top1,
        sum(ages) / len(ages) if ages else None,
        sum((n / admitted) ** 2 for n in facts.sources.values()) if admitted else None,
        None if latency is None else latency / 1000.0,
    )


def _count(row: list[float], zero: bool, values: tuple[float | None, ...]) -> None:
    row[0] += 1
    if zero:
        row[1] += 1
    for i, value in zip((_T1, _AGE, _HHI, _LAT), values):
        if value is not None:
            row[i] += value
            row[i + 1] += 1


def _row(found: list[float], examples: Mapping[str, list[str]] | None) -> dict[str, Any]:
    row: dict[str, Any] = {name: int(found[i]) for i, name in enumerate(COUNTS)}
    for j, name in enumerate(MEASURES):
        i = len(COUNTS) + 2 * j
        row[name] = [found[i], int(found[i + 1])]
    if examples is not None:
        row["examples"] = {gate: sorted(ids) for gate, ids in examples.items()}
    return row
