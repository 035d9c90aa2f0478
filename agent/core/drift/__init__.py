"""Drift, the pure maths: fine daily grids and quantile bins, the distances
between binned distributions, thresholds derived from the baseline itself,
and the frozen baseline a window is evaluated against (docs/drift.md)."""

from agent.core.drift.baseline import (
    BASELINE_FORMAT,
    AppBaseline,
    Baseline,
    Counts,
    DayData,
    FeatureReference,
    Finding,
    GridMismatch,
    content_version,
    evaluate,
    freeze,
    grid_mismatches,
)
from agent.core.drift.bins import OTHER, Bins, Categories, Grid
from agent.core.drift.features import (
    CONTENT_AGE,
    DEFAULT_GRIDS,
    FEATURES,
    FILTER_OUTCOME,
    LANGUAGE,
    LATENCY,
    MEAN_SCORE,
    MIXES,
    PARENT_DIVERSITY,
    QUERY_CLUSTER,
    QUERY_TYPE,
    RESULT_COUNT,
    SCORE_GAP,
    SOURCE,
    TOP1_SCORE,
    Grids,
)
from agent.core.drift.stats import (
    LOWER_IS_WORSE,
    MIX_STATS,
    NUMERIC_STATS,
    PSI_EPSILON,
    chi2_p,
    chi2_test,
    js,
    ks,
    psi,
    statistic,
    wasserstein,
)
from agent.core.drift.thresholds import (
    DEFAULT_THRESHOLDS,
    Threshold,
    ThresholdSettings,
    alarm,
    derive_thresholds,
    expected_rate,
    quantile,
)

__all__ = [
    "BASELINE_FORMAT", "CONTENT_AGE", "DEFAULT_GRIDS", "DEFAULT_THRESHOLDS", "FEATURES", "FILTER_OUTCOME",
    "LANGUAGE", "LATENCY", "LOWER_IS_WORSE", "MEAN_SCORE", "MIXES", "MIX_STATS", "NUMERIC_STATS", "OTHER",
    "PARENT_DIVERSITY", "PSI_EPSILON", "QUERY_CLUSTER", "QUERY_TYPE", "RESULT_COUNT", "SCORE_GAP", "SOURCE",
    "TOP1_SCORE",
    "AppBaseline", "Baseline", "Bins", "Categories", "Counts", "DayData", "FeatureReference", "Finding", "Grid",
    "GridMismatch", "Grids", "Threshold", "ThresholdSettings",
    "alarm", "chi2_p", "chi2_test", "content_version", "derive_thresholds", "evaluate", "expected_rate", "freeze",
    "grid_mismatches", "js", "ks", "psi", "quantile", "statistic", "wasserstein",
]  # fmt: skip
