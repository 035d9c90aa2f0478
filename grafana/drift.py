"""Drift: do the last 5 minutes, the last hour, today and yesterday look like the baseline's?

Every statistic of every feature and mix against its calibrated threshold,
the alarms, the values each window holds, and the baseline in use. The drift
families of `today` and `yesterday` are the store's figures, evaluated every
minute by each replica (agent/io/background/drift.py), so every replica exports
the same value; `5m` and `1h` are each replica's own traffic: `max`, never
`sum`. With the agent's families split by pipeline version
(`windows.by_pipeline_version`) every series keeps its `pipeline_version`,
so a canary's drift is not hidden behind its stable version's (without the
split the label is empty). Statistics are shown as a share of their threshold (1 is the
threshold, above is an alarm; for the chi-square p-value, which alarms
below, the threshold divided by the p-value), so statistics of different
scales share one axis. The thresholds are the baseline's own (docs/drift.md),
not a rules knob, so no panel draws an alert threshold.
"""

from __future__ import annotations

from grafana.kit import APP, Board, Q
from grafana.thresholds import Rules

UID = "ragdrift-drift"
BY = "max by (app, pipeline_version, feature, stat, window)"
GROUPS = (  # the alert groups' features (rules group ragdrift-drift), then the rest
    ("Scores", 'feature=~"top1_score|mean_admitted_score|score_gap"', "RagdriftScoreDrift"),
    ("Content age", 'feature="content_age_days"', "RagdriftContentAgeDrift"),
    ("Source mix", 'feature="source"', "RagdriftSourceConcentration"),
    ("Query mix", 'feature=~"query_type|language|query_cluster"', "RagdriftQueryMixDrift"),
    ("Other features", 'feature!~"top1_score|mean_admitted_score|score_gap|content_age_days|source|query_type|language|query_cluster"',
     None),
)


def ratio(selector: str) -> str:
    """Each statistic as a share of its threshold: above 1 is an alarm, whatever the statistic's direction."""
    sel = f"{APP}, {selector}"
    return (f'(\n  {BY} (ragdrift_drift_statistic{{{sel}, stat!="chi2_p"}})\n'
            f'  / {BY} (ragdrift_drift_threshold{{{sel}, stat!="chi2_p"}})\n)\nor\n'
            f'(\n  {BY} (ragdrift_drift_threshold{{{sel}, stat="chi2_p"}})\n'
            f'  / clamp_min({BY} (ragdrift_drift_statistic{{{sel}, stat="chi2_p"}}), 1e-12)\n)')


def build(rules: Rules):
    b = Board(rules, UID, "ragdrift / Drift",
              "Do the retrievals of the last 5 minutes and hour (per replica), today (the UTC day so far) and "
              "yesterday look like the baseline's? Each drift "
              "statistic against its calibrated threshold, the alarms behind the drift alerts, and the baseline in "
              "use (docs/drift.md).")
    alarms = f"{BY} (ragdrift_drift_alarm{{{APP}}})"
    b.row(
        "Now",
        b.stat("Alarming statistics", "Statistics beyond their threshold now, over the selected apps, every "
               "feature and window (the drift alerts fire on one held for 30 minutes).", "none",
               [Q(f"sum(\n  {alarms}\n)\nor vector(0)")], zero_is_good=True, decimals=0, width=6),
        b.bars("Alarms by feature", "Statistics beyond their threshold now, per feature or mix (selected apps, "
               "every window).", "none", [Q(f"sort_desc(\n  sum by (feature) (\n    {alarms}\n  )\n)", "{{feature}}",
                                            instant=True)], width=10, height=6),
        b.table("Baseline in use", "The newest stored baseline, which every replica evaluates against "
                "(`ragdrift baseline list`; freeze a new one with `ragdrift baseline freeze`).",
                [Q("max by (name, version) (ragdrift_drift_baseline_info)", table=True)], width=8),
    )
    panels = []
    for title, selector, alert in GROUPS:
        what = f"The {alert} alert fires on one held above 1 for 30 minutes." if alert else "No alert reads these."
        panels.append(b.timeseries(
            f"{title}: statistic / threshold", f"Each drift statistic of {title.lower()} as a share of its threshold "
            "(1 = the threshold; chi2_p: the threshold over the p-value), per app (and pipeline version, when split), "
            "feature, statistic and window. " + what, "none",
            [Q(ratio(selector), "{{app}} {{pipeline_version}} {{feature}} {{stat}} {{window}}")]))
    panels.append(b.timeseries(
        "Values judged", "Values each window's statistics were computed on, per app (and pipeline version, when "
        "split) and feature (events, or admitted results for per-result features); below 32 a window is not judged.",
        "none", [Q(f"max by (app, pipeline_version, feature, window) (ragdrift_drift_window_values{{{APP}}})",
                   "{{app}} {{pipeline_version}} {{feature}} {{window}}")]))
    b.row("Statistics against their thresholds", *panels)
    return b.build()
