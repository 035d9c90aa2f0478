"""The score calibrations in force in the running agent.

Every `judgment.calibration.refresh_seconds` (and once at start) a background
job reads the newest stored fit of every app and pipeline version and
replaces `active` whole (agent/core/calibrated.py decides which may serve).
The agent hands `active` to its partitions before each poll's events; a
failed read keeps the last set, and the next refresh tries again.
"""

from __future__ import annotations

import logging

from apscheduler.schedulers.background import BackgroundScheduler

from agent.core.calibrated import Active, Gate
from agent.io.calibrations import Calibrations
from agent.io.store import StoreError

log = logging.getLogger("ragdrift.calibration")


class CalibrationWatch:
    """The refresh job and the calibrations it last loaded."""

    def __init__(self, calibrations: Calibrations, gate: Gate, refresh_seconds: float = 60.0):
        self.calibrations = calibrations
        self.gate = gate
        self.active = Active()
        self.scheduler = BackgroundScheduler(timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1})
        self.scheduler.add_job(self.refresh, "interval", seconds=refresh_seconds, id="calibration-refresh")

    def start(self) -> CalibrationWatch:
        self.scheduler.start()
        self.scheduler.add_job(self.refresh, id="calibration-refresh-now")  # once, at start
        return self

    def stop(self) -> None:
        self.scheduler.shutdown(wait=False)

    def refresh(self) -> None:
        try:
            self.active = Active(self.calibrations.newest(), self.gate)
        except StoreError as exc:
            log.warning("cannot read the calibrations", extra={"error": str(exc)})
        except Exception:
            log.exception("reading the calibrations failed")
