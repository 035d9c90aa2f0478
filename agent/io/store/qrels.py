"""Versioned qrels in the store: every label ever imported, none overwritten.

One row per (batch, item, chunk, judge, version) in `ragdrift_qrels`, the
table joined to the store as the queue's are (agent/io/store/queue.py). An import
adds the versions agent/core/judgments/qrels.py decides on, in one
transaction; rows are never updated or deleted. Two imports racing on the
same pair cannot both write its next version: the primary key refuses the
second, which then fails whole. Rows hold blinded ids, grades, tags and
where they came from; never text.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass

from sqlalchemy import Column, Float, Integer, MetaData, SmallInteger, String, Table, func, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from agent.core.judgments.labels import Label
from agent.core.judgments.qrels import Revision, revise
from agent.io.store.database import StoreError

_QRELS = "ragdrift_qrels"


def qrels_table(metadata: MetaData) -> Table:
    return Table(
        _QRELS, metadata,
        Column("batch_id", String(64), primary_key=True),
        Column("item", String(80), primary_key=True),
        Column("chunk", String(96), primary_key=True),
        Column("judge", String(128), primary_key=True),
        Column("version", Integer, primary_key=True),
        Column("grade", SmallInteger, nullable=False),
        Column("tags", String(255), nullable=False),  # sorted, comma-separated
        Column("evidence_group", String(16), nullable=True),
        Column("imported_at", Float, nullable=False),
        Column("source", String(255), nullable=False),  # the file's name, or the Label Studio project
    )


TABLES = (qrels_table,)


@dataclass(frozen=True)
class Version:
    version: int
    imported_at: float
    source: str
    _: KW_ONLY
    label: Label


class Qrels:
    """Reads and writes of the qrels table, on a store opened with `TABLES`."""

    def __init__(self, store):
        self.store = store
        self.table = store.joined(_QRELS)

    def add(self, labels: Iterable[Label], source: str, now: float | None = None) -> Revision:
        """Add the new versions among `labels` (of one file) in one transaction."""
        labels = list(labels)
        now = time.time() if now is None else now
        q = self.table.c
        batches = sorted({label.batch_id for label in labels})
        try:
            with self.store.engine.begin() as conn:
                rows = conn.execute(select(self.table).where(q.batch_id.in_(batches))) if batches else ()
                revision = revise(_latest(rows), labels)
                if revision.versions:
                    conn.execute(self.table.insert(), [
                        {"batch_id": x.batch_id, "item": x.item, "chunk": x.chunk, "judge": x.judge,
                         "version": version, "grade": x.grade, "tags": ",".join(x.tags),
                         "evidence_group": x.evidence_group, "imported_at": now, "source": source[:255]}
                        for version, x in revision.versions
                    ])
        except IntegrityError:
            raise StoreError("another import added versions of the same labels meanwhile: "
                             "nothing of this one was written, run it again") from None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot import labels into {self.store.engine_url()}: {self.store.describe(exc)}") from exc
        return revision

    def latest(self, batch_id: str) -> list[Label]:
        """The latest version of every label of a batch, in (item, chunk, judge) order."""
        rows = self.store.read(select(self.table).where(self.table.c.batch_id == batch_id))
        return [label for _, label in sorted(_latest(rows).values(), key=lambda v: v[1].pair)]

    def versions(self, batch_ids: Iterable[str]) -> dict[str, int]:
        """Rows (label versions) per batch among `batch_ids`, those with any: since rows are
        never updated or deleted, a batch's count changes exactly when its labels do."""
        q = self.table.c
        ids = sorted(set(batch_ids))
        if not ids:
            return {}
        rows = self.store.read(select(q.batch_id, func.count()).where(q.batch_id.in_(ids)).group_by(q.batch_id))
        return {row[0]: int(row[1]) for row in rows}

    def newest_import(self) -> float | None:
        """When labels were last added (a version written), None before the first."""
        return self.store.read(select(func.max(self.table.c.imported_at)))[0][0]

    def history(self, batch_id: str, item: str, chunk: str, judge: str) -> list[Version]:
        """Every version of one judge's label of one chunk, oldest first."""
        q = self.table.c
        rows = self.store.read(select(self.table).where(
            q.batch_id == batch_id, q.item == item, q.chunk == chunk, q.judge == judge).order_by(q.version))
        return [Version(row.version, row.imported_at, row.source, label=_label(row)) for row in rows]


def _latest(rows) -> dict:
    """Each pair's latest (version, label) among `rows`."""
    out: dict = {}
    for row in rows:
        label = _label(row)
        if label.pair not in out or out[label.pair][0] < row.version:
            out[label.pair] = (row.version, label)
    return out


def _label(row) -> Label:
    return Label(batch_id=row.batch_id, item=row.item, chunk=row.chunk, judge=row.judge, grade=row.grade,
                 tags=tuple(row.tags.split(",")) if row.tags else (), evidence_group=row.evidence_group)
