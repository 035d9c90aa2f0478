"""The score calibrations' io side: their table, and the set in force handed to each partition
before its records are processed (agent/io/background/calibration.py)."""

from __future__ import annotations

from agent.core.state import PartitionState
from agent.io.background.calibration import CalibrationWatch
from agent.io.features import FeatureAdapter, Wiring
from agent.io.settings.agent import Settings
from agent.io.settings.judgment import serving_rule
from agent.io.store import calibrations
from agent.io.store.calibrations import Calibrations


class ScoreCalibrations(FeatureAdapter):
    name = "calibration"  # no partition feature: it supplies the fits in force, which the metric families read
    tables = calibrations.TABLES

    @staticmethod
    def enabled(settings: Settings) -> bool:
        return settings.judgment.enabled

    def __init__(self, wiring: Wiring):
        section = wiring.settings.judgment.calibration
        self.watch = CalibrationWatch(Calibrations(wiring.store), serving_rule(section), section.refresh_seconds,
                                      scheduler=wiring.scheduler)

    def start(self) -> None:
        self.watch.start()

    def prepare(self, state: PartitionState) -> None:
        state.supply(self.name, calibrations=self.watch.active)
