"""Judgment sampling, the pure maths: risk weights, hashed priorities, priority
sampling per stratum and ISO week, and the estimates it supports (docs/judgments.md)."""

from agent.core.sampling.candidate import (
    OTHER,
    STRATUM_CHARS,
    UNIFORM,
    Candidate,
    ResultRef,
    Selection,
    budget_for,
    candidate,
    candidates_of,
    select,
    strata_for,
    stratum_key,
)
from agent.core.sampling.estimate import (
    Estimate,
    Ratio,
    estimate,
    estimate_total,
    ht_weight,
    ratio,
    variance,
)
from agent.core.sampling.priority import (
    HOLDOUT_SHARE,
    in_holdout,
    iso_week,
    shift_week,
    uniform,
    week_bounds,
)
from agent.core.sampling.risk import (
    CORRECTION,
    DEFAULT_WEIGHTS,
    FILTER_ZERO,
    LOW_TOP1,
    NEW_TERMS,
    RARE_SLICE,
    REPHRASED,
    RERANK_DISAGREEMENT,
    SIGNALS,
    SMALL_GAP,
    STALE,
    THUMBS_DOWN,
    UNAUTHORIZED,
    ZERO_RESULT,
    Risk,
    RiskConfig,
    RiskReference,
    assess,
)
from agent.core.sampling.sampler import (
    SAMPLER_VERSION,
    Budgets,
    Changes,
    RowKey,
    Sampler,
)

__all__ = [
    "CORRECTION", "DEFAULT_WEIGHTS", "FILTER_ZERO", "HOLDOUT_SHARE", "LOW_TOP1", "NEW_TERMS", "OTHER",
    "RARE_SLICE", "REPHRASED", "RERANK_DISAGREEMENT", "SAMPLER_VERSION", "SIGNALS", "SMALL_GAP", "STALE", "STRATUM_CHARS",
    "THUMBS_DOWN", "UNAUTHORIZED", "UNIFORM", "ZERO_RESULT",
    "Budgets", "Candidate", "Changes", "Estimate", "Ratio", "ResultRef", "Risk", "RiskConfig", "RiskReference", "RowKey",
    "Sampler", "Selection",
    "assess", "budget_for", "candidate", "candidates_of", "estimate", "estimate_total", "ht_weight", "in_holdout", "iso_week", "ratio", "select",
    "shift_week", "strata_for", "stratum_key", "uniform", "variance", "week_bounds",
]  # fmt: skip
