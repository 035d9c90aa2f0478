"""The live release gate's rows in the store.

`ragdrift_live_days` holds one row per (group, UTC day, app, pipeline
version): the day's counts, sums and example event ids as JSON
(agent/core/compare/live.py, `empty_row`). `ragdrift_live_queries` holds one
row per (group, day, app, version, query id) of the sampled query ids. A
checkpoint adds each partition's rows to the stored ones in the transaction
that moves the offsets past the events, as the drift days do
(agent/io/store/drift.py): the missing rows inserted empty, the touched rows
read (FOR UPDATE on PostgreSQL, in key order, so replicas wait rather than
deadlock), the sums written back. Day and query rows older than
`retention_days` before the newest day written, or before today by the clock
if that is earlier, are deleted in the same transaction: a day written ahead
of the clock moves no cutoff.

A read can cap the compared queries before their rows are loaded: it streams
the window's distinct query ids alone past a heap per version that keeps the
`max_queries` with the lowest CRC-32 of the id (`query_hash`, the hash the
sampler keeps queries by), and loads the rows of those ids only. Each version
has its own cut, so a canary with a few queries keeps them all; below the
lower of the two cuts both versions keep every query, so the pairs there are
consistent (the verdict judges pairing under that cut). The hash is computed
here rather than stored, so the tables keep their columns.

A stored row that does not read back (not JSON, or not a row as `add_row`
writes it) is skipped by every read and handed to `Damaged` with its key; a
checkpoint adding to it sets it aside in the store (`ragdrift_set_aside_rows`)
and writes the delta in its place, so the row's new events are kept and the
rest of the checkpoint goes on. A row of a newer release's format is skipped
by reads and never written (agent/core/formats.py).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Column, LargeBinary, MetaData, String, Table, bindparam, delete, select, tuple_, update
from sqlalchemy.engine import Connection

from agent.core.compare.live import COUNTS, MEASURES, DayKey, HeldRows, QueryKey, add_row, empty_row, query_hash
from agent.core.formats import LIVE_GATE_ROWS, NewerRow, check_row
from agent.io.store.damaged import Damaged
from agent.io.store.database import StoreError

_DAYS = "ragdrift_live_days"
_QUERIES = "ragdrift_live_queries"
_CHUNK = 400  # keys per statement: well under every backend's limit on bound parameters


def days_table(metadata: MetaData) -> Table:
    return Table(
        _DAYS, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("day", String(10), primary_key=True),  # ISO date, UTC
        Column("app", String(255), primary_key=True),
        Column("version", String(128), primary_key=True),  # pipeline.version, "none" or "other"
        Column("counts", LargeBinary, nullable=False),  # the day row as JSON
    )


def queries_table(metadata: MetaData) -> Table:
    return Table(
        _QUERIES, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("day", String(10), primary_key=True),
        Column("app", String(255), primary_key=True),
        Column("version", String(128), primary_key=True),
        Column("query_id", String(128), primary_key=True),
        Column("counts", LargeBinary, nullable=False),  # the query row as JSON
    )


TABLES = (days_table, queries_table)


class LiveGateStore:
    """Reads and writes of the live gate's tables, on a store opened with `TABLES`."""

    def __init__(self, store, *, examples: int = 5, retention_days: int = 35, clock: Callable[[], float] = time.time,
                 damaged: Damaged | None = None):
        self.store = store
        self.damaged = Damaged() if damaged is None else damaged
        self.examples = examples
        self.retention_days = retention_days
        self.clock = clock
        self.days = store.joined(_DAYS)
        self.queries = store.joined(_QUERIES)

    def writes(self, group_id: str, held: Iterable[HeldRows]):
        """A joined write adding the partitions' rows to the stored ones (see Store.save)."""
        days: dict[DayKey, dict[str, Any]] = {}
        queries: dict[QueryKey, dict[str, Any]] = {}
        for rows in held:  # copied: the outboxes stay as they are until the checkpoint commits
            for key, row in rows.days.items():
                add_row(days.setdefault(key, empty_row()), row, self.examples)
            for qkey, row in rows.queries.items():
                add_row(queries.setdefault(qkey, empty_row(labels=True)), row, self.examples)

        def write(conn: Connection) -> None:
            self._add(conn, self.days, group_id, days, ("day", "app", "version"))
            self._add(conn, self.queries, group_id, queries, ("day", "app", "version", "query_id"))
            if days:
                newest = min(date.fromisoformat(max(day for day, _, _ in days)), today(self.clock()))
                oldest = (newest - timedelta(days=self.retention_days)).isoformat()
                for table in (self.queries, self.days):
                    c = table.c
                    conn.execute(delete(table).where(c.group_id == group_id, c.day < oldest))

        return write

    def _add(self, conn: Connection, table: Table, group_id: str, rows: Mapping[tuple, dict[str, Any]],
             names: tuple[str, ...]) -> None:
        keys = sorted(rows)
        c = table.c
        labels = len(names) == 4
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i:i + _CHUNK]
            empty = orjson.dumps(empty_row(labels=labels))
            conn.execute(self.store.insert(table).on_conflict_do_nothing(), [
                {"group_id": group_id, **dict(zip(names, key)), "counts": empty} for key in chunk])
            columns = [c[name] for name in names]
            query = (select(*columns, c.counts).where(c.group_id == group_id, tuple_(*columns).in_(chunk))
                     .order_by(*columns))
            found = conn.execute(query.with_for_update() if self.store.postgres else query)
            stored = self._for_update(conn, table, group_id, ((tuple(r[:-1]), r[-1]) for r in found), labels)
            params = []
            for key in chunk:
                row = stored.get(key) or empty_row(labels=labels)  # a damaged row (set aside): the delta in its place
                add_row(row, rows[key], self.examples)
                params.append({**{f"k_{n}": v for n, v in zip(names, key)}, "g": group_id,
                               "new": orjson.dumps(row)})
            conn.execute(update(table).where(c.group_id == bindparam("g"),
                                             *[c[n] == bindparam(f"k_{n}") for n in names])
                         .values(counts=bindparam("new")), params)

    def stored(self, group_id: str, first: str, last: str, app: str | None = None,
               versions: tuple[str, ...] | None = None, max_queries: int | None = None
               ) -> tuple[dict[DayKey, dict[str, Any]], dict[QueryKey, dict[str, Any]]]:
        """The day rows and query rows from `first` to `last` (ISO days, inclusive), of one app or all;
        with `versions` only their query rows, with `max_queries` those of at most that many queries
        of each (the lowest hashes, each version its own cut)."""
        return self.day_rows(group_id, first, last, app), self.query_rows(group_id, first, last, app, versions,
                                                                          max_queries)

    def query_rows(self, group_id: str, first: str, last: str, app: str | None = None,
                   versions: tuple[str, ...] | None = None, max_queries: int | None = None,
                   other_than: Collection[str] = ()) -> dict[QueryKey, dict[str, Any]]:
        """The query rows of `stored`; with `other_than` (and no `app`) those of every app but these."""
        q = self.queries.c
        where = self._where(q, group_id, first, last, app)
        if other_than:
            where.append(q.app.not_in(other_than))
        if versions is not None:
            where.append(q.version.in_(versions))
        columns = (q.day, q.app, q.version, q.query_id, q.counts)
        if versions is None or max_queries is None:
            rows = self.store.read(select(*columns).where(*where))
        else:
            kept = sorted(self._capped(where, max_queries))
            rows = []
            for i in range(0, len(kept), _CHUNK):
                rows += self.store.read(select(*columns).where(
                    *where, tuple_(q.version, q.app, q.query_id).in_(kept[i:i + _CHUNK])))
        return self._decoded(self.queries, (((r.day, r.app, r.version, r.query_id), r.counts) for r in rows), True)

    def day_rows(self, group_id: str, first: str, last: str, app: str | None = None) -> dict[DayKey, dict[str, Any]]:
        """The day rows from `first` to `last` (ISO days, inclusive), of one app or all."""
        rows = self.store.read(select(self.days).where(*self._where(self.days.c, group_id, first, last, app)))
        return self._decoded(self.days, (((r.day, r.app, r.version), r.counts) for r in rows), False)

    def _decoded(self, table: Table, rows: Iterable[tuple[Any, bytes]], labels: bool) -> dict[Any, dict[str, Any]]:
        """{key: row} of stored (key, JSON) pairs, a damaged row skipped and handed to `damaged`."""
        out = {}
        for key, raw in rows:
            try:
                out[key] = _row(raw, labels)
            except NewerRow:
                self.damaged.skip(table.name, key, newer=True)
            except ValueError:
                self.damaged.skip(table.name, key)
        return out

    def _for_update(self, conn: Connection, table: Table, group_id: str, rows: Iterable[tuple[Any, bytes]],
                    labels: bool) -> dict[Any, dict[str, Any]]:
        """The stored rows a checkpoint adds to. A damaged one is set aside first; one of a newer format
        fails the checkpoint (`StoreError`): adding to it would lose what this release cannot read."""
        out = {}
        for key, raw in rows:
            try:
                out[key] = _row(raw, labels)
            except NewerRow:
                raise StoreError(f"{table.name} row {key!r} is of a newer release's format: this release does "
                                 "not add to it (a replica of that release will)") from None
            except ValueError:
                self.store.set_aside_row(conn, table.name, (group_id, *key), raw)
                self.damaged.skip(table.name, key)
        return out

    def _where(self, c, group_id: str, first: str, last: str, app: str | None) -> list:
        return [c.group_id == group_id, c.day >= first, c.day <= last, *([c.app == app] if app is not None else [])]

    def _capped(self, where: list, max_queries: int) -> set[tuple[str, str, str]]:
        """The (version, app, query id) kept: each version's `max_queries` with the lowest hashes, its own
        cut, so a small canary keeps its queries beside a large stable version. The distinct ids stream
        past a heap per version, so memory follows the cap, not the window's queries."""
        q = self.queries.c

        def lowest(rows: Iterable[Any]) -> set[tuple[str, str, str]]:
            heaps: dict[str, list[tuple[int, str, str]]] = {}  # per version, the kept ids, highest hash first
            for r in rows:
                heap = heaps.setdefault(r.version, [])
                item = (-query_hash(r.query_id), r.app, r.query_id)
                if len(heap) < max_queries:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)
            return {(v, a, query) for v, heap in heaps.items() for _, a, query in heap}

        found: set[tuple[str, str, str]] = self.store.scan(select(q.version, q.app, q.query_id).where(*where).distinct(),
                                                      lowest)
        return found

    def last_day(self, group_id: str, app: str | None = None, until: str | None = None) -> str | None:
        """The newest day with rows (of one app or all), not after `until`."""
        d = self.days.c
        query = select(d.day).where(d.group_id == group_id).order_by(d.day.desc()).limit(1)
        if app is not None:
            query = query.where(d.app == app)
        if until is not None:
            query = query.where(d.day <= until)
        rows = self.store.read(query)
        return rows[0].day if rows else None


def _row(raw: bytes, labels: bool) -> dict[str, Any]:
    """A stored row as `add_row` writes it, or ValueError: not JSON (NaN and the infinities are not),
    or another shape (`labels`: a query row's)."""
    row = orjson.loads(raw)
    check_row(row, LIVE_GATE_ROWS)
    if not (isinstance(row, dict)
            and all(type(row.get(name)) is int for name in COUNTS)
            and all(_measure(row.get(name)) for name in MEASURES)
            and (all(isinstance(row.get(label), str | None) for label in ("query_type", "language")) if labels
                 else _examples(row.get("examples")))):
        raise ValueError("not a live gate row")
    return row


def _measure(value: object) -> bool:
    """A measure's [sum, count]."""
    return (isinstance(value, list) and len(value) == 2 and type(value[0]) in (int, float)
            and type(value[1]) is int)


def _examples(value: object) -> bool:
    """A day row's example event ids per gate."""
    return isinstance(value, dict) and all(
        isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in value.values())


def today(now: float) -> date:
    """The UTC day of `now`."""
    return datetime.fromtimestamp(now, UTC).date()
