"""The judgment queue and the security review queue, as rows in the store.

Both join the partition checkpoint (agent/io/store/database.py): their rows commit in
the transaction that moves the offsets, so they are exactly once across
crashes and rebalances. Rows hold only what the event already held in
privacy-safe form (hashed ids, labels, numbers); never text.

Candidates mirror each partition's sampler: a checkpoint inserts what the
sampler took since the last one and deletes what it let go. A batch reads
the candidates of one week from every partition of every replica and takes
the top K per stratum, which is the sample one agent would take.

Batches are recorded apart from the checkpoints: `ragdrift_batches` holds a
week's batch (one a week, built once the week has ended),
`ragdrift_partial_batches` the batches of a week still running (any number,
never in the way of the week's own batch), and `ragdrift_batch_projects`
the Label Studio project each batch was last pushed to.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import msgspec
import orjson
from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    bindparam,
    delete,
    func,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from agent.core.sampling import Candidate, RowKey
from agent.core.security import Incident
from agent.io.store.database import StoreError

_CANDIDATES = "ragdrift_candidates"
_SECURITY = "ragdrift_security_queue"
_BATCHES = "ragdrift_batches"
_PARTIAL = "ragdrift_partial_batches"
_PROJECTS = "ragdrift_batch_projects"
_CANDIDATE = msgspec.json.Decoder(Candidate)
_INCIDENT = msgspec.json.Decoder(Incident)


def candidates_table(metadata: MetaData) -> Table:
    return Table(
        _CANDIDATES, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("topic", String(255), primary_key=True),
        Column("partition", Integer, primary_key=True),
        Column("week", String(8), primary_key=True),
        Column("stratum", String(255), primary_key=True),
        Column("event_id", String(128), primary_key=True),
        Column("priority", Float, nullable=False),
        Column("candidate", LargeBinary, nullable=False),  # the Candidate as JSON
    )


def security_table(metadata: MetaData) -> Table:
    return Table(
        _SECURITY, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("event_id", String(128), primary_key=True),
        Column("ts", Float, nullable=False, index=True),
        Column("incident", LargeBinary, nullable=False),  # the Incident as JSON
    )


def batches_table(metadata: MetaData) -> Table:
    return _batch_table(_BATCHES, metadata, "week")  # a week's batch: one a week


def partial_batches_table(metadata: MetaData) -> Table:
    return _batch_table(_PARTIAL, metadata, "batch_id")  # any number a week


def _batch_table(name: str, metadata: MetaData, key: str) -> Table:
    return Table(
        name, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("week", String(8), primary_key=key == "week", nullable=False),
        Column("batch_id", String(64), primary_key=key == "batch_id", nullable=False),
        Column("built_at", Float, nullable=False),
        Column("items", BigInteger, nullable=False),
        Column("directory", String(1024), nullable=False),
    )


def projects_table(metadata: MetaData) -> Table:
    return Table(
        _PROJECTS, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("batch_id", String(64), primary_key=True),
        Column("project", BigInteger, nullable=False),
        Column("pushed_at", Float, nullable=False),
    )


TABLES = (candidates_table, security_table, batches_table, partial_batches_table, projects_table)


class BatchExists(RuntimeError):
    """The week already has its batch, or this batch is already recorded."""

    def __init__(self, row: dict):
        self.row = row
        if row["partial"]:
            super().__init__(f"partial batch {row['batch_id']} of {row['week']} is built already, in "
                             f"{row['directory']}: the week's candidates have not changed since")
        else:
            super().__init__(f"{row['week']} already has its batch {row['batch_id']}, in {row['directory']}: "
                             "a week's batch is built once")


class DamagedCandidate(StoreError):
    """A stored candidate row that does not decode: named by its key, never by its content."""


class Queue:
    """Reads and writes of the queue tables, on a store opened with `TABLES`."""

    def __init__(self, store):
        self.store = store
        self.candidates = store.joined(_CANDIDATES)
        self.security = store.joined(_SECURITY)
        self.batches = store.joined(_BATCHES)
        self.partial = store.joined(_PARTIAL)
        self.projects = store.joined(_PROJECTS)

    def writes(self, group_id: str, topic: str, partition: int, added: Iterable[Candidate],
               evicted: Iterable[RowKey], incidents: Iterable[Incident]):
        """A joined write for one partition's checkpoint (see Store.save)."""
        added, evicted, incidents = list(added), list(evicted), list(incidents)

        def write(conn: Connection) -> None:
            c = self.candidates.c
            if evicted:  # one statement, executed many times: a reservoir evicts thousands an interval
                conn.execute(delete(self.candidates).where(
                    c.group_id == group_id, c.topic == topic, c.partition == partition,
                    c.week == bindparam("w"), c.stratum == bindparam("s"), c.event_id == bindparam("e")),
                    [{"w": week, "s": stratum, "e": event_id} for week, stratum, event_id in evicted])
            if added:  # new rows, or a kept event whose priority rose
                stmt = self.store.insert(self.candidates)
                stmt = stmt.on_conflict_do_update(
                    index_elements=["group_id", "topic", "partition", "week", "stratum", "event_id"],
                    set_={"priority": stmt.excluded.priority, "candidate": stmt.excluded.candidate})
                conn.execute(stmt, [
                    {"group_id": group_id, "topic": topic, "partition": partition, "week": x.week,
                     "stratum": x.stratum, "event_id": x.event_id, "priority": x.priority,
                     "candidate": msgspec.json.encode(x)}
                    for x in added
                ])
            if incidents:  # a replay after a crash writes the same rows again: kept once
                conn.execute(self.store.insert(self.security).on_conflict_do_nothing(), [
                    {"group_id": group_id, "event_id": x.event_id, "ts": x.ts, "incident": orjson.dumps(x.to_dict())}
                    for x in incidents
                ])

        return write

    def forget(self, group_id: str, topic: str, partition: int):
        """A joined write dropping a partition's candidates (its state starts afresh, see Store.reset)."""
        c = self.candidates.c

        def write(conn: Connection) -> None:
            conn.execute(delete(self.candidates).where(
                c.group_id == group_id, c.topic == topic, c.partition == partition))

        return write

    def partition_candidates(self, group_id: str, topic: str, partition: int,
                             weeks: int | None = None) -> list[Candidate]:
        """One partition's candidates as of its last checkpoint: of its `weeks`
        newest weeks (what its sampler holds), or of every week."""
        c = self.candidates.c
        query = select(c.candidate).where(c.group_id == group_id, c.topic == topic, c.partition == partition)
        if weeks is not None:
            newest = select(c.week).where(c.group_id == group_id, c.topic == topic, c.partition == partition)
            recent = [row.week for row in self.store.read(newest.distinct().order_by(c.week.desc()).limit(weeks))]
            query = query.where(c.week.in_(recent))
        return [_CANDIDATE.decode(row.candidate) for row in self.store.read(query)]

    def week_candidates(self, group_id: str, week: str) -> list[Candidate]:
        """Every replica's candidates of one week; `DamagedCandidate` names a row that does not decode."""
        c = self.candidates.c
        query = select(c.topic, c.partition, c.stratum, c.event_id, c.candidate).where(
            c.group_id == group_id, c.week == week)
        found = []
        for row in self.store.read(query):
            try:
                found.append(_CANDIDATE.decode(row.candidate))
            except (msgspec.DecodeError, TypeError):  # the decoder's message may quote the row: not repeated
                raise DamagedCandidate(
                    f"damaged candidate row in {_CANDIDATES} (topic {row.topic!r}, partition {row.partition}, "
                    f"week {week}, stratum {row.stratum!r}, event {row.event_id!r}): delete it or restore the "
                    "store") from None
        return found

    def incidents(self, group_id: str, since: float | None = None,
                  limit: int | None = None) -> tuple[list[Incident], list[str]]:
        """The security review queue, oldest first (at most `limit` rows), and
        the event ids of the rows among them that do not decode: a damaged row
        is skipped, so it cannot hide the others during an incident."""
        s = self.security.c
        query = select(s.event_id, s.incident).where(s.group_id == group_id)
        if since is not None:
            query = query.where(s.ts >= since)
        query = query.order_by(s.ts, s.event_id).limit(limit)
        found, unreadable = [], []
        for row in self.store.read(query):
            try:
                found.append(_INCIDENT.decode(row.incident))
            except msgspec.DecodeError:
                unreadable.append(row.event_id)
        return found, unreadable

    def candidate_counts(self, group_id: str, week: str) -> dict[str, int]:
        """Candidates per stratum of one week, over every replica."""
        c = self.candidates.c
        query = select(c.stratum, func.count()).where(c.group_id == group_id, c.week == week).group_by(c.stratum)
        return dict(self.store.read(query))

    def security_size(self, group_id: str) -> int:
        s = self.security.c
        return self.store.read(select(func.count()).where(s.group_id == group_id))[0][0]

    @contextmanager
    def recording(self, group_id: str, week: str, batch_id: str, built_at: float, items: int, directory: str,
                  partial: bool = False) -> Iterator[None]:
        """Record a batch in a transaction that commits when the block ends
        without an error: the block puts the batch's files in place. A week
        that already has its batch, or a batch already recorded, raises
        `BatchExists`; a store that cannot be written, `StoreError`."""
        row = {"group_id": group_id, "week": week, "batch_id": batch_id, "built_at": built_at, "items": items,
               "directory": directory}
        try:
            with self.store.engine.begin() as conn:
                conn.execute(self.store.insert(self.partial if partial else self.batches), row)
                yield
        except IntegrityError:
            existing = self.batch(group_id, batch_id) if partial else self.batch_of(group_id, week)
            raise BatchExists(existing or {**row, "partial": partial}) from None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the batch: {self.store.describe(exc)}") from None

    def record_batch(self, group_id: str, week: str, batch_id: str, built_at: float, items: int, directory: str,
                     partial: bool = False) -> None:
        """Record a batch whose files are in place already (see `recording`)."""
        with self.recording(group_id, week, batch_id, built_at, items, directory, partial):
            pass

    def record_project(self, group_id: str, batch_id: str, project: int, pushed_at: float) -> None:
        """Remember the Label Studio project a batch was last pushed to."""
        row = {"group_id": group_id, "batch_id": batch_id, "project": project, "pushed_at": pushed_at}
        stmt = self.store.insert(self.projects)
        stmt = stmt.on_conflict_do_update(index_elements=["group_id", "batch_id"],
                                          set_={"project": stmt.excluded.project, "pushed_at": stmt.excluded.pushed_at})
        try:
            with self.store.engine.begin() as conn:
                conn.execute(stmt, row)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the Label Studio project: {self.store.describe(exc)}") from None

    def batch_of(self, group_id: str, week: str) -> dict | None:
        """The week's batch (never a partial one)."""
        b = self.batches.c
        rows = self.store.read(select(self.batches).where(b.group_id == group_id, b.week == week))
        return _row(rows[0], False) if rows else None

    def batch(self, group_id: str, batch_id: str) -> dict | None:
        """A batch by its id, a week's or a partial one, with its Label Studio project (or None)."""
        b, p, x = self.batches.c, self.partial.c, self.projects.c
        rows = [_row(r, False) for r in self.store.read(select(self.batches).where(
            b.group_id == group_id, b.batch_id == batch_id))]
        rows += [_row(r, True) for r in self.store.read(select(self.partial).where(
            p.group_id == group_id, p.batch_id == batch_id))]
        if not rows:
            return None
        project = self.store.read(select(x.project).where(x.group_id == group_id, x.batch_id == batch_id))
        return {**rows[0], "project": project[0].project if project else None}

    def last_batch(self, group_id: str) -> dict | None:
        """The most recently built week's batch (partial batches do not count)."""
        b = self.batches.c
        rows = self.store.read(select(self.batches).where(b.group_id == group_id).order_by(b.built_at.desc()).limit(1))
        return _row(rows[0], False) if rows else None

    def recent_batches(self, group_id: str, n: int) -> list[dict]:
        """The batches of the `n` newest weeks, oldest first: a week's batch,
        or the newest partial batch of a week that has none yet."""
        b, p = self.batches.c, self.partial.c
        by_week = {r.week: _row(r, True) for r in self.store.read(
            select(self.partial).where(p.group_id == group_id).order_by(p.built_at))}
        by_week |= {r.week: _row(r, False) for r in self.store.read(select(self.batches).where(b.group_id == group_id))}
        return sorted(by_week.values(), key=lambda r: (r["week"], r["built_at"]))[-n:] if n > 0 else []


def _row(row, partial: bool) -> dict:
    return {**row._mapping, "partial": partial}
