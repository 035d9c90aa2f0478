"""Canary vs stable: is the candidate pipeline version as good as the stable one on live traffic?

The live release gate (the agent's `live_gate` settings) compares two
`pipeline.version` values of each app over the last `live_gate.window_days`
days of stored traffic, every `live_gate.refresh_seconds`: its verdict, the
hard gates of the candidate, each metric's difference (candidate minus
stable) with its interval and material threshold, and the events of each
version. Those are the store's figures, the same on every replica: `max`,
never `sum`. The last row splits the main families by `pipeline_version`
(the agent's `windows.by_pipeline_version`), counters summed over replicas
before any division, as on the Overview.
"""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from grafana.kit import BAD, GOOD, NEUTRAL, Board, Q, query_variable
from grafana.overview import rate
from grafana.thresholds import Rules

UID = "ragdrift-canary"
R = "$__rate_interval"
PAIR = 'app=~"$app", stable=~"$stable", candidate=~"$candidate"'  # the gate's families
VERSIONS = 'app=~"$app", pipeline_version=~"$stable|$candidate", pipeline_version!=""'  # the split families
BY_PAIR = "max by (app, stable, candidate)"
PAIR_LEGEND = "{{app}} {{candidate}} vs {{stable}}"
# The metrics the agent's gate judges on served traffic (label `metric`): title, unit, the worse direction.
SERVED = (
    ("top1_score", "Top-1 score", "none", "lower"),
    ("zero_result_rate", "Zero-result rate", "percentunit", "higher"),
    ("content_age_days", "Content age", "d", "higher"),
    ("source_concentration", "Source concentration", "percentunit", "higher"),
    ("latency_seconds", "Latency", "s", "higher"),
)
GATES = ("unauthorized", "stale_conflict", "filter_zero_rise")
VERDICT = {0: ("pass", GOOD), 1: ("not enough data", NEUTRAL), 2: ("fail", BAD)}


def gauge(family: str, selector: str, by: str = BY_PAIR) -> str:
    return f"{by} (ragdrift_live_gate_{family}{{{selector}}})"


def per_version(metric: str) -> str:
    return rate(metric, VERSIONS, "app, pipeline_version")


def quantile(q: float, metric: str) -> str:
    return f"histogram_quantile({q}, sum by (app, pipeline_version, le) (rate({metric}_bucket{{{VERSIONS}}}[{R}])))"


def build(rules: Rules):
    versions = [
        query_variable(role, f"{role.capitalize()} version",
                       f'label_values(ragdrift_live_gate_verdict{{app=~"$app"}}, {role})',
                       f"The {role} pipeline version of the live gate's compared pairs (label `{role}` of "
                       f"ragdrift_live_gate_verdict): live_gate.{role} in the agent's configuration, or one of the "
                       "app's versions serving on the newest day with events (the candidate the newest of them, "
                       "the stable one the one with most events that day of the others).")
        for role in ("stable", "candidate")
    ]
    b = Board(rules, UID, "ragdrift / Canary vs stable",
              "Is the candidate pipeline version as good as the stable one on live traffic? The live release "
              "gate's verdict, hard gates, each difference with its interval against the material threshold, "
              "events per version, and the main families split by pipeline version.", versions)
    fail, not_enough = (gauge("verdict", f'{PAIR}, verdict="{v}"') for v in ("fail", "not_enough_data"))
    verdict = f"2 * {fail}\n+ {not_enough}"
    failures = {gate: gauge("hard_failures", f'{PAIR}, gate="{gate}"') for gate in GATES}
    b.row(
        "Verdict",
        b.stat("Verdict", "The live gate's current verdict per app and compared pair (ragdrift_live_gate_verdict): "
               "fail on a failed hard gate or a difference whose whole interval lies beyond its material threshold "
               "in the worse direction; not enough data when a version has too few events, queries or days, or a "
               "difference is inconclusive; else pass. Alert RagdriftCanaryRegression opens a ticket on a fail held "
               "for 30 minutes.", "none", [Q(verdict, PAIR_LEGEND)], graph=False, width=12)
        .mappings([dm.ValueMap({str(value): dm.ValueMappingResult(text=text, color=color, index=value)
                                for value, (text, color) in VERDICT.items()})]),
        b.stat("Hard failures of the candidate", "Events of the candidate in the window failing each hard gate, "
               "over the selected pairs: unauthorized results (alert RagdriftCanaryUnauthorized pages on any), "
               "stale conflicts, and filter-caused zero results in excess of the stable version's rate (0 when "
               "not a significant rise). Any fails the verdict.", "none",
               [Q(f"sum(\n  {hard}\n)", gate) for gate, hard in failures.items()],
               zero_is_good=True, decimals=0, graph=False, width=8),
        b.stat("Last evaluation", "Time since the live gate last judged the stored rows (every "
               "live_gate.refresh_seconds, by every replica). Much longer: the refresh fails (the agent's log).",
               "s", [Q("time() - max(ragdrift_live_gate_last_evaluation_timestamp_seconds)", instant=True)],
               no_value="never", graph=False, width=4),
    )
    b.row(
        "Hard gates and events",
        b.timeseries("Hard failures by gate", "Events of the candidate in the window failing each hard gate, per "
                     "app and pair. The window slides: a failure leaves it live_gate.window_days after its day.",
                     "none", [Q(gauge("hard_failures", PAIR, "max by (app, stable, candidate, gate)"),
                                "{{app}} {{candidate}} {{gate}}")]),
        b.timeseries("Events in the window per version", "Events of each compared version in the window "
                     "(ragdrift_live_gate_events): a candidate with few events has wide intervals, and one with "
                     "too few is not enough data.", "none",
                     [Q(gauge("events", VERSIONS, "max by (app, pipeline_version)"), "{{app}} {{pipeline_version}}")]),
    )
    columns = ("difference", "difference_low", "difference_high", "material")
    now = b.table("Differences now", "Every compared metric's difference, candidate minus stable (point estimate), "
                  "its interval (low, high) and its material threshold, from the stable version's own day-to-day "
                  "variation (NaN: fewer than live_gate.min_days days of it). Units are the metric's own.",
                  [Q(gauge(c, PAIR, "max by (app, stable, candidate, metric)"), table=True) for c in columns],
                  columns=("difference", "low", "high", "material"), width=24, height=8)
    panels = [now]
    for metric, title, unit, worse in SERVED:
        sel = f'{PAIR}, metric="{metric}"'
        material = gauge("material", sel)
        panels.append(b.timeseries(
            f"{title}: candidate minus stable", f"The difference in {title.lower()} (candidate minus stable) with "
            f"its interval, against plus and minus its material threshold. {worse.capitalize()} is worse: the "
            f"verdict fails when the whole interval lies beyond the material threshold on the {worse} side.", unit, [
                Q(gauge("difference", sel), f"{PAIR_LEGEND}: difference"),
                Q(gauge("difference_low", sel), f"{PAIR_LEGEND}: low"),
                Q(gauge("difference_high", sel), f"{PAIR_LEGEND}: high"),
                Q(material, f"{PAIR_LEGEND}: +material"),
                Q(f"-{material}", f"{PAIR_LEGEND}: -material"),
            ], min_val=None, width=8))
    b.row("Differences (candidate minus stable)", *panels)
    retrievals = per_version("ragdrift_retrievals_total")
    split = "Needs windows.by_pipeline_version in the agent's configuration (no series without it)."
    b.row(
        "Per version (live traffic)",
        b.timeseries("Retrievals per second by version", "Processed retrieval events per second per app and "
                     f"pipeline version, all replicas. {split}", "reqps", [Q(retrievals, "{{app}} {{pipeline_version}}")],
                     width=8),
        b.timeseries("Zero-result share by version", "Share of each version's retrievals that returned no results "
                     f"(the zero_result_rate metric of the gate). {split}", "percentunit", [Q(
                         f"{per_version('ragdrift_zero_result_retrievals_total')}\n/\n({retrievals} > 0)",
                         "{{app}} {{pipeline_version}}")], width=8),
        b.timeseries("Filter-caused zero share by version", "Share of each version's retrievals whose filters "
                     f"removed every candidate (the filter_zero_rise hard gate). {split}", "percentunit", [Q(
                         f"{per_version('ragdrift_filter_zero_retrievals_total')}\n/\n({retrievals} > 0)",
                         "{{app}} {{pipeline_version}}")], width=8),
        b.timeseries("Top-1 score by version", f"Score of the best-ranked result, median and 10th percentile per "
                     f"app and version. {split}", "none", [
                         Q(quantile(0.5, "ragdrift_top1_score"), "{{app}} {{pipeline_version}} p50"),
                         Q(quantile(0.1, "ragdrift_top1_score"), "{{app}} {{pipeline_version}} p10"),
                     ], min_val=None, width=8),
        b.timeseries("Retrieval latency by version", "Latency the application reports, median and 95th "
                     f"percentile per app and version. {split}", "s", [
                         Q(quantile(0.5, "ragdrift_retrieval_latency_seconds"), "{{app}} {{pipeline_version}} p50"),
                         Q(quantile(0.95, "ragdrift_retrieval_latency_seconds"), "{{app}} {{pipeline_version}} p95"),
                     ], width=8),
        b.timeseries("Unauthorized results and stale conflicts by version", "Per app and version in each step: "
                     "results outside the principal's tenant or groups, and retrievals admitting a stale and a "
                     f"current version of one document (the hard gates, from the counters). {split}", "none", [
                         Q(f"sum by (app, pipeline_version) (increase(ragdrift_unauthorized_results_total{{{VERSIONS}}}[{R}]))",
                           "{{app}} {{pipeline_version}} unauthorized"),
                         Q(f"sum by (app, pipeline_version) (increase(ragdrift_stale_conflict_retrievals_total{{{VERSIONS}}}[{R}]))",
                           "{{app}} {{pipeline_version}} stale conflicts"),
                     ], bars=True, interval="1m", width=8),
    )
    return b.build()
