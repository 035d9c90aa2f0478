"""A lock every replica sharing the store respects, for work done once.

On PostgreSQL a session-level advisory lock (several replicas share the
database); on SQLite, which serves replicas on one host, an exclusive
`flock` on a file beside the database. Neither waits: whoever does not get
the lock knows another replica is doing the work.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text


def _key(name: str) -> int:
    """A signed 64-bit advisory lock key for `name`."""
    return int.from_bytes(hashlib.sha256(f"ragdrift.{name}".encode()).digest()[:8], "big", signed=True)


@contextmanager
def held(engine, name: str) -> Iterator[bool]:
    """Try to take the lock `name`; yield whether this process holds it."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            got = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _key(name)}).scalar_one()
            try:
                yield bool(got)
            finally:
                if got:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _key(name)})
                conn.commit()
        return
    database = engine.url.database
    path = f"{database}.{name}.lock" if database and database != ":memory:" else None
    if path is None:  # an in-memory database has one process by definition
        yield True
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
