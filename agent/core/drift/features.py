"""The drift features by name and the fine grid each is stored on.

Numeric features are kept per app and day as counts on a fine `Grid`
(bins.py); mixes as counts per category. The default grids suit any scale,
so nothing needs configuring to start; an app whose values all sit in a
narrow range (cosine scores between 0.80 and 0.85, say) gets sharper
quantile bins from a linear grid over that range (`Grids.by_app`).

| feature | grid | resolution |
| --- | --- | --- |
| top1_score, mean_admitted_score, score_gap | asinh, scale 0.01, [-1000, 1000), 4000 cells | 0.6 % of the value above 0.1, 6e-5 near 0 |
| content_age_days | asinh, scale 1 day, [0, 36500), 800 cells | 1.4 % above a few days, 20 min near 0 |
| result_count | asinh, scale 1, [0, 2000), 800 cells | every integer its own cell up to ~100, then 1 % |
| latency_seconds | asinh, scale 1 ms, [0, 3600), 1600 cells | 1 % above 10 ms |
| parent_diversity | linear, [0, 1), 100 cells; 1.0 is the overflow cell | 0.01 |

A grid is part of the data's meaning: days stored on one grid cannot be
rebinned on another, so changing a feature's grid starts its history afresh.
So each stored day records, per app, the digest of each numeric feature's
grid (`Grid.digest`) in a row of its own (`GRIDS`); a row that two grids
counted into records `MIXED_GRID`, which matches no grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agent.core.drift.bins import Grid

TOP1_SCORE = "top1_score"
MEAN_SCORE = "mean_admitted_score"
SCORE_GAP = "score_gap"
CONTENT_AGE = "content_age_days"
RESULT_COUNT = "result_count"
LATENCY = "latency_seconds"
PARENT_DIVERSITY = "parent_diversity"
FEATURES = (TOP1_SCORE, MEAN_SCORE, SCORE_GAP, CONTENT_AGE, RESULT_COUNT, LATENCY, PARENT_DIVERSITY)

SOURCE = "source"
QUERY_TYPE = "query_type"
LANGUAGE = "language"
FILTER_OUTCOME = "filter_outcome"
QUERY_CLUSTER = "query_cluster"
MIXES = (SOURCE, QUERY_TYPE, LANGUAGE, FILTER_OUTCOME, QUERY_CLUSTER)

GRIDS = "grids"  # the stored row of a day and app naming each numeric feature's grid: {feature: digest}
MIXED_GRID = "mixed"  # a feature counted on two grids in one day (or one window): comparable with nothing


def merge_grids(into: dict[str, Any], grids: Mapping[str, str]) -> dict[str, Any]:
    """Add `grids` ({feature: digest}) to `into`: the same digest stays, another makes the feature MIXED_GRID."""
    for feature, digest in grids.items():
        held = into.get(feature)
        into[feature] = digest if held is None or held == digest else MIXED_GRID
    return into

_SCORE = Grid(-1000.0, 1000.0, 4000, scale=0.01)
DEFAULT_GRIDS: Mapping[str, Grid] = MappingProxyType({
    TOP1_SCORE: _SCORE,
    MEAN_SCORE: _SCORE,
    SCORE_GAP: _SCORE,
    CONTENT_AGE: Grid(0.0, 36500.0, 800, scale=1.0),
    RESULT_COUNT: Grid(0.0, 2000.0, 800, scale=1.0),
    LATENCY: Grid(0.0, 3600.0, 1600, scale=0.001),
    PARENT_DIVERSITY: Grid(0.0, 1.0, 100),
})  # fmt: skip


@dataclass(frozen=True)
class Grids:
    """The grid of each (app, feature): a per-app override, else a per-feature one, else the default."""

    by_feature: Mapping[str, Grid] = field(default_factory=dict)
    by_app: Mapping[str, Mapping[str, Grid]] = field(default_factory=dict)  # app -> feature -> grid

    def grid(self, app: str, feature: str) -> Grid:
        found = self.by_app.get(app, {}).get(feature) or self.by_feature.get(feature) or DEFAULT_GRIDS.get(feature)
        if found is None:
            raise ValueError(f"no grid for feature {feature!r} (app {app!r}): configure one in Grids")
        return found

    def to_dict(self) -> dict[str, Any]:
        return {"by_feature": {k: g.to_dict() for k, g in self.by_feature.items()},
                "by_app": {a: {k: g.to_dict() for k, g in m.items()} for a, m in self.by_app.items()}}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grids:
        by_app = {a: {k: Grid.from_dict(g) for k, g in m.items()} for a, m in data.get("by_app", {}).items()}
        return cls({k: Grid.from_dict(g) for k, g in data.get("by_feature", {}).items()}, by_app)
