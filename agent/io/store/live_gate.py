"""The live release gate's rows in the store.

`ragdrift_live_days` holds one row per (group, UTC day, app, pipeline
version): the day's counts, sums and example event ids as JSON
(agent/core/compare/live.py, `empty_row`). `ragdrift_live_queries` holds one
row per (group, day, app, version, query id) of the sampled query ids. A
checkpoint adds each partition's rows to the stored ones in the transaction
that moves the offsets past the events, as the drift days do
(agent/io/store/drift.py): the missing rows inserted empty, the touched rows
read (FOR UPDATE on PostgreSQL, in key order, so replicas wait rather than
deadlock), the sums written back. Query rows older than `retention_days`
before the newest day written are deleted in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, timedelta
from typing import Any

import orjson
from sqlalchemy import Column, LargeBinary, MetaData, String, Table, bindparam, delete, select, tuple_, update
from sqlalchemy.engine import Connection

from agent.core.compare.live import DayKey, HeldRows, QueryKey, add_row, empty_row

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

    def __init__(self, store, examples: int = 5, retention_days: int = 35):
        self.store = store
        self.examples = examples
        self.retention_days = retention_days
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
                newest = date.fromisoformat(max(day for day, _, _ in days))
                oldest = (newest - timedelta(days=self.retention_days)).isoformat()
                q = self.queries.c
                conn.execute(delete(self.queries).where(q.group_id == group_id, q.day < oldest))

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
            stored = {tuple(r[:-1]): orjson.loads(r[-1]) for r in found}
            params = []
            for key in chunk:
                row = stored[key]
                add_row(row, rows[key], self.examples)
                params.append({**{f"k_{n}": v for n, v in zip(names, key)}, "g": group_id,
                               "new": orjson.dumps(row)})
            conn.execute(update(table).where(c.group_id == bindparam("g"),
                                             *[c[n] == bindparam(f"k_{n}") for n in names])
                         .values(counts=bindparam("new")), params)

    def stored(self, group_id: str, first: str, last: str, app: str | None = None
               ) -> tuple[dict[DayKey, dict[str, Any]], dict[QueryKey, dict[str, Any]]]:
        """The day rows and query rows from `first` to `last` (ISO days, inclusive), of one app or all."""
        out: list[dict] = []
        for table in (self.days, self.queries):
            c = table.c
            query = select(table).where(c.group_id == group_id, c.day >= first, c.day <= last)
            if app is not None:
                query = query.where(c.app == app)
            rows = self.store.read(query)
            if table is self.days:
                out.append({(r.day, r.app, r.version): orjson.loads(r.counts) for r in rows})
            else:
                out.append({(r.day, r.app, r.version, r.query_id): orjson.loads(r.counts) for r in rows})
        return out[0], out[1]

    def last_day(self, group_id: str) -> str | None:
        d = self.days.c
        rows = self.store.read(select(d.day).where(d.group_id == group_id).order_by(d.day.desc()).limit(1))
        return rows[0].day if rows else None
