"""Fit the score calibrations from judged batches and store them.

Called after every import of labels (`ragdrift judgments import` / `pull`)
and by `ragdrift judgments calibrate`. It takes plain data, the newest labels
and the key of each batch, so it does not care where they were read from.
The newest `pool_batches` batches (one a week, so eight weeks by default)
are pooled: one week's labels are too few for a stable fit, and older ones
describe a retriever that has since changed. Fits are per app and pipeline
version, as the core defines them (agent/core/judgments/calibration.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from agent.core.judgments.calibration import ScoreFit, fit_all
from agent.core.judgments.judged import judged
from agent.core.judgments.labels import Label
from agent.io.settings.judgment import CalibrationSettings
from agent.io.store.calibrations import Calibrations


def pooled(batch_ids: Iterable[str], pool_batches: int) -> list[str]:
    """The newest `pool_batches` batch ids; ids start with their ISO week, so they sort by age."""
    return sorted(batch_ids)[-pool_batches:]


def fit_and_store(store, labels_by_batch: Mapping[str, Iterable[Label]], key_by_batch: Mapping[str, Iterable[Mapping]],
                  settings: CalibrationSettings, now: float | None = None) -> list[ScoreFit]:
    """Fit a calibration per app and pipeline version on the newest judged
    batches (those with both labels and a key), store them, and return them.
    `store` is a Store opened with the calibration feature's tables (agent/io/features/calibration.py)."""
    batches = pooled(set(labels_by_batch) & set(key_by_batch), settings.pool_batches)
    items = {batch_id: judged(key_by_batch[batch_id], labels_by_batch[batch_id]) for batch_id in batches}
    fits = fit_all(items, threshold=settings.threshold, folds=settings.folds,
                   fitted_at=time.time() if now is None else now)
    Calibrations(store).add(fits)
    return fits
