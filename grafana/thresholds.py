"""Read the alert thresholds the dashboards draw from rules/ragdrift.rules.yaml.

The rules file is the one place a threshold is written (its "Configuration"
comment block lists every knob). Each knob here is one regular expression on
one alert's `expr`, and it must match exactly once: a rules edit that moves a
threshold out of reach fails the build, naming the alert, rather than leaving
a dashboard with a stale number. The number group accepts a product of
literals (`8 * 86400`), which is evaluated.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules" / "ragdrift.rules.yaml"

_NUM = r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_PRODUCT = rf"{_NUM}(?:\s*\*\s*{_NUM})*"


@dataclass(frozen=True)
class Knob:
    """Where one threshold lives: an alert and a regex on its `expr` with one `value` group."""

    alert: str
    pattern: str
    what: str  # for error messages and panel descriptions
    guard: str | None = None  # the knob of the alert's minimum-traffic condition, if any


# Knobs that a `guard` names are minimum-traffic conditions, not drawn as a
# threshold; every other knob is a threshold some panel draws.
# knob name -> where it is read. Each pattern anchors on the alert's own
# comparison, so the other numbers of the expression (ranges, `> 0` guards)
# are never taken for the threshold.
KNOBS: dict[str, Knob] = {
    # app:ragdrift_zero_result:ratio_rate5m > 0.10
    "zero_result_ratio": Knob("RagdriftZeroResultRateHigh",
                              rf"app:ragdrift_zero_result:ratio_rate5m\s*>\s*(?P<value>{_PRODUCT})",
                              "share of retrievals with no results", guard="min_retrievals_rate"),
    # app:ragdrift_retrievals:rate5m >= 0.05 (the ratio alerts' minimum traffic)
    "min_retrievals_rate": Knob("RagdriftZeroResultRateHigh",
                                rf"app:ragdrift_retrievals:rate5m\s*>=\s*(?P<value>{_PRODUCT})",
                                "retrievals per second"),
    # app:ragdrift_stale_result:ratio_rate5m > 0.01
    "stale_result_ratio": Knob("RagdriftStaleRetrieval",
                               rf"app:ragdrift_stale_result:ratio_rate5m\s*>\s*(?P<value>{_PRODUCT})",
                               "share of admitted results that are stale", guard="min_stale_retrievals_rate"),
    # app:ragdrift_retrievals:rate5m >= 0.05 (the same guard, written again in this alert)
    "min_stale_retrievals_rate": Knob("RagdriftStaleRetrieval",
                                      rf"app:ragdrift_retrievals:rate5m\s*>=\s*(?P<value>{_PRODUCT})",
                                      "retrievals per second"),
    # filter:ragdrift_filter_error:ratio_rate5m > 0.01
    "filter_error_ratio": Knob("RagdriftFilterErrors",
                               rf"filter:ragdrift_filter_error:ratio_rate5m\s*>\s*(?P<value>{_PRODUCT})",
                               "share of filter runs ending in error", guard="min_filter_rate"),
    # filter:ragdrift_filter_outcomes:rate5m >= 0.05
    "min_filter_rate": Knob("RagdriftFilterErrors",
                            rf"filter:ragdrift_filter_outcomes:rate5m\s*>=\s*(?P<value>{_PRODUCT})",
                            "runs per second of the filter"),
    # ... / (sum (rate(ragdrift_events_total[5m])) > 0) > 0.01: the last comparison
    "dead_letter_ratio": Knob("RagdriftDeadLetters",
                              rf"\)\s*>\s*(?P<value>{_PRODUCT})\s*$",
                              "share of messages sent to the dead-letter topic"),
    # lag / throughput ... > 300: the last comparison
    "lag_drain_seconds": Knob("RagdriftConsumerLagHigh",
                              rf"\)\s*>\s*(?P<value>{_PRODUCT})\s*$",
                              "seconds to drain the backlog at the current rate"),
    # time() - ragdrift_last_checkpoint_timestamp_seconds > 600
    "checkpoint_age_seconds": Knob("RagdriftCheckpointStale",
                                   rf"time\(\)\s*-\s*ragdrift_last_checkpoint_timestamp_seconds\s*>\s*"
                                   rf"(?P<value>{_PRODUCT})",
                                   "seconds since the last successful checkpoint"),
    # ragdrift_kafka_unreachable_seconds > 120
    "kafka_unreachable_seconds": Knob("RagdriftKafkaUnreachable",
                                      rf"ragdrift_kafka_unreachable_seconds\s*>\s*(?P<value>{_PRODUCT})",
                                      "seconds without an answer from Kafka"),
    # time() - max(ragdrift_judgment_batch_last_timestamp_seconds) > 8 * 86400
    "judgment_batch_age_seconds": Knob("RagdriftJudgmentBatchMissing",
                                       rf"max\(ragdrift_judgment_batch_last_timestamp_seconds\)\s*>\s*"
                                       rf"(?P<value>{_PRODUCT})",
                                       "seconds since the newest judgment batch"),
}

# up{job=~"ragdrift.*"} == 0: the agent target selector, reused for `up`,
# `scrape_*` and `process_*` (the only unprefixed families the dashboards read).
TARGET_SELECTOR = Knob("RagdriftAgentDown", r"(?P<value>up\{[^}]*\})\s*==\s*0", "agent target selector")


GUARDS = frozenset(k.guard for k in KNOBS.values() if k.guard)
DRAWN = tuple(name for name in KNOBS if name not in GUARDS)


class RulesError(ValueError):
    """The rules file does not say what a knob needs."""


@dataclass(frozen=True)
class Threshold:
    """One alert threshold as the rules file writes it."""

    knob: str
    alert: str
    value: float
    for_: str  # the alert's `for:` ("0m" when it has none)
    text: str  # the literal as written, e.g. "8 * 86400"
    span: tuple[int, int]  # where `text` sits in the alert's expr


@dataclass(frozen=True)
class Rules:
    """Everything the dashboards read from the rules file."""

    thresholds: dict[str, Threshold]
    target_selector: str  # e.g. up{job=~"ragdrift.*"}

    def __getitem__(self, knob: str) -> Threshold:
        return self.thresholds[knob]

    @property
    def job_matcher(self) -> str:
        """The selector's matchers without braces, to add to `process_*` and `scrape_*`."""
        return self.target_selector[self.target_selector.index("{") + 1:-1]


def alerts_of(doc: dict) -> dict[str, dict]:
    """Alert name -> rule, over every group."""
    out = {}
    for group in doc.get("groups") or ():
        for rule in group.get("rules") or ():
            if "alert" in rule:
                out[rule["alert"]] = rule
    return out


def _match(alerts: dict[str, dict], knob: Knob) -> re.Match:
    rule = alerts.get(knob.alert)
    if rule is None:
        raise RulesError(f"alert {knob.alert} not in the rules file (needed for the {knob.what})")
    expr = str(rule["expr"]).strip()
    found = list(re.finditer(knob.pattern, expr, re.MULTILINE))
    if len(found) != 1:
        raise RulesError(f"alert {knob.alert}: expected the {knob.what} once in its expr "
                         f"(/{knob.pattern}/), found {len(found)} times in:\n{expr}")
    return found[0]


def _product(text: str) -> float:
    return math.prod(float(part) for part in text.split("*"))


def read(path: str | Path = RULES) -> Rules:
    """Every knob's threshold, the alert's `for:`, and the agent target selector."""
    doc = yaml.safe_load(Path(path).read_text())
    alerts = alerts_of(doc)
    thresholds = {}
    for name, knob in KNOBS.items():
        m = _match(alerts, knob)
        text = m.group("value")
        thresholds[name] = Threshold(name, knob.alert, _product(text), str(alerts[knob.alert].get("for", "0m")),
                                     text, m.span("value"))
    selector = _match(alerts, TARGET_SELECTOR).group("value")
    return Rules(thresholds, selector)
