"""Import judged labels: check them against their batch's key, then version them.

The batch of each label comes from its item id; the store's
`ragdrift_batches` says where that batch was written, and its key.jsonl
which items and chunks it holds. Every file is checked before anything is
written, so a command that names a bad file imports nothing; each good file
is then added in a transaction of its own (agent/io/qrels.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.core.judgments.judged import Judged
from agent.core.judgments.importing import Parsed, Refused, checked, keys_of
from agent.core.judgments.qrels import Revision
from agent.io import export
from agent.io.qrels import Qrels
from agent.io.queue import Queue


@dataclass(frozen=True)
class Imported:
    parsed: Parsed
    revision: Revision

    def summary(self) -> dict:
        p, r = self.parsed, self.revision
        return {"file": p.file, "format": p.format, "batches": sorted(p.batches), "labels": len(p.rows),
                "new": r.new, "changed": r.changed, "unchanged": r.unchanged, "skipped": p.skipped}


def keys(queue: Queue, group_id: str, batch_ids: set[str]) -> dict[str, dict[str, frozenset[str]]]:
    """The items and chunks of each batch the store knows; an unknown one is left out."""
    out = {}
    for batch_id in sorted(batch_ids):
        row = queue.batch(group_id, batch_id)
        if row is not None:
            out[batch_id] = keys_of(export.read_key(row["directory"]))
    return out


def import_parsed(queue: Queue, qrels: Qrels, group_id: str, parsed: Sequence[Parsed],
                  now: float | None = None) -> list[Imported]:
    """Add the labels of every file, or `Refused` with every problem of every file and nothing added."""
    known = keys(queue, group_id, set().union(*(p.batches for p in parsed)))
    labels, problems = [], []
    for p in parsed:
        try:
            labels.append(checked(p, known))
        except Refused as exc:
            problems += exc.problems
    if problems:
        raise Refused(problems)
    return [Imported(p, qrels.add(found, p.file, now)) for p, found in zip(parsed, labels)]


def judged_batches(queue: Queue, qrels: Qrels, group_id: str, batch: str | None, weeks: int) -> list[Judged]:
    """Batch `batch`, or else the newest `weeks` batches, oldest first, each with
    its manifest, key and the latest version of its labels."""
    if batch is not None:
        row = queue.batch(group_id, batch)
        rows = [] if row is None else [row]
    else:
        rows = queue.recent_batches(group_id, weeks)
    return [Judged(*export.read_batch(row["directory"]), qrels.latest(row["batch_id"])) for row in rows]


def calibrate(store, queue: Queue, qrels: Qrels, group_id: str, settings) -> list:
    """Refit the score calibrations on the newest judged batches (`settings`:
    judgment.calibration); `store` holds the queue, qrels and calibration tables."""
    from agent.jobs.calibrate import fit_and_store  # scikit-learn loads only to fit

    found = judged_batches(queue, qrels, group_id, None, settings.pool_batches)
    return fit_and_store(store, {b.manifest["batch_id"]: b.labels for b in found},
                         {b.manifest["batch_id"]: b.key for b in found}, settings)
