"""The `drift` section of the agent's configuration (docs/drift.md).

Split from agent/io/settings.py, which loads and validates it like every
other section (docs/operations.md lists each key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.core.drift.calibrate import Calibration
from agent.core.drift.days import DriftConfig


@dataclass(frozen=True)
class DriftSettings:
    enabled: bool = True  # keep the daily drift counts in the store
    false_alarm_rate: float = Calibration().rate  # the rate baselines calibrate their thresholds for
    bins: int = 10  # quantile bins per numeric feature in a baseline
    max_categories: int = 20  # categories kept per mix in a baseline; the rest fold into "other"


def drift_config(d: DriftSettings) -> DriftConfig | None:
    """What each partition counts with; None when drift counting is off."""
    return DriftConfig() if d.enabled else None


def calibration(d: DriftSettings) -> Calibration:
    return Calibration(rate=d.false_alarm_rate)


def check_drift(d: DriftSettings, need: Callable[[bool, str, str], None]) -> None:
    need(0 < d.false_alarm_rate < 0.5, "drift.false_alarm_rate", "must be in (0, 0.5)")
    need(d.bins >= 2, "drift.bins", "must be >= 2")
    need(d.max_categories >= 1, "drift.max_categories", "must be >= 1")
