"""The `live_gate` section of the agent's configuration (docs/operations.md, docs/judgments.md).

Split from agent/io/settings/agent.py, which loads and validates it like every
other section. The same section gives the agent's periodic evaluation and
`ragdrift compare --live` their thresholds, so both judge alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.core.compare.live import LiveConfig
from agent.core.compare.live_verdict import LiveThresholds
from agent.core.labels import OTHER
from agent.core.pipelines import NO_VERSION
from agent.io.settings import checks

_T = LiveThresholds()
_C = LiveConfig()


@dataclass(frozen=True, kw_only=True)
class LiveGateSettings:
    enabled: bool = False  # count per pipeline version and export the gate's verdict
    stable: str = ""  # the stable version; empty (with candidate): per app, of the versions serving (`pair_of`)
    candidate: str = ""  # the version on trial
    window_days: int = 7  # the agent evaluates the last this many UTC days, today included
    refresh_seconds: float = 300.0
    sample_rate: float = _C.sample_rate  # share of query ids whose per-query rows are kept
    examples: int = _C.examples  # event ids kept per day, app, version and hard gate
    retention_days: int = 35  # per-query rows older than this are deleted
    max_versions: int = _C.max_versions  # a partition's places per app and day for versions counted by name
    max_held_queries: int = _C.max_held_queries  # per-query rows held before a checkpoint is asked for
    min_queries: int = _T.min_queries
    min_slice_queries: int = _T.min_slice_queries
    min_days: int = _T.min_days
    material_factor: float = _T.material_factor
    false_alarm_rate: float = _T.false_alarm_rate
    level: float = _T.level
    resamples: int = _T.resamples
    max_unauthorized: int = _T.max_unauthorized
    max_stale_conflicts: int = _T.max_stale_conflicts
    filter_zero_alpha: float = _T.filter_zero_alpha
    min_margin: float = _T.min_margin  # the material threshold's floor
    min_paired_share: float = _T.min_paired_share  # shared queries needed, as a share of each version's
    max_queries: int = _T.max_queries  # queries compared per version (the lowest hashes of the query id)


def live_config(s: LiveGateSettings) -> LiveConfig:
    """What each partition counts with: only the two configured versions, when both are."""
    versions = (s.stable, s.candidate) if s.stable and s.candidate else ()
    return LiveConfig(versions=versions, max_versions=s.max_versions, sample_rate=s.sample_rate, examples=s.examples,
                      max_held_queries=s.max_held_queries)


def thresholds(s: LiveGateSettings) -> LiveThresholds:
    return LiveThresholds(min_queries=s.min_queries, min_slice_queries=s.min_slice_queries, min_days=s.min_days,
                          material_factor=s.material_factor, false_alarm_rate=s.false_alarm_rate, level=s.level,
                          resamples=s.resamples, max_unauthorized=s.max_unauthorized,
                          max_stale_conflicts=s.max_stale_conflicts, filter_zero_alpha=s.filter_zero_alpha,
                          min_margin=s.min_margin, min_paired_share=s.min_paired_share, max_queries=s.max_queries)


def check_live_gate(s: LiveGateSettings, need: Callable[[bool, str, str], None]) -> None:
    need(bool(s.stable) == bool(s.candidate), "live_gate.stable", "give stable and candidate together, or neither")
    need(not s.stable or s.stable != s.candidate, "live_gate.candidate", "must differ from live_gate.stable")
    for key in ("stable", "candidate"):
        value = getattr(s, key)
        need(not value or checks.short_text(value), f"live_gate.{key}",
             "must be a pipeline version as events send it (1-128 characters, no control characters)")
        need(value not in (OTHER, NO_VERSION), f"live_gate.{key}",
             f"{value!r} is the label of events without a version or beyond the list")
    need(s.window_days >= 1, "live_gate.window_days", "must be >= 1")
    need(s.refresh_seconds > 0, "live_gate.refresh_seconds", "must be > 0")
    need(0 < s.sample_rate <= 1, "live_gate.sample_rate", "must be in (0, 1]")
    need(0 <= s.examples <= 100, "live_gate.examples", "must be from 0 to 100")
    need(s.retention_days >= s.window_days, "live_gate.retention_days", "must be >= live_gate.window_days")
    need(s.max_versions >= 2, "live_gate.max_versions", "must be >= 2")
    need(s.max_held_queries >= 1, "live_gate.max_held_queries", "must be >= 1")
    need(s.min_queries >= 1, "live_gate.min_queries", "must be >= 1")
    need(s.min_slice_queries >= 1, "live_gate.min_slice_queries", "must be >= 1")
    need(s.min_days >= 3, "live_gate.min_days", "must be >= 3")
    need(s.material_factor > 0, "live_gate.material_factor", "must be > 0")
    need(0 < s.false_alarm_rate < 0.5, "live_gate.false_alarm_rate", "must be in (0, 0.5)")
    need(0 < s.level < 1, "live_gate.level", "must be in (0, 1)")
    need(100 <= s.resamples <= 100_000, "live_gate.resamples", "must be from 100 to 100000")
    need(s.max_unauthorized >= 0, "live_gate.max_unauthorized", "must be >= 0")
    need(s.max_stale_conflicts >= 0, "live_gate.max_stale_conflicts", "must be >= 0")
    need(0 < s.filter_zero_alpha < 1, "live_gate.filter_zero_alpha", "must be in (0, 1)")
    need(s.min_margin >= 0, "live_gate.min_margin", "must be >= 0")
    need(0 <= s.min_paired_share <= 1, "live_gate.min_paired_share", "must be from 0 to 1")
    need(s.max_queries >= s.min_queries, "live_gate.max_queries", "must be >= live_gate.min_queries")
