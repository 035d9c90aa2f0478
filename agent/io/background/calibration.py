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

from agent.core.calibrated import Active, ServingRule
from agent.io.background.periodic import Periodic
from agent.io.store.calibrations import Calibrations

log = logging.getLogger("ragdrift.calibration")


class CalibrationWatch(Periodic):
    """The refresh job and the calibrations it last loaded."""

    def __init__(self, calibrations: Calibrations, rule: ServingRule, refresh_seconds: float = 60.0, *,
                 scheduler: BackgroundScheduler):
        super().__init__("calibration-refresh", refresh_seconds, log, what="the calibrations", scheduler=scheduler)
        self.calibrations = calibrations
        self.rule = rule
        self.active = Active()

    def reload(self) -> None:
        self.active = Active(self.calibrations.newest(), self.rule)
