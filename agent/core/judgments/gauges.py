"""The newest judged batch's report as the agent exports it: gauge rows per (app, view, stratum).

Plain data in (a report of agent/core/judgments/report.py), plain data out.
A stratum is "app|query_type"; its app is the part before the bar. The
views over every stratum and the `uniform` stratum (a sample of all
traffic) belong to no one app: app="all". Labels stay bounded: the strata
of one batch are at most the sampler's max_strata, plus uniform and other.
A metric a view cannot estimate (nothing judged for it) has no row.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

from agent.core.judgments.report import ALL

# report metric -> the suffix of its gauge family, ragdrift_judged_<suffix>
GAUGED = {"precision": "precision", "recall": "recall", "reciprocalRank": "reciprocal_rank", "hitRate": "hit_rate",
          "nDCG": "ndcg"}


@dataclass(frozen=True, kw_only=True)
class Figure:
    app: str
    view: str  # traffic | challenge
    stratum: str
    metric: str  # a key of GAUGED
    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class JudgedFigures:
    batch_id: str
    week: str
    items: dict[tuple[str, str, str], int]  # (app, view, stratum) -> judged items in the view
    _: KW_ONLY
    figures: tuple[Figure, ...]


def app_of(stratum: str) -> str:
    return stratum.split("|", 1)[0] if "|" in stratum else ALL


def gauges(report: dict[str, Any]) -> JudgedFigures:
    items, figures = {}, []
    for v in report["views"]:
        app = app_of(v["stratum"])
        items[(app, v["view"], v["stratum"])] = v["items"]
        for metric in GAUGED:
            m = v["metrics"].get(metric)
            if m is not None:
                figures.append(Figure(app=app, view=v["view"], stratum=v["stratum"], metric=metric, estimate=m["estimate"], low=m["low"],
                                      high=m["high"]))
    return JudgedFigures(str(report["batch_id"]), str(report["week"]), items, figures=tuple(figures))
