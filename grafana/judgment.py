"""Judgment program: is the weekly human judgment of retrieval quality on track?
Candidates per stratum this week, the security review queue, the last batch
(when, how big) and failed batch runs; and what the judgments say of live
traffic: its estimated precision (calibrated scores) with the calibration's
status, and the share of admitted chunks the answers cite; and the figures of
the newest judged batch (precision with its 95 % interval per view and
stratum, recall, MRR, hit rate, nDCG) and which batch they come from.

The judgment and queue gauges are the store's figures, read every minute by
each replica (agent/io/background/judgment.py), so every replica exports the same value:
`max`, never `sum`. Batch failures are counted per replica: `sum`.
"""

from __future__ import annotations

from grafana.kit import APP, Board, Q
from grafana.thresholds import Rules

UID = "ragdrift-judgment"
# Strata are "app|query_type", plus `uniform` and `other`: the selected apps'
# strata and the two shared ones.
STRATA = 'stratum=~"$app\\\\|.+|uniform|other"'
CANDIDATES = f"max by (stratum) (ragdrift_judgment_candidates{{{STRATA}}})"
# Live traffic: event-time window gauges, numerators and denominators summed
# over replicas, then divided (docs/metrics.md, "Rolling windows").
LIVE = f'{APP},window="1h"'
# The newest judged batch: the selected apps' strata, and the views over all
# traffic and the uniform stratum (app="all"). Weekly figures: `max` over
# replicas, which all export the same.
JUDGED = 'app=~"$app|all"'


def judged(family: str, view: str, stratum: str = "") -> str:
    where = f'{JUDGED},view="{view}"' + (f',stratum="{stratum}"' if stratum else "")
    return f"max by (view, stratum) (ragdrift_judged_{family}{{{where}}})"


def ratio(numerator: str, denominator: str) -> str:
    return f"sum by (app) (ragdrift_window_{numerator}{{{LIVE}}})\n/\nsum by (app) (ragdrift_window_{denominator}{{{LIVE}}})"


def build(rules: Rules):
    b = Board(rules, UID, "ragdrift / Judgment program",
              "Is the weekly human judgment of retrieval quality on track? Candidates sampled per stratum this "
              "ISO week, the security review queue, and the weekly batch the judges receive.")
    batch = "max(ragdrift_judgment_batch_last_timestamp_seconds)"
    b.row(
        "This week",
        b.stat("Candidates this week", "Judgment candidates sampled this ISO week in the selected apps' strata and "
               "the uniform stratum, all replicas (the store's figure: max per stratum, then summed).", "none",
               [Q(f"sum(\n  {CANDIDATES}\n)\nor vector(0)")], decimals=0, width=4),
        b.stat("Security review queue", "Events in the security review queue: every retrieval with an "
               "unauthorized result, unsampled.", "none", [Q("max(ragdrift_security_queue_events)")], decimals=0,
               width=4),
        b.stat("Last batch built", "When the newest judgment batch was built (weekly job, default Monday 06:00 "
               "UTC, or `ragdrift batch build`).", "dateTimeFromNow", [Q(f"{batch} * 1000", instant=True)],
               no_value="never", graph=False, width=4),
        b.stat("Last batch age", "Time since the newest judgment batch was built.", "s", [Q(f"time() - {batch}", instant=True)],
               threshold="judgment_batch_age_seconds", no_value="no batch yet", graph=False, width=4),
        b.stat("Items in the last batch", "Items (query and its admitted chunks) in the newest judgment batch.",
               "none", [Q("max(ragdrift_judgment_batch_last_items)", instant=True)], no_value="no batch yet", decimals=0,
               graph=False, width=4),
        b.stat("Failed batch runs", "Scheduled batch runs that failed in the time range, all replicas (the agent "
               "logs why; the next run retries).", "none",
               [Q("sum(increase(ragdrift_judgment_batch_failures_total[$__range]))", instant=True)],
               zero_is_good=True, decimals=0, graph=False, width=4),
    )
    b.row(
        "Sampling",
        b.bars("Candidates per stratum", "This ISO week's candidates per stratum (app|query type, uniform, "
               "other), largest first.", "none", [Q(f"sort_desc(\n  {CANDIDATES}\n)", "{{stratum}}", instant=True)],
               height=10),
        b.timeseries("Candidates over the week", "Candidates per stratum as the week fills; the count restarts "
                     "with each ISO week.", "none", [Q(CANDIDATES, "{{stratum}}")], height=10),
        b.timeseries("Security review queue", "Events waiting for security review.", "none",
                     [Q("max(ragdrift_security_queue_events)", "queue")]),
        b.timeseries("Batch failures per step", "Failed scheduled batch runs per replica in each step.", "none",
                     [Q("sum by (instance) (increase(ragdrift_judgment_batch_failures_total[$__rate_interval]))",
                        "{{instance}}")], bars=True, interval="1m"),
    )
    b.row(
        "Live traffic (last hour, event time)",
        b.timeseries("Estimated precision of live traffic", "The mean calibrated probability of relevance of the "
                     "admitted chunks of the last hour, per app: precision at the real cutoff as judges would grade "
                     "it, from each chunk's score through the app's isotonic calibration (docs/judgments.md, "
                     "\"Calibration\"). Only events of the pipeline version the calibration was fitted on, and "
                     "only while its cross-validated calibration error is under the bound; the status says why an "
                     "app has no line.", "percentunit",
                     [Q(ratio("estimated_relevant_results", "calibrated_results"), "{{app}}")], max_val=1, width=9),
        b.table("Calibration status", "Per app: ok (estimated), too_few_labels, error_too_high (cross-validated "
                "ECE above judgment.calibration.max_ece), pipeline_changed (live traffic runs a pipeline version no "
                "calibration was fitted on: judge a batch of it) or none (no calibration stored).",
                [Q(f'max by (app, status) (ragdrift_calibration_status{{{LIVE}}}) == 1', table=True)], width=6),
        b.timeseries("Calibrated share of admitted chunks", "Admitted chunks that a calibration served / all "
                     "admitted chunks: below 1 while part of the traffic runs another pipeline version (a canary).",
                     "percentunit", [Q(f"sum by (app) (ragdrift_window_calibrated_results{{{LIVE}}})\n/\n"
                                       f"sum by (app) (ragdrift_window_admitted_results{{{LIVE}}})", "{{app}}")],
                     max_val=1, width=9),
        b.timeseries("Citation rate of admitted chunks", "Admitted chunks the answer cited / admitted chunks, over "
                     "the events that report citations (a non-empty feedback.cited).", "percentunit",
                     [Q(ratio("cited_results", "citable_results"), "{{app}}")], max_val=1, width=24),
    )
    b.row(
        "Newest judged batch",
        b.table("Judged batch in use", "The batch the judged figures come from: the newest batch with imported "
                "labels (`ragdrift judgments import` or `pull`); they change when its labels do.",
                [Q("max by (week, batch_id) (ragdrift_judged_batch_info)", table=True)], width=6, height=8),
        b.timeseries("Judged precision of all traffic", "Precision at the real cutoff of the newest judged batch, "
                     "all traffic (each sampled query weighted by max(w, tau) / w), with its 95 % bootstrap "
                     "interval (docs/judgments.md, \"The report\"). A step each time a batch is judged.",
                     "percentunit", [Q(judged(f, "traffic", "all"), legend) for f, legend in (
                         ("precision", "precision"), ("precision_low", "95 % low"), ("precision_high", "95 % high"))],
                     max_val=1, width=18, height=8),
    )
    b.row(
        "Judged figures per view and stratum",
        *(b.table(f"Judged figures: {view}", f"The newest judged batch per stratum, {about}: precision at the real "
                  "cutoff with its 95 % interval, recall over the judged pool, MRR, hit rate, nDCG, and the judged "
                  "items (stratum `all`: every risk stratum together; `uniform`: the uniform sample).",
                  [Q(judged(f, view), table=True) for f in
                   ("precision", "precision_low", "precision_high", "recall", "reciprocal_rank", "hit_rate", "ndcg",
                    "items")],
                  columns=["precision", "95 % low", "95 % high", "recall", "MRR", "hit rate", "nDCG", "items"],
                  width=12, height=9)
          for view, about in (("traffic", "each item weighted as its traffic"),
                              ("challenge", "each item weighted 1"))),
    )
    return b.build()
