"""The `drift` section of the agent's configuration (docs/drift.md).

Split from agent/io/settings/agent.py, which loads and validates it like every
other section (docs/operations.md lists each key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from agent.core.drift.bins import Grid
from agent.core.drift.days import DriftConfig
from agent.core.drift.features import FEATURES, Grids
from agent.core.drift.thresholds import ThresholdSettings

# A grid holds its cells + 1 edges, and a baseline one count per cell: far
# above any useful resolution (the defaults use at most 4000), well below
# what would exhaust memory when the agent builds it.
MAX_CELLS = 1 << 20


@dataclass(frozen=True)
class GridSettings:
    """One fine grid (agent/core/drift/bins.py): `cells` between lo and hi, uniform in asinh(x / scale) or in x."""

    lo: float = 0.0
    hi: float = 1.0
    cells: int = 100
    _: KW_ONLY
    scale: float | None = None


@dataclass(frozen=True, kw_only=True)
class DriftSettings:
    enabled: bool = True  # keep the daily drift counts in the store
    false_alarm_rate: float = ThresholdSettings().rate  # the rate baselines derive their thresholds for
    bins: int = 10  # quantile bins per numeric feature in a baseline
    max_categories: int = 20  # categories kept per mix in a baseline; the rest fold into "other"
    grids: dict[str, dict[str, GridSettings]] = field(default_factory=dict)  # app -> numeric feature -> its grid


def grids(d: DriftSettings) -> Grids:
    """The configured per-app grids; every other (app, feature) keeps the default."""
    return Grids(by_app={app: {f: Grid(float(g.lo), float(g.hi), g.cells, scale=g.scale) for f, g in features.items()}
                         for app, features in d.grids.items()})  # fmt: skip


def drift_config(d: DriftSettings) -> DriftConfig | None:
    """What each partition counts with; None when drift counting is off."""
    return DriftConfig(grids(d)) if d.enabled else None


def threshold_settings(d: DriftSettings) -> ThresholdSettings:
    """How `ragdrift baseline freeze` derives its thresholds."""
    return ThresholdSettings(rate=d.false_alarm_rate)


def check_drift(d: DriftSettings, need: Callable[[bool, str, str], None]) -> None:
    need(0 < d.false_alarm_rate < 0.5, "drift.false_alarm_rate", "must be in (0, 0.5)")
    need(d.bins >= 2, "drift.bins", "must be >= 2")
    need(d.max_categories >= 1, "drift.max_categories", "must be >= 1")
    for app, features in d.grids.items():
        for feature, g in features.items():
            key = f"drift.grids.{app}.{feature}"
            need(feature in FEATURES, key, f"not a numeric drift feature (one of {', '.join(FEATURES)})")
            need(g.cells <= MAX_CELLS, f"{key}.cells", f"must be at most {MAX_CELLS}")
            try:
                Grid(float(g.lo), float(g.hi), g.cells, scale=g.scale)
            except (TypeError, ValueError) as exc:
                need(False, key, str(exc))
