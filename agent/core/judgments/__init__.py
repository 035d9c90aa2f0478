"""Judgment metrics, the pure maths: per-query IR metrics under the seed script's
or trec_eval's conventions, and a bootstrap interval for their means."""

from agent.core.judgments.bootstrap import Interval, bootstrap_interval
from agent.core.judgments.metrics import (
    METRICS,
    POLICIES,
    SEED,
    TREC,
    Policy,
    evaluate,
    per_query,
    policy_of,
)

__all__ = [
    "METRICS", "POLICIES", "SEED", "TREC",
    "Interval", "Policy",
    "bootstrap_interval", "evaluate", "per_query", "policy_of",
]  # fmt: skip
