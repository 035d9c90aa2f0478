"""Import judged labels: check them against their batch's key, then version them.

The batch of each label comes from its item id; the store's
`ragdrift_batches` says where that batch was written, and its key.jsonl
which items and chunks it holds. Every file is checked before anything is
written, so a command that names a bad file imports nothing; each good file
is then added in a transaction of its own (agent/io/store/qrels.py).

The score calibrations are refitted after an import whenever they are owed:
when labels were imported after the newest fit (or there is no fit). A fit
that fails (a pooled batch archived, or on another replica's disk) cannot
undo the import that committed before it; it stays owed, so the next import,
even of nothing new, or `ragdrift judgments calibrate` fits again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.judgments.importing import Parsed, checked, keys_of
from agent.core.judgments.judged import Judged
from agent.core.judgments.qrels import Revision
from agent.io.files import batch_files
from agent.io.files.batch_files import ExportError
from agent.io.store.calibrations import Calibrations
from agent.io.store.database import StoreError
from agent.io.store.qrels import Qrels
from agent.io.store.queue import Queue


@dataclass(frozen=True)
class Imported:
    parsed: Parsed
    revision: Revision

    def summary(self) -> dict:
        p, r = self.parsed, self.revision
        return {"file": p.file, "format": p.format, "batches": sorted(p.batches), "labels": len(p.rows),
                "new": r.new, "changed": r.changed, "unchanged": r.unchanged, "skipped": p.skipped,
                "duplicates": [str(d) for d in p.duplicates]}


def keys(queue: Queue, group_id: str, batch_ids: set[str]) -> dict[str, dict[str, frozenset[str]]]:
    """The items and chunks of each batch the store knows; an unknown one is left out."""
    out = {}
    for batch_id in sorted(batch_ids):
        row = queue.batch(group_id, batch_id)
        if row is not None:
            out[batch_id] = keys_of(batch_files.read_key(row["directory"]))
    return out


def import_parsed(queue: Queue, qrels: Qrels, group_id: str, parsed: Sequence[Parsed],
                  now: float | None = None) -> list[Imported]:
    """Add the labels of every file, or `Refused` with every problem of every file and nothing added."""
    known = keys(queue, group_id, set().union(*(p.batches for p in parsed)))
    labels = checked(parsed, known)
    return [Imported(p, qrels.add(found, p.file, now)) for p, found in zip(parsed, labels)]


def judged_batches(queue: Queue, qrels: Qrels, group_id: str, batch: str | None, weeks: int) -> list[Judged]:
    """Batch `batch`, or else the newest `weeks` batches, oldest first, each with
    its manifest, key and the latest version of its labels."""
    if batch is not None:
        row = queue.batch(group_id, batch)
        rows = [] if row is None else [row]
    else:
        rows = queue.recent_batches(group_id, weeks)
    return [Judged(*batch_files.read_batch(row["directory"]), qrels.latest(row["batch_id"])) for row in rows]


def calibrate(store, queue: Queue, qrels: Qrels, group_id: str, settings) -> list:
    """Refit the score calibrations on the newest judged batches (`settings`:
    judgment.calibration); `store` holds the queue, qrels and calibration tables."""
    from agent.jobs.calibrate import fit_and_store  # scikit-learn loads only to fit

    started = time.time()  # a fit is as new as the labels it read: an import committed meanwhile stays owed
    found = judged_batches(queue, qrels, group_id, None, settings.pool_batches)
    return fit_and_store(store, {b.manifest["batch_id"]: b.labels for b in found},
                         {b.manifest["batch_id"]: b.key for b in found}, settings, now=started)


def calibration_owed(store, qrels: Qrels) -> bool:
    """Whether labels were imported after the newest fit, or none was made yet."""
    imported = qrels.newest_import()
    fits = Calibrations(store).newest()
    return imported is not None and (not fits or max(f.fitted_at for f in fits) < imported)


def recalibrate(store, queue: Queue, qrels: Qrels, group_id: str, settings) -> tuple[list, str | None]:
    """After an import: the fits, if calibration was owed, and why fitting
    failed, if it did. A failure is returned, not raised: the import has
    committed, and the calibration stays owed."""
    try:
        return (calibrate(store, queue, qrels, group_id, settings) if calibration_owed(store, qrels) else []), None
    except (ExportError, StoreError) as exc:
        return [], str(exc)
