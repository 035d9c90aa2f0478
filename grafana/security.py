"""Security and freshness: did an app serve what its user may not see, or what
is no longer true? Unauthorized results and missing identity claims, stale
results and stale/current conflicts, with trace exemplars.

The controlled target of the security counters is zero, so their counts show
0 in green and anything else in red, and they never show "no data": a counter
that was never created counts 0 (`or vector(0)`). A count over the dashboard's
range also counts a series born inside the range with its whole value (a new
pod or app whose first result arrives before its first scrape), which
`increase()` alone would miss, as the paging rules do (rules/ragdrift.rules.yaml).
"""

from __future__ import annotations

from grafana.kit import APP, Board, Q, query_variable
from grafana.overview import rate, series
from grafana.thresholds import Rules

UID = "ragdrift-security-freshness"
R = "$__rate_interval"
W = 'window="$window"'


def count_in_range(metric: str) -> str:
    """Increments in the dashboard's range, summed over replicas and selected apps, 0 when absent."""
    c = series(metric, APP)
    return (f"sum(\n    (increase({c}[$__range]) and {c} offset $__range)\n  or\n"
            f"    max_over_time({c}[$__range])\n)\nor vector(0)")


def per_step(metric: str) -> str:
    return f"sum by (app) (increase({series(metric, APP)}[{R}]))"


def in_window(metric: str) -> str:
    """The event-time window's count per app, 0 for apps with traffic and none of it."""
    return (f"sum by (app) ({series(metric, f'{APP}, {W}')})\nor\n"
            f"0 * sum by (app) ({series('ragdrift_window_retrievals', f'{APP}, {W}')})")


def build(rules: Rules):
    window = query_variable("window", "Window (event time)", "label_values(ragdrift_window_retrievals, window)",
                            "The agent's rolling event-time windows (windows.windows in its configuration).",
                            multi=False)
    b = Board(rules, UID, "ragdrift / Security and freshness",
              "Did an app serve results its user may not see, or content that is no longer current? Counts in "
              "the time range, per step with trace exemplars, and in the agent's exactly-once event-time windows.",
              [window])
    page = "Any increase pages (alert {alert}, rules/ragdrift.rules.yaml)."
    b.row(
        "Access",
        b.stat("Unauthorized results", "Results outside the principal's tenant or groups in the time range, all "
               "replicas. Unauthorized chunks must never reach candidates: the target is 0. "
               + page.format(alert="RagdriftUnauthorizedRetrieval"), "none",
               [Q(count_in_range("ragdrift_unauthorized_results_total"), instant=True)], zero_is_good=True, decimals=0, graph=False),
        b.stat("Retrievals with unauthorized results", "Retrievals with at least one unauthorized result in the "
               "time range, all replicas; each is queued for security review.", "none",
               [Q(count_in_range("ragdrift_unauthorized_retrievals_total"), instant=True)], zero_is_good=True, decimals=0, graph=False),
        b.stat("Retrievals without identity claims", "Retrievals that served results while the principal's "
               "identity claims were missing (access filters could not apply), in the time range. "
               + page.format(alert="RagdriftUnauthorizedRisk"), "none",
               [Q(count_in_range("ragdrift_unauthorized_risk_retrievals_total"), instant=True)], zero_is_good=True, decimals=0, graph=False),
        b.stat("Security review queue", "Events waiting in the security review queue (every event with an "
               "unauthorized result, unsampled). The store's figure, the same on every replica: max.", "none",
               [Q("max(ragdrift_security_queue_events)")], decimals=0),
        b.timeseries("Unauthorized results per step", "Unauthorized results per app in each step (increase over "
                     "$__rate_interval). Exemplars link to the producer's trace of an offending retrieval.",
                     "none", [Q(per_step("ragdrift_unauthorized_results_total"), "{{app}}", exemplar=True)],
                     bars=True, interval="1m"),
        b.timeseries("Retrievals with unauthorized results or no claims, per step", "Per app in each step: "
                     "retrievals with an unauthorized result (exemplars link to their traces), and retrievals "
                     "served without identity claims.", "none", [
                         Q(per_step("ragdrift_unauthorized_retrievals_total"), "{{app}} unauthorized", exemplar=True),
                         Q(per_step("ragdrift_unauthorized_risk_retrievals_total"), "{{app}} no claims"),
                     ], bars=True, interval="1m"),
        b.timeseries("Access in the event-time window ($window)", "Unauthorized results, retrievals with them and "
                     "retrievals without claims in the agent's rolling event-time window, summed over replicas. "
                     "Exactly once: a crash replay does not count twice here, unlike the counters above.", "none", [
                         Q(in_window("ragdrift_window_unauthorized_results"), "{{app}} unauthorized results"),
                         Q(in_window("ragdrift_window_unauthorized_retrievals"), "{{app}} unauthorized retrievals"),
                         Q(in_window("ragdrift_window_unauthorized_risk_retrievals"), "{{app}} no claims"),
                     ], width=24),
    )
    stale_share = (f"(\n  {rate('ragdrift_stale_results_total', by='app')}\n  or\n"
                   f"  0 * {rate('ragdrift_admitted_results_total', by='app')}\n)\n/\n"
                   f"({rate('ragdrift_admitted_results_total', by='app')} > 0)")
    b.row(
        "Freshness",
        b.stat("Stale share of admitted results", "Share of admitted results that are superseded, draft, "
               "tombstoned, expired or not yet effective, all selected apps.", "percentunit", [Q(
                   f"(\n  {rate('ragdrift_stale_results_total')}\n  or\n  vector(0)\n)\n/\n"
                   f"({rate('ragdrift_admitted_results_total')} > 0)")],
               threshold="stale_result_ratio", no_value="no traffic"),
        b.stat("Stale conflicts", "Retrievals that admitted a stale and a current version of the same parent "
               "document in the time range: answers may contradict current policy. "
               + page.format(alert="RagdriftStaleConflict"), "none",
               [Q(count_in_range("ragdrift_stale_conflict_retrievals_total"), instant=True)], zero_is_good=True, decimals=0, graph=False),
        b.stat("Stale results", "Stale admitted results in the time range, all replicas.", "none",
               [Q(count_in_range("ragdrift_stale_results_total"), instant=True)], decimals=0, graph=False),
        b.stat("Not yet effective", "Admitted results whose effective date is after the event (a subset of the "
               "stale results), in the time range.", "none",
               [Q(count_in_range("ragdrift_not_yet_effective_results_total"), instant=True)], decimals=0,
               graph=False),
        b.timeseries("Stale share by app", "Share of each app's admitted results that are stale.", "percentunit",
                     [Q(stale_share, "{{app}}")], threshold="stale_result_ratio"),
        b.timeseries("Stale results per step", "Stale admitted results per app in each step. Exemplars link to "
                     "the producer's trace of a retrieval that admitted one.", "none",
                     [Q(per_step("ragdrift_stale_results_total"), "{{app}}", exemplar=True)], bars=True,
                     interval="1m"),
        b.timeseries("Stale conflicts and not-yet-effective results per step", "Per app in each step: retrievals "
                     "admitting a stale and a current version of one parent, and admitted results not yet "
                     "effective.", "none", [
                         Q(per_step("ragdrift_stale_conflict_retrievals_total"), "{{app}} conflicts"),
                         Q(per_step("ragdrift_not_yet_effective_results_total"), "{{app}} not yet effective"),
                     ], bars=True, interval="1m"),
        b.timeseries("Freshness in the event-time window ($window)", "Stale results, stale conflicts and "
                     "not-yet-effective results in the agent's rolling event-time window, summed over replicas "
                     "(exactly once).", "none", [
                         Q(in_window("ragdrift_window_stale_results"), "{{app}} stale results"),
                         Q(in_window("ragdrift_window_stale_conflict_retrievals"), "{{app}} conflicts"),
                         Q(in_window("ragdrift_window_not_yet_effective_results"), "{{app}} not yet effective"),
                     ]),
    )
    return b.build()
