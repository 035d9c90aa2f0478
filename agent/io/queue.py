"""The judgment queue and the security review queue, as rows in the store.

Both join the partition checkpoint (agent/io/store.py): their rows commit in
the transaction that moves the offsets, so they are exactly once across
crashes and rebalances. Rows hold only what the event already held in
privacy-safe form (hashed ids, labels, numbers); never text.

Candidates mirror each partition's sampler: a checkpoint inserts what the
sampler took since the last one and deletes what it let go. A batch reads
the candidates of one week from every partition of every replica and takes
the top K per stratum, which is the sample one agent would take.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import orjson
from sqlalchemy import BigInteger, Column, Float, Integer, LargeBinary, MetaData, String, Table, bindparam, delete, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from agent.core.sampling import Candidate, RowKey
from agent.core.security import Incident
from agent.io.store import StoreError

_CANDIDATES = "ragdrift_candidates"
_SECURITY = "ragdrift_security_queue"
_BATCHES = "ragdrift_batches"
_CANDIDATE = msgspec.json.Decoder(Candidate)


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
    return Table(
        _BATCHES, metadata,
        Column("group_id", String(255), primary_key=True),
        Column("week", String(8), primary_key=True),
        Column("batch_id", String(64), nullable=False),
        Column("built_at", Float, nullable=False),
        Column("items", BigInteger, nullable=False),
        Column("directory", String(1024), nullable=False),
    )


TABLES = (candidates_table, security_table, batches_table)


class Queue:
    """Reads and writes of the queue tables, on a store opened with `TABLES`."""

    def __init__(self, store):
        self.store = store
        self.candidates = store.joined(_CANDIDATES)
        self.security = store.joined(_SECURITY)
        self.batches = store.joined(_BATCHES)

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
        """Every replica's candidates of one week."""
        c = self.candidates.c
        query = select(c.candidate).where(c.group_id == group_id, c.week == week)
        return [_CANDIDATE.decode(row.candidate) for row in self.store.read(query)]

    def incidents(self, group_id: str, since: float | None = None, limit: int | None = None) -> list[Incident]:
        """The security review queue, oldest first."""
        s = self.security.c
        query = select(s.incident).where(s.group_id == group_id)
        if since is not None:
            query = query.where(s.ts >= since)
        query = query.order_by(s.ts, s.event_id).limit(limit)
        return [Incident.from_dict(orjson.loads(row.incident)) for row in self.store.read(query)]

    def candidate_counts(self, group_id: str, week: str) -> dict[str, int]:
        """Candidates per stratum of one week, over every replica."""
        c = self.candidates.c
        query = select(c.stratum, func.count()).where(c.group_id == group_id, c.week == week).group_by(c.stratum)
        return {stratum: n for stratum, n in self.store.read(query)}

    def security_size(self, group_id: str) -> int:
        s = self.security.c
        return self.store.read(select(func.count()).where(s.group_id == group_id))[0][0]

    def record_batch(self, group_id: str, week: str, batch_id: str, built_at: float, items: int, directory: str) -> None:
        """Remember the week's batch; the first one built stays the week's batch."""
        row = {"group_id": group_id, "week": week, "batch_id": batch_id, "built_at": built_at, "items": items,
               "directory": directory}
        try:
            with self.store.engine.begin() as conn:
                conn.execute(self.store.insert(self.batches).on_conflict_do_nothing(), row)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the batch: {exc.__class__.__name__}") from exc

    def batch_of(self, group_id: str, week: str) -> dict | None:
        b = self.batches.c
        rows = self.store.read(select(self.batches).where(b.group_id == group_id, b.week == week))
        return dict(rows[0]._mapping) if rows else None

    def batch(self, group_id: str, batch_id: str) -> dict | None:
        """A batch by its id."""
        b = self.batches.c
        rows = self.store.read(select(self.batches).where(b.group_id == group_id, b.batch_id == batch_id))
        return dict(rows[0]._mapping) if rows else None

    def last_batch(self, group_id: str) -> dict | None:
        """The most recently built batch."""
        rows = self.recent_batches(group_id, 1)
        return rows[0] if rows else None

    def recent_batches(self, group_id: str, n: int) -> list[dict]:
        """The `n` most recently built batches, oldest first."""
        b = self.batches.c
        rows = self.store.read(select(self.batches).where(b.group_id == group_id).order_by(b.built_at.desc()).limit(n))
        return [dict(row._mapping) for row in reversed(rows)]
