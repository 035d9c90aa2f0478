"""Estimated precision of live traffic: calibrated probabilities of relevance.

A calibration (agent/core/judgments/calibration.py) turns an admitted chunk's
score into the probability that judges would call it relevant; their mean
over the admitted chunks of a window estimates the window's precision at the
real cutoff. Two window counters carry it, so replicas merge:
`estimated_relevant_results` (the sum of the probabilities: the expected
number of relevant admitted results) over `calibrated_results`.

A calibration is in force only for events of the app and pipeline version it
was fitted on (another retriever, embedding model or reranker scores on
another scale), and only while it is trustworthy: enough labels, and a
cross-validated calibration error under the bound. An event it cannot serve
counts its admitted results in `uncalibrated_results` by reason, which the
snapshot turns into each app's calibration status.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.core.judgments.calibration import ScoreFit, interpolate
from agent.core.tally import Counter, Tally, inc
from agent.core.view import Table, View

OK = "ok"
TOO_FEW_LABELS = "too_few_labels"
ERROR_TOO_HIGH = "error_too_high"
PIPELINE_CHANGED = "pipeline_changed"
NONE = "none"
STATUSES = (OK, TOO_FEW_LABELS, ERROR_TOO_HIGH, PIPELINE_CHANGED, NONE)

ESTIMATED_RELEVANT = Counter("estimated_relevant_results", ("app",),
                             "Sum of the calibrated probabilities of relevance of admitted results.")
CALIBRATED = Counter("calibrated_results", ("app",), "Admitted results given a calibrated probability of relevance.")
UNCALIBRATED = Counter("uncalibrated_results", ("app", "reason"),
                       "Admitted results of apps with a stored calibration that none could serve, by reason.")
METRICS = (ESTIMATED_RELEVANT, CALIBRATED, UNCALIBRATED)
BY_REASON = Table(None, UNCALIBRATED.key)


@dataclass(frozen=True)
class ServingRule:
    """When a calibration may estimate live precision."""

    max_ece: float = 0.05  # cross-validated expected calibration error must be below this
    min_labels: int = 1000  # judged chunks it was fitted on (docs/judgments.md: the noise floor of the ECE)


def status_of(calibration: ScoreFit, rule: ServingRule) -> str:
    if calibration.ece is None or calibration.n < rule.min_labels:
        return TOO_FEW_LABELS
    return OK if calibration.ece < rule.max_ece else ERROR_TOO_HIGH


class Active:
    """The calibrations in force: per (app, pipeline version) the newest fit,
    or the reason it may not serve. Immutable; the agent replaces it whole."""

    __slots__ = ("by_pair", "apps")

    def __init__(self, calibrations: Iterable[ScoreFit] = (), rule: ServingRule = ServingRule()):
        newest: dict[tuple[str, str | None], ScoreFit] = {}
        for c in calibrations:
            pair = (c.app, c.pipeline_version)
            if pair not in newest or c.fitted_at > newest[pair].fitted_at:
                newest[pair] = c
        self.by_pair: dict[tuple[str, str | None], ScoreFit | str] = {
            pair: c if status_of(c, rule) == OK else status_of(c, rule) for pair, c in newest.items()
        }
        self.apps = frozenset(app for app, _ in newest)

    def __bool__(self) -> bool:
        return bool(self.by_pair)


def observe(view: View, tally: Tally) -> None:
    active = view.calibrations
    admitted = view.facts.admitted
    if not active or not admitted:
        return
    event = view.facts.event
    found = active.by_pair.get((event.app, event.pipeline.version if event.pipeline is not None else None))
    if found is None:
        if event.app not in active.apps:
            return  # status none: nothing to count
        found = PIPELINE_CHANGED
    if isinstance(found, str):
        inc(tally, view.keys[BY_REASON][found], len(admitted))
        return
    x, y = found.x, found.y
    relevant = 0.0
    for r in admitted:
        relevant += interpolate(x, y, r.score)
    inc(tally, view.keys[ESTIMATED_RELEVANT], relevant)
    inc(tally, view.keys[CALIBRATED], len(admitted))


def status(calibrated: float, uncalibrated: dict[str, float]) -> str:
    """An app's status in a window: ok when something was calibrated (the
    estimate is exported), else the reason most of its results had, else none."""
    if calibrated:
        return OK
    if any(uncalibrated.values()):
        return max(uncalibrated, key=lambda reason: (uncalibrated[reason], -STATUSES.index(reason)))
    return NONE
