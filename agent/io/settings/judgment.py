"""The `judgment` section of the agent's configuration, and what the core makes of it.

Split from agent/io/settings/agent.py, which loads and validates it like every
other section (docs/operations.md lists each key; docs/judgments.md says
what they do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apscheduler.triggers.cron import CronTrigger

from agent.core.calibrated import ServingRule
from agent.core.judgment import JudgmentConfig
from agent.core.judgments.calibration import FOLDS, THRESHOLD
from agent.core.judgments.labels import GRADES
from agent.core.sampling import HOLDOUT_SHARE, SIGNALS, Budgets, RiskConfig
from agent.io.settings import checks

THRESHOLDS = ("top1_low", "gap_small", "rerank_shift", "new_terms_min", "rare_share")  # RiskConfig's
COUNTS = ("rerank_shift", "new_terms_min")  # the thresholds that count ranks or terms


@dataclass(frozen=True, kw_only=True)
class ResolverSettings:
    """Where a batch finds text for judges (agent/io/http/resolver.py): none, file, command or http."""

    kind: str = "none"
    path: str | None = None
    command: list[str] = field(default_factory=list)
    url: str | None = None
    timeout_seconds: float = 30.0


@dataclass(frozen=True)
class LabelStudioSettings:
    url: str | None = None  # set: each weekly batch also becomes a Label Studio project
    token_file: str | None = None
    token_env: str = "LABEL_STUDIO_TOKEN"


@dataclass(frozen=True, kw_only=True)
class CalibrationSettings:
    """Score calibration and the estimated precision of live traffic (docs/judgments.md, "Calibration")."""

    max_ece: float = ServingRule.max_ece  # the estimate is exported only while the cross-validated ECE is below this
    min_labels: int = ServingRule.min_labels  # ... and the fit saw at least this many judged chunks
    pool_batches: int = 8  # the newest batches (weeks) whose labels a fit pools
    folds: int = FOLDS  # cross-validation folds for the ECE and Brier score
    threshold: float = THRESHOLD  # grade >= threshold is relevant
    refresh_seconds: float = 60.0  # how often the agent reads the stored fits


@dataclass(frozen=True, kw_only=True)
class JudgmentSettings:
    """The judgment queue (docs/judgments.md): sampling, the weekly batch, its export."""

    enabled: bool = True
    budget: int = Budgets.k  # K: items per risk stratum (app x query type) and week
    uniform_budget: int = Budgets.uniform_k  # K of the uniform stratum
    budgets: dict[str, int] = field(default_factory=dict)  # per stratum "app|query_type" (every version) or "app|query_type|version"
    max_strata: int = Budgets.max_strata  # risk strata per week and partition; more share the stratum "other"
    weights: dict[str, float] = field(default_factory=dict)  # risk signal -> weight, over the defaults
    thresholds: dict[str, float] = field(default_factory=dict)  # over the defaults
    holdout_share: float = HOLDOUT_SHARE
    double_judged_share: float = 0.10
    salt: str = field(default="", repr=False)  # a secret: never in a repr (agent/io/settings/agent.py masks it)
    schedule: str = "0 6 * * mon"  # cron (minute hour day month day-of-week), UTC
    export_dir: str = "ragdrift-batches"
    batch_timeout_seconds: float = 300.0  # a batch build or push: its every request (resolver, Label Studio), together
    resolver: ResolverSettings = field(default_factory=ResolverSettings)
    label_studio: LabelStudioSettings = field(default_factory=LabelStudioSettings)
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)


def risk_config(j: JudgmentSettings) -> RiskConfig:
    """The risk weights and thresholds the core assesses events with."""
    thresholds: dict[str, Any] = {name: (int(v) if name in COUNTS else v) for name, v in j.thresholds.items()}
    return RiskConfig(weights=dict(j.weights), **thresholds)


def budgets(j: JudgmentSettings) -> Budgets:
    return Budgets(k=j.budget, uniform_k=j.uniform_budget, k_by_stratum=dict(j.budgets), max_strata=j.max_strata)


def judgment_config(j: JudgmentSettings) -> JudgmentConfig | None:
    """What each partition samples with; None when the judgment queue is off."""
    return JudgmentConfig(risk_config(j), budgets(j), j.salt) if j.enabled else None


def unsalted(j: JudgmentSettings) -> str | None:
    """The warning for a judgment queue on without a salt, or None. Not an
    error: the default has none (so has a Helm install without the secret),
    and the agent counts and samples without it; but the weekly batch would
    fail (agent/core/batch.py) and the sample is keyed by nothing secret."""
    if not j.enabled or j.salt:
        return None
    return ("judgment.salt: empty: no weekly batch is built and which events are sampled is predictable; "
            "set it (or RAGDRIFT_JUDGMENT__SALT) to a long random secret, or judgment.enabled: false")


def serving_rule(c: CalibrationSettings) -> ServingRule:
    """When a stored calibration may estimate live precision."""
    return ServingRule(max_ece=c.max_ece, min_labels=c.min_labels)


def check_judgment(j: JudgmentSettings, need: Callable[[bool, str, str], None]) -> None:
    """Validate the section; `need(ok, key, why)` raises the settings' ConfigError."""
    need(j.budget >= 1, "judgment.budget", "must be >= 1")
    need(j.uniform_budget >= 1, "judgment.uniform_budget", "must be >= 1")
    for stratum, k in j.budgets.items():
        need(k >= 1, f"judgment.budgets.{stratum}", "must be >= 1")
    need(j.max_strata >= 1, "judgment.max_strata", "must be >= 1")
    for signal, weight in j.weights.items():
        need(signal in SIGNALS, f"judgment.weights.{signal}", f"unknown risk signal (known: {', '.join(SIGNALS)})")
        need(weight >= 0, f"judgment.weights.{signal}", "must be >= 0")
    for name, value in j.thresholds.items():
        key = f"judgment.thresholds.{name}"
        need(name in THRESHOLDS, key, f"unknown threshold (known: {', '.join(THRESHOLDS)})")
        need(name not in COUNTS or (checks.whole(value) and value >= 1), key, "must be a whole number >= 1")
        need(name != "rare_share" or 0 <= value <= 1, key, "must be in [0, 1]")
    need(0 <= j.holdout_share < 1, "judgment.holdout_share", "must be in [0, 1)")
    need(0 <= j.double_judged_share <= 1, "judgment.double_judged_share", "must be in [0, 1]")
    need(checks.path(j.export_dir), "judgment.export_dir", "must be a directory path")
    need(j.batch_timeout_seconds > 0, "judgment.batch_timeout_seconds", "must be > 0")
    try:
        CronTrigger.from_crontab(j.schedule, timezone="UTC")
    except ValueError as exc:
        need(False, "judgment.schedule", f"not a cron expression (minute hour day month day-of-week): {exc}")
    try:
        risk_config(j)
        budgets(j)
    except ValueError as exc:
        need(False, "judgment", str(exc))
    c = j.calibration
    need(0 < c.max_ece <= 1, "judgment.calibration.max_ece", "must be in (0, 1]")
    need(c.folds >= 2, "judgment.calibration.folds", "must be >= 2")
    need(c.min_labels >= c.folds, "judgment.calibration.min_labels", "must be >= judgment.calibration.folds")
    need(c.pool_batches >= 1, "judgment.calibration.pool_batches", "must be >= 1")
    need(c.refresh_seconds > 0, "judgment.calibration.refresh_seconds", "must be > 0")
    need(min(GRADES) < c.threshold <= max(GRADES), "judgment.calibration.threshold",
         f"must be in ({min(GRADES)}, {max(GRADES)}]: a grade at least this is relevant")
    r = j.resolver
    need(r.kind in ("none", "file", "command", "http"), "judgment.resolver.kind", "must be none, file, command or http")
    need(r.kind != "file" or r.path is not None, "judgment.resolver.path", "is required for kind file")
    need(r.path is None or checks.path(r.path), "judgment.resolver.path", "must be a file path")
    need(r.kind != "command" or bool(r.command), "judgment.resolver.command", "is required for kind command")
    need(not r.command or checks.path(r.command[0]), "judgment.resolver.command", "must start with a program")
    need(r.kind != "http" or r.url is not None, "judgment.resolver.url", "is required for kind http")
    need(r.url is None or checks.http_url(r.url), "judgment.resolver.url", "must be an http:// or https:// URL")
    need(r.timeout_seconds > 0, "judgment.resolver.timeout_seconds", "must be > 0")
    ls = j.label_studio
    need(ls.url is None or checks.http_url(ls.url), "judgment.label_studio.url", "must be an http:// or https:// URL")
    need(ls.token_file is None or checks.path(ls.token_file), "judgment.label_studio.token_file", "must be a file path")
    need(checks.env_name(ls.token_env), "judgment.label_studio.token_env", "must be an environment variable name")
