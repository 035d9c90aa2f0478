"""Checkpoint store: each partition's state and next offset, written together.

SQLAlchemy 2 Core over SQLite (one replica, the default) or PostgreSQL
(several replicas). One transaction writes every owned partition, so a
checkpoint is all or nothing; the stored offset, not Kafka's committed one, is
where a partition resumes (docs/architecture.md, "Exactly once"). Sealed
minute buckets never change, so each is written once to `ragdrift_buckets`
and deleted when it is retired; the checkpoint row holds the rest of the state.

Other components join the checkpoint: they define their tables on the
store's metadata (`tables`) and hand `save` the rows to write (`joined`),
which commit or roll back together with the offsets, so what they keep is
exactly once too.

Replicas that start together on an empty database each create the tables:
on PostgreSQL they take turns under an advisory lock, so the second finds
what the first created; upgrades add what an older schema lacks, in the
same locked transaction.

Only the agent creates a store (`Opening.CREATE`). Every other command opens
the store the agent made (`Opening.EXISTING` to write into it, `Opening.READ`
to read it), so a mistyped path or a forgotten `--config` is an error that
names the store, never a new empty database read as an empty queue.
"""

from __future__ import annotations

import enum
import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

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
    create_engine,
    delete,
    inspect,
    literal,
    make_url,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.util import asbool

from agent.io.secrets import redact_url

Joined = Callable[[Connection], None]  # writes its rows inside a checkpoint's transaction


def _partition_key() -> list[Column]:
    """The columns that name one consumer group's partition (new objects per table)."""
    return [
        Column("group_id", String(255), primary_key=True),
        Column("topic", String(255), primary_key=True),
        Column("partition", Integer, primary_key=True),
    ]


def _checkpoint() -> list[Column]:
    """A checkpoint row's columns beside its key (new objects per table)."""
    return [
        Column("next_offset", BigInteger, nullable=False),
        Column("state", LargeBinary, nullable=False),
        Column("updated_at", Float, nullable=False),
        Column("topic_id", String(64), nullable=True),
    ]


def _bucket() -> list[Column]:
    """A sealed bucket's columns beside its partition's key."""
    return [Column("bucket", BigInteger, primary_key=True), Column("tally", LargeBinary, nullable=False)]


def _set_aside() -> list[Column]:
    """When a damaged checkpoint was set aside: part of its copies' key."""
    return [Column("set_aside_at", Float, primary_key=True)]


def _of(table: Table, group_id: str, topic: str, partition: int) -> tuple:
    """WHERE clauses selecting one partition's rows of `table`."""
    c = table.c
    return c.group_id == group_id, c.topic == topic, c.partition == partition


class Opening(enum.Enum):
    """How a store is opened: who may create what."""

    CREATE = "create"  # the agent: creates the database and every table it lacks, upgrades old ones
    EXISTING = "existing"  # commands that write into the agent's store: it must exist; they add their own tables
    READ = "read"  # read-only commands: the store and every table they read must exist; nothing is written


def _timeouts(url: URL, opening: Opening) -> dict:
    """Bound every wait on the store: an unreachable database must fail a
    checkpoint in seconds, not block the consumer past its session timeout.
    A SQLite URL's own `?timeout=SECONDS` (the wait on a locked file) is kept."""
    if url.get_backend_name() == "postgresql":
        options = "-c statement_timeout=5000"
        if opening is Opening.READ:
            options += " -c default_transaction_read_only=on"
        return {"connect_timeout": 5, "options": options}
    return {} if "timeout" in url.query else {"timeout": 5}


def _existing_sqlite(url: URL, opening: Opening) -> URL:
    """The SQLite URL opened without creating the file (read-only for `READ`),
    or `StoreError` when there is no file to open."""
    mode = "ro" if opening is Opening.READ else "rw"
    if asbool(url.query.get("uri", False)):  # already a SQLite URI: a read never writes, its own `ro` is kept
        return url.update_query_dict({"mode": "ro" if url.query.get("mode") == "ro" else mode})
    path = url.database or ":memory:"
    if path == ":memory:":
        raise StoreError("no ragdrift store in an in-memory SQLite database: store.url needs a file (sqlite:///PATH)")
    if not os.path.isfile(path):
        raise StoreError(f"no ragdrift store at {os.path.abspath(path)}: no such file "
                         "(`ragdrift run` creates it; check store.url and --config)")
    return url.set(database=f"file:{quote(os.path.abspath(path))}").update_query_dict({"mode": mode, "uri": "true"})


# pg_advisory_xact_lock key serializing schema changes between replicas
# (the first eight bytes of sha256("ragdrift.schema"), as a signed bigint).
SCHEMA_LOCK = 0x4D89E8B902B67DBA


class StoreError(RuntimeError):
    """The store could not be read or written."""


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    topic: str
    partition: int
    next_offset: int
    state: dict
    sealed: list = field(default_factory=list)  # [bucket index, tally items] stored apart
    keep_from: int | None = None  # sealed buckets below this index are retired: delete them
    topic_id: str | None = None  # the log's identity: another id means the topic was recreated


class Store:
    def __init__(self, url: str, schema: str | None = None, tables: Iterable[Callable[[MetaData], Table]] = (), *,
                 opening: Opening = Opening.CREATE):
        self.url = url
        self.metadata = MetaData(schema=schema)
        self.checkpoints = Table("ragdrift_checkpoints", self.metadata, *_partition_key(), *_checkpoint())
        self.buckets = Table("ragdrift_buckets", self.metadata, *_partition_key(), *_bucket())
        # Checkpoints this release found damaged, kept with their buckets rather than deleted
        # (`set_aside`): a person, or a later release, may still read them.
        self.set_aside_states = Table("ragdrift_set_aside", self.metadata, *_partition_key(), *_set_aside(),
                                      Column("reason", String(255), nullable=False), *_checkpoint())
        self.set_aside_buckets = Table("ragdrift_set_aside_buckets", self.metadata, *_partition_key(),
                                       *_set_aside(), *_bucket())
        # Rows several partitions add to (drift days, live-gate rows) that a checkpoint found damaged,
        # kept as stored before it writes their key afresh (`set_aside_row`).
        self.set_aside_rows = Table("ragdrift_set_aside_rows", self.metadata,
                                    Column("table_name", String(64), primary_key=True),
                                    Column("row_key", String(1024), primary_key=True), *_set_aside(),
                                    Column("row", LargeBinary, nullable=False))
        self.joined_tables = [define(self.metadata) for define in tables]
        try:
            self._parsed = make_url(url)
        except (ArgumentError, ValueError):  # ValueError: a port that is not a number
            raise StoreError(f"cannot open store {self.engine_url()}: not a database URL") from None
        parsed = self._parsed
        if parsed.get_backend_name() == "sqlite" and opening is not Opening.CREATE:
            parsed = _existing_sqlite(parsed, opening)
        try:
            self.engine = create_engine(parsed, pool_pre_ping=True, connect_args=_timeouts(parsed, opening))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot open store {self.engine_url()}: {self.describe(exc)}") from exc
        postgres = self.engine.dialect.name == "postgresql"
        try:
            with self.engine.begin() as conn:
                if opening is Opening.READ:
                    self._require(conn, self.joined_tables)
                else:
                    if postgres:
                        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
                    if opening is Opening.EXISTING:
                        self._require(conn, ())
                    self.metadata.create_all(conn)
                    self._upgrade(conn)
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise StoreError(f"cannot open store {self.engine_url()}: {self.describe(exc)}") from exc
        except StoreError:
            self.engine.dispose()
            raise
        self.postgres = postgres
        self.insert = postgresql.insert if postgres else sqlite.insert  # with on_conflict_* on either
        # Several replicas share PostgreSQL, so loads read one snapshot; SQLite
        # serves a single replica, with no other writer to tear a load.
        self._snapshot_isolation = "REPEATABLE READ" if postgres else "SERIALIZABLE"

    def _require(self, conn: Connection, tables: Iterable[Table]) -> None:
        """`StoreError` unless the database holds a ragdrift store with every one of `tables`."""
        schema = self.metadata.schema
        present = set(inspect(conn).get_table_names(schema=schema))
        where = self.engine_url() + (f" (schema {schema})" if schema else "")
        if not any(name.startswith("ragdrift_") for name in present):
            raise StoreError(f"no ragdrift store at {where}: the database holds no ragdrift tables "
                             "(`ragdrift run` creates them; check store.url and --config)")
        missing = sorted(t.name for t in tables if t.name not in present)
        if missing:
            raise StoreError(f"store {where} lacks {', '.join(missing)}: it was made by an older release "
                             "(the agent of this release adds them when it starts)")

    def describe(self, exc: SQLAlchemyError, detail: bool = False) -> str:
        """What failed, for a `StoreError`'s message, in words an operator can act
        on: SQLite's own message (a locked file above all, with its path); else
        the error's class, and with `detail` the driver's message too."""
        orig = getattr(exc, "orig", None)
        if isinstance(orig, sqlite3.Error):
            if "locked" in str(orig):
                path = self._parsed.database or ""
                path = path if path.startswith("file:") else os.path.abspath(path)
                return f"the store is locked: another process holds the SQLite file {path}"
            return f"{exc.__class__.__name__}: {orig}"
        return f"{exc.__class__.__name__}: {exc}" if detail else exc.__class__.__name__

    def _upgrade(self, conn) -> None:
        """Add the columns a store created by an older release lacks (new columns are nullable)."""
        table = self.checkpoints
        have = {c["name"] for c in inspect(conn).get_columns(table.name, schema=table.schema)}
        for column in table.columns:
            if column.name not in have:
                kind = column.type.compile(dialect=conn.dialect)
                name = conn.dialect.identifier_preparer.format_table(table)
                conn.execute(text(f"ALTER TABLE {name} ADD COLUMN {column.name} {kind}"))

    def joined(self, name: str) -> Table:
        """A joined component's table, by name."""
        return next(t for t in self.joined_tables if t.name == name)

    def read(self, query) -> list:
        """The rows of one query, or `StoreError` (never SQLAlchemy's own errors)."""
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(query))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self.engine_url()}: {self.describe(exc)}") from exc

    def scan(self, query, take: Callable[[Iterable[Any]], Any]) -> Any:
        """What `take` makes of a query's rows as they stream (a server-side cursor on PostgreSQL), so a
        large result is never held whole; `StoreError` as `read`."""
        try:
            with self.engine.connect() as conn:
                return take(conn.execution_options(yield_per=1000).execute(query))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read {self.engine_url()}: {self.describe(exc)}") from exc

    def engine_url(self) -> str:
        """The URL with its credentials masked, for messages and logs."""
        return redact_url(self.url)

    def save(self, group_id: str, checkpoints: list[Checkpoint], joined: Iterable[Joined] = ()) -> None:
        """Write all checkpoints, and whatever `joined` writes, in one transaction."""
        if not checkpoints:
            return
        now = time.time()
        try:
            rows: list[dict[str, Any]] = [
                {
                    "group_id": group_id,
                    "topic": c.topic,
                    "partition": c.partition,
                    "next_offset": c.next_offset,
                    "state": orjson.dumps(c.state),
                    "updated_at": now,
                    "topic_id": c.topic_id,
                }
                for c in checkpoints
            ]
            sealed = [
                {"group_id": group_id, "topic": c.topic, "partition": c.partition, "bucket": i,
                 "tally": orjson.dumps(items)}
                for c in checkpoints
                for i, items in c.sealed
            ]
        except TypeError as exc:  # e.g. a sum beyond 64 bits
            raise StoreError(f"checkpoint cannot be serialized: {exc}") from exc
        insert = self.insert(self.checkpoints)
        stmt = insert.on_conflict_do_update(
            index_elements=["group_id", "topic", "partition"],
            set_={name: insert.excluded[name] for name in ("next_offset", "state", "updated_at", "topic_id")},
            # Never move a partition backwards: a replica that lost its
            # partitions without noticing cannot undo its successor's work.
            where=self.checkpoints.c.next_offset <= insert.excluded.next_offset,
        ).returning(self.checkpoints.c.next_offset)  # no row back: the write was refused
        # A sealed bucket's content is fixed by the stream, so a second write
        # of the same index (a replica that lost its partition late) is a no-op.
        insert_sealed = self.insert(self.buckets).on_conflict_do_nothing()
        b = self.buckets.c
        try:
            with self.engine.begin() as conn:
                for row in rows:
                    if conn.execute(stmt, row).first() is None:
                        raise StoreError(
                            f"checkpoint of {row['topic']}[{row['partition']}] at {row['next_offset']} refused: "
                            "the stored offset is ahead (another replica owns this partition)"
                        )
                if sealed:
                    conn.execute(insert_sealed, sealed)
                for c in checkpoints:
                    if c.keep_from is not None:
                        conn.execute(delete(self.buckets).where(
                            *_of(self.buckets, group_id, c.topic, c.partition),
                            b.bucket < c.keep_from,
                        ))
                for write in joined:
                    write(conn)
        except SQLAlchemyError as exc:
            raise StoreError(f"checkpoint failed: {self.describe(exc, detail=True)}") from exc

    def load(self, group_id: str, topic: str, partition: int) -> Checkpoint | None:
        c = self.checkpoints.c
        query = select(c.next_offset, c.state, c.topic_id).where(
            *_of(self.checkpoints, group_id, topic, partition)
        )
        b = self.buckets.c
        sealed_query = select(b.bucket, b.tally).where(
            *_of(self.buckets, group_id, topic, partition)
        ).order_by(b.bucket)
        try:  # one snapshot for both reads, so a concurrent checkpoint cannot tear them
            with self.engine.connect().execution_options(isolation_level=self._snapshot_isolation) as conn, conn.begin():
                row = conn.execute(query).first()
                buckets = [(r.bucket, r.tally) for r in conn.execute(sealed_query)] if row else []
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot load checkpoint: {self.describe(exc, detail=True)}") from exc
        if row is None:
            return None
        try:
            state = orjson.loads(row.state)
            sealed = [[bucket, orjson.loads(tally)] for bucket, tally in buckets]
        except orjson.JSONDecodeError:  # damaged: the restore refuses it as a state of no version
            state, sealed = None, []
        return Checkpoint(topic=topic, partition=partition, next_offset=row.next_offset, state=state, sealed=sealed,
                          topic_id=row.topic_id)

    def set_aside(self, group_id: str, topic: str, partition: int, reason: str) -> None:
        """Move a partition's checkpoint and its buckets, as stored, into the set-aside tables, in one
        transaction: the partition then starts afresh while what it held is kept for a person to read.
        Its features' rows stay: they count events before the stored offset, which the fresh state
        never reads again (a judgment sample's rows stay a valid sample: the top of a union of events
        is the top of the parts' tops, and a later restore offers them back to the sampler)."""
        now = time.time()
        c, b = self.checkpoints.c, self.buckets.c
        kept = [literal(now, Float).label("set_aside_at"), literal(reason[:255], String).label("reason")]
        try:
            with self.engine.begin() as conn:
                conn.execute(self.set_aside_states.insert().from_select(
                    ["group_id", "topic", "partition", "set_aside_at", "reason", "next_offset", "state",
                     "updated_at", "topic_id"],
                    select(c.group_id, c.topic, c.partition, *kept, c.next_offset, c.state, c.updated_at,
                           c.topic_id).where(*_of(self.checkpoints, group_id, topic, partition))))
                conn.execute(self.set_aside_buckets.insert().from_select(
                    ["group_id", "topic", "partition", "set_aside_at", "bucket", "tally"],
                    select(b.group_id, b.topic, b.partition, kept[0], b.bucket, b.tally).where(
                        *_of(self.buckets, group_id, topic, partition))))
                self._forget(conn, group_id, topic, partition, ())
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot set the checkpoint aside: {self.describe(exc, detail=True)}") from exc

    def set_aside_row(self, conn: Connection, table: str, key: tuple, raw: bytes) -> None:
        """Keep a damaged shared row as stored, in the transaction about to write its key afresh."""
        conn.execute(self.set_aside_rows.insert(), {
            "table_name": table, "row_key": orjson.dumps(key).decode()[:1024], "set_aside_at": time.time(),
            "row": raw})

    def reset(self, group_id: str, topic: str, partition: int, joined: Iterable[Joined] = ()) -> None:
        """Forget a partition's checkpoint (its log was recreated), and whatever `joined` drops with it."""
        try:
            with self.engine.begin() as conn:
                self._forget(conn, group_id, topic, partition, joined)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot reset checkpoint: {self.describe(exc, detail=True)}") from exc

    def _forget(self, conn: Connection, group_id: str, topic: str, partition: int, joined: Iterable[Joined]) -> None:
        conn.execute(delete(self.checkpoints).where(*_of(self.checkpoints, group_id, topic, partition)))
        conn.execute(delete(self.buckets).where(*_of(self.buckets, group_id, topic, partition)))
        for write in joined:
            write(conn)

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
