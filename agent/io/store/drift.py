"""The daily drift counts and the frozen baselines, as rows in the store.

`ragdrift_drift_days` holds one row per (group, UTC day, app, feature or mix),
its app `app|version` for days counted split by pipeline version
(agent/core/drift/days.py):
its sparse counts as JSON ({"cell": n} or {"category": n}), or for
`query_terms` the day's bottom-k sample of hashed query terms ({"key": [terms]},
merged by union: agent/core/drift/queries.py), or for `grids` the digest of the
grid each numeric feature was counted on ({"feature": digest}; a second grid in
the same day makes it "mixed"). Days stored before grids were recorded have no
`grids` row: they load as before, their grid unknown. A checkpoint adds
each partition's deltas (agent/core/drift/days.py) to the stored counts in the
transaction that moves the offsets past the events, so every event is counted
exactly once, summed over partitions and replicas. The add is a read-modify-
write under row locks, in three statements per checkpoint whatever the number
of rows: the missing rows are inserted empty (one multi-row insert), the
group's rows of the days touched are read FOR UPDATE on PostgreSQL (one
select, locking them in sorted order, so replicas adding to the same days wait
for each other instead of deadlocking), and the new counts are written back
(one update, executed for many rows). A stored row that does not read back
(not JSON, or not counts of its feature's kind) is skipped by every read and
handed to `Damaged` with its key; a checkpoint adding to it sets it aside in
the store (`ragdrift_set_aside_rows`) and writes the delta in its place, so
its new events are kept and the rest of the checkpoint goes on. A row of a
newer release's format, or of a feature this release does not know, is
skipped by reads and never written (agent/core/formats.py).

`ragdrift_baselines` holds each frozen baseline's canonical JSON under (name,
version). Rows are never changed: freezing a name again from other days adds
a new version of it, and the same days give the same version (stored once).
The newest version of a name is the one `ragdrift drift` uses.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from sqlalchemy import Column, Float, LargeBinary, MetaData, String, Table, bindparam, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from agent.core.drift import Baseline
from agent.core.drift.days import Deltas, counts_of, merge
from agent.core.drift.features import FEATURES, GRIDS, MIXES, merge_grids
from agent.core.drift.queries import QUERIES, merge_sample
from agent.core.formats import DRIFT_DAY_ROWS, NewerRow, check_row
from agent.io.store.damaged import Damaged
from agent.io.store.database import StoreError

_DAYS = "ragdrift_drift_days"
_BASELINES = "ragdrift_baselines"
_KINDS = frozenset({*FEATURES, *MIXES, QUERIES, GRIDS})  # the rows this release reads and writes


def days_table(metadata: MetaData) -> Table:
    return Table(
        _DAYS, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("day", String(10), primary_key=True),  # ISO date, UTC
        Column("app", String(255), primary_key=True),
        Column("feature", String(64), primary_key=True),  # a numeric feature or a mix
        Column("counts", LargeBinary, nullable=False),  # {"cell or category": count} as JSON
    )


def baselines_table(metadata: MetaData) -> Table:
    return Table(
        _BASELINES, metadata,
        Column("name", String(255), primary_key=True),
        Column("version", String(16), primary_key=True),
        Column("created_at", Float, nullable=False),
        Column("baseline", LargeBinary, nullable=False),  # Baseline.to_json()
    )


TABLES = (days_table, baselines_table)


@dataclass(frozen=True, kw_only=True)
class StoredBaseline:
    name: str
    version: str
    created_at: float
    days: tuple[str, ...]
    apps: tuple[str, ...]


class DriftStore:
    """Reads and writes of the drift tables, on a store opened with `TABLES`."""

    def __init__(self, store, damaged: Damaged | None = None):
        self.store = store
        self.damaged = Damaged() if damaged is None else damaged
        self.days = store.joined(_DAYS)
        self.baselines = store.joined(_BASELINES)

    def writes(self, group_id: str, deltas: Iterable[Deltas]):
        """A joined write adding the partitions' deltas to the stored counts (see Store.save)."""
        total: Deltas = {}
        for delta in deltas:
            merge(total, {row: dict(counts) for row, counts in delta.items()})  # the outboxes stay as they are
        keys = sorted(total)

        def write(conn: Connection) -> None:
            if not keys:
                return
            d = self.days.c
            conn.execute(self.store.insert(self.days).on_conflict_do_nothing(), [
                {"group_id": group_id, "day": day, "app": app, "feature": feature, "counts": b"{}"}
                for day, app, feature in keys
            ])
            query = (select(d.day, d.app, d.feature, d.counts)
                     .where(d.group_id == group_id, d.day.in_(sorted({day for day, _, _ in keys})))
                     .order_by(d.day, d.app, d.feature))
            found = conn.execute(query.with_for_update() if self.store.postgres else query)
            stored = self._for_update(conn, group_id, [((r.day, r.app, r.feature), r.counts) for r in found
                                                       if (r.day, r.app, r.feature) in total])
            rows = []
            for day, app, feature in keys:
                counts = stored.get((day, app, feature), {})  # a damaged row (set aside): the delta in its place
                delta = total[(day, app, feature)]
                if feature == QUERIES:  # a bottom-k sample: union, the k smallest keys kept
                    merge_sample(counts, delta)
                elif feature == GRIDS:  # each feature's grid: another one than stored makes it "mixed"
                    merge_grids(counts, delta)
                else:
                    for key, n in delta.items():
                        key = str(key)
                        counts[key] = counts.get(key, 0) + n
                rows.append({"g": group_id, "d": day, "a": app, "f": feature, "new": orjson.dumps(counts)})
            conn.execute(update(self.days).where(
                d.group_id == bindparam("g"), d.day == bindparam("d"), d.app == bindparam("a"),
                d.feature == bindparam("f")).values(counts=bindparam("new")), rows)

        return write

    def stored_days(self, group_id: str, first: str | None = None, last: str | None = None,
                    app: str | None = None, split: bool = False) -> dict:
        """{ISO day: {app: Counts}} of the days from `first` to `last` (inclusive), of one app (every
        version of it) or all; each app's versions summed, or with `split` per `app|version` key."""
        d = self.days.c
        query = select(d.day, d.app, d.feature, d.counts).where(d.group_id == group_id)
        if first is not None:
            query = query.where(d.day >= first)
        if last is not None:
            query = query.where(d.day <= last)
        if app is not None:
            query = query.where(or_(d.app == app, d.app.startswith(f"{app}|", autoescape=True)))
        rows = self._decoded(((r.day, r.app, r.feature), r.counts) for r in self.store.read(query))
        return counts_of({k: v for k, v in rows.items() if v}, split)

    def _decoded(self, rows: Iterable[tuple[tuple[str, str, str], bytes]]) -> dict[tuple[str, str, str], dict]:
        """{(day, app, feature): counts} of stored rows; a damaged row, a row of a newer format and a
        feature this release does not know are skipped and handed to `damaged`."""
        out = {}
        for key, raw in rows:
            if key[2] not in _KINDS:
                self.damaged.skip(_DAYS, key, newer=True)
                continue
            try:
                out[key] = _counts(raw, key[2])
            except NewerRow:
                self.damaged.skip(_DAYS, key, newer=True)
            except ValueError:
                self.damaged.skip(_DAYS, key)
        return out

    def _for_update(self, conn: Connection, group_id: str,
                    rows: Iterable[tuple[tuple[str, str, str], bytes]]) -> dict[tuple[str, str, str], dict]:
        """The stored rows a checkpoint adds to. A damaged one is set aside first; one of a newer format
        fails the checkpoint (`StoreError`): adding to it would lose what this release cannot read."""
        out = {}
        for key, raw in rows:
            try:
                out[key] = _counts(raw, key[2])
            except NewerRow:
                raise StoreError(f"{_DAYS} row {key!r} is of a newer release's format: this release does not "
                                 "add to it (a replica of that release will)") from None
            except ValueError:
                self.store.set_aside_row(conn, _DAYS, (group_id, *key), raw)
                self.damaged.skip(_DAYS, key)
        return out

    def last_day(self, group_id: str) -> str | None:
        d = self.days.c
        rows = self.store.read(select(d.day).where(d.group_id == group_id).order_by(d.day.desc()).limit(1))
        return rows[0].day if rows else None

    def save_baseline(self, baseline: Baseline, now: float | None = None) -> bool:
        """Store a frozen baseline; False when that name and version is stored already (same content)."""
        row = {"name": baseline.name, "version": baseline.version, "created_at": time.time() if now is None else now,
               "baseline": baseline.to_json()}
        try:
            with self.store.engine.begin() as conn:
                stmt = self.store.insert(self.baselines).on_conflict_do_nothing().returning(self.baselines.c.version)
                return conn.execute(stmt, row).first() is not None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot store the baseline: {self.store.describe(exc)}") from exc

    def list_baselines(self) -> tuple[list[StoredBaseline], int]:
        """Every stored baseline that reads back whole, oldest first, and how many did not (skipped)."""
        b = self.baselines.c
        out, bad = [], 0
        for row in self.store.read(select(self.baselines).order_by(b.created_at, b.name, b.version)):
            try:
                found = _parse(row)
            except ValueError:
                bad += 1
                continue
            out.append(StoredBaseline(name=row.name, version=row.version, created_at=row.created_at, days=found.days, apps=tuple(sorted(found.apps))))
        return out, bad

    def load_baseline(self, name: str | None = None, version: str | None = None) -> Baseline | None:
        """A stored baseline: the newest of `name` (or of all), or that exact version; ValueError when its
        stored document does not read back whole."""
        b = self.baselines.c
        query = select(b.name, b.version, b.baseline)
        if name is not None:
            query = query.where(b.name == name)
        if version is not None:
            query = query.where(b.version == version)
        rows = self.store.read(query.order_by(b.created_at.desc(), b.version.desc()).limit(1))
        return _parse(rows[0]) if rows else None


def _counts(raw: bytes, feature: str) -> dict:
    """A stored day row as `DriftStore.writes` writes it for `feature`, or ValueError: not JSON (NaN and
    the infinities are not), or not its kind of counts (query terms' sample, grid digests, whole counts
    >= 0 per fine cell or per category)."""
    counts = orjson.loads(raw)
    check_row(counts, DRIFT_DAY_ROWS)
    if not isinstance(counts, dict):
        raise ValueError("not an object")
    if feature == QUERIES:
        fits = all(isinstance(terms, list) and all(isinstance(t, str) for t in terms) for terms in counts.values())
    elif feature == GRIDS:
        fits = all(isinstance(digest, str) for digest in counts.values())
    else:
        cells = feature in FEATURES
        fits = all(type(n) is int and n >= 0 and (not cells or (k.isascii() and k.isdigit()))
                   for k, n in counts.items())
    if not fits:
        raise ValueError(f"not counts of {feature}")
    return counts


def _parse(row) -> Baseline:
    """A stored row's baseline, or ValueError naming the row (not its content) when it is corrupt:
    not JSON, missing or malformed fields, content not matching the version, or another name or version."""
    try:
        found = Baseline.from_dict(orjson.loads(row.baseline))
    except (ValueError, KeyError, TypeError, AttributeError):
        found = None
    if found is None or (found.name, found.version) != (row.name, row.version):
        raise ValueError(f"stored baseline {row.name!r} {row.version} is corrupt: it does not read back whole")
    return found
