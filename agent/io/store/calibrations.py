"""Fitted score calibrations, as rows in the store.

`ragdrift_calibrations` holds one row per fit: app, pipeline version, when it
was fitted, and the calibration's JSON (agent/core/judgments/calibration.py:
thresholds, label count, cross-validated ECE and Brier score, batches used).
Rows are never changed: each fit after an import adds rows, so the history of
how well scores were calibrated stays. The agent reads the newest fit per app
and pipeline version.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from sqlalchemy import Column, Float, LargeBinary, MetaData, String, Table, and_, func, select
from sqlalchemy.exc import SQLAlchemyError

from agent.core.judgments.calibration import ScoreFit
from agent.io.store.database import StoreError

_CALIBRATIONS = "ragdrift_calibrations"
NO_VERSION = ""  # events without pipeline.version (a real version is 1-128 characters)


def calibrations_table(metadata: MetaData) -> Table:
    return Table(
        _CALIBRATIONS, metadata,
        Column("app", String(64), primary_key=True),
        Column("pipeline_version", String(128), primary_key=True),
        Column("fitted_at", Float, primary_key=True),
        Column("calibration", LargeBinary, nullable=False),  # ScoreFit.to_dict() as JSON
    )


TABLES = (calibrations_table,)


class Calibrations:
    """Reads and writes of the calibrations table, on a store opened with `TABLES`."""

    def __init__(self, store):
        self.store = store
        self.table = store.joined(_CALIBRATIONS)

    def add(self, calibrations: Iterable[ScoreFit]) -> None:
        """Store new fits; a fit stored again (same app, version and time) is kept once."""
        rows = [{"app": c.app, "pipeline_version": c.pipeline_version or NO_VERSION, "fitted_at": c.fitted_at,
                 "calibration": orjson.dumps(c.to_dict())} for c in calibrations]
        if not rows:
            return
        try:
            with self.store.engine.begin() as conn:
                conn.execute(self.store.insert(self.table).on_conflict_do_nothing(), rows)
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot store calibrations: {self.store.describe(exc)}") from exc

    def newest(self) -> list[ScoreFit]:
        """The newest fit of every (app, pipeline version)."""
        c = self.table.c
        last = (select(c.app, c.pipeline_version, func.max(c.fitted_at).label("fitted_at"))
                .group_by(c.app, c.pipeline_version).subquery())
        query = select(c.calibration).join(last, and_(
            c.app == last.c.app, c.pipeline_version == last.c.pipeline_version, c.fitted_at == last.c.fitted_at,
        )).order_by(c.app, c.pipeline_version)
        return [_decoded(row.calibration) for row in self.store.read(query)]

    def history(self, app: str) -> list[ScoreFit]:
        """Every fit of one app, oldest first."""
        c = self.table.c
        query = select(c.calibration).where(c.app == app).order_by(c.fitted_at, c.pipeline_version)
        return [_decoded(row.calibration) for row in self.store.read(query)]


def _decoded(data: bytes) -> ScoreFit:
    try:
        return ScoreFit.from_dict(orjson.loads(data))
    except (TypeError, ValueError) as exc:
        raise StoreError(f"a stored calibration cannot be read: {exc}") from exc
