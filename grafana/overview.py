"""Overview: is retrieval healthy? Traffic, empty results, scores, content age,
source concentration, filters, query mix and new terms, all apps or some.

Counters are summed over replicas before any division (docs/metrics.md), so
N replicas give one answer; ratios drop apps with no traffic in the window
(no 0/0), as the recording rules do. The last row reads the agent's
event-time windows (exactly once, unlike the process-local counters).
"""

from __future__ import annotations

from grafana.kit import APP, Board, Q, query_variable
from grafana.thresholds import Rules

UID = "ragdrift-overview"
R = "$__rate_interval"
W = 'window="$window"'


def series(metric: str, sel: str) -> str:
    return f"{metric}{{{sel}}}" if sel else metric


def rate(metric: str, sel: str = APP, by: str | None = None, rng: str = R) -> str:
    agg = f"sum by ({by}) " if by else "sum "
    return f"{agg}(rate({series(metric, sel)}[{rng}]))"


def quantile(q: float, metric: str, by: str = "app") -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{APP}}}[{R}])))"


def mean(metric: str, by: str = "app") -> str:
    return f"{rate(metric + '_sum', by=by)}\n/\n({rate(metric + '_count', by=by)} > 0)"


def share(metric: str, by: str, sel: str = APP) -> str:
    """Each value's share of the total (all series of the selection)."""
    return f"{rate(metric, sel, by)}\n/ on () group_left ()\n({rate(metric, sel)} > 0)"


def hhi(total_by_source: str, total: str) -> str:
    """Herfindahl index: the sum of squared source shares."""
    return f"sum(\n  (\n    {total_by_source}\n    / on () group_left ()\n    ({total} > 0)\n  ) ^ 2\n)"


def build(rules: Rules):
    window = query_variable("window", "Window (event time)", "label_values(ragdrift_window_retrievals, window)",
                            "The agent's rolling event-time windows (windows.windows in its configuration).",
                            multi=False)
    b = Board(rules, UID, "ragdrift / Overview",
              "Is retrieval healthy? Traffic, empty results, scores, content age, source concentration, "
              "filters and the query mix of the RAG applications that ragdrift watches.", [window])
    zero_ratio = f"{rate('ragdrift_zero_result_retrievals_total', by='app')}\n/\n" \
                 f"({rate('ragdrift_retrievals_total', by='app')} > 0)"
    filter_zero_ratio = f"{rate('ragdrift_filter_zero_retrievals_total', by='app')}\n/\n" \
                        f"({rate('ragdrift_retrievals_total', by='app')} > 0)"
    new_term_ratio = f"{rate('ragdrift_query_new_terms_total', by='app')}\n/\n" \
                     f"({rate('ragdrift_query_terms_total', by='app')} > 0)"
    b.row(
        "Now",
        b.stat("Retrievals per second", "Retrieval events processed per second, summed over every replica "
               "(ragdrift_retrievals_total).", "reqps", [Q(rate("ragdrift_retrievals_total"))]),
        b.stat("Zero-result share", "Share of retrievals that returned no results, all selected apps "
               "(ragdrift_zero_result_retrievals_total / ragdrift_retrievals_total, summed over replicas).",
               "percentunit",
               [Q(f"{rate('ragdrift_zero_result_retrievals_total')}\n/\n({rate('ragdrift_retrievals_total')} > 0)")],
               threshold="zero_result_ratio", no_value="no traffic"),
        b.stat("Filter-caused zero share", "Share of retrievals whose filters removed every candidate "
               "(stages.candidates > 0 and stages.after_filter == 0): an empty answer the index could have "
               "served.", "percentunit",
               [Q(f"{rate('ragdrift_filter_zero_retrievals_total')}\n/\n({rate('ragdrift_retrievals_total')} > 0)")],
               no_value="no traffic"),
        b.stat("New-term share", "Share of query-term occurrences whose term is not in the vocabulary (the frozen "
               "baseline's, or the terms seen so far before a baseline is frozen).", "percentunit",
               [Q(f"{rate('ragdrift_query_new_terms_total')}\n/\n({rate('ragdrift_query_terms_total')} > 0)")],
               no_value="no terms"),
    )
    b.row(
        "Traffic",
        b.timeseries("Retrievals per second by app", "Processed retrieval events per second per app, all "
                     "replicas.", "reqps", [Q(rate("ragdrift_retrievals_total", by="app"), "{{app}}")]),
        b.timeseries("Results per retrieval", "Mean results returned (ragdrift_results_total) and admitted to the "
                     "context (ragdrift_admitted_results_total) per retrieval, and the median result count "
                     "(ragdrift_results_per_retrieval).", "short", [
                         Q(f"{rate('ragdrift_results_total', by='app')}\n/\n"
                           f"({rate('ragdrift_retrievals_total', by='app')} > 0)", "{{app}} returned (mean)"),
                         Q(f"{rate('ragdrift_admitted_results_total', by='app')}\n/\n"
                           f"({rate('ragdrift_retrievals_total', by='app')} > 0)", "{{app}} admitted (mean)"),
                         Q(quantile(0.5, "ragdrift_results_per_retrieval"), "{{app}} returned (median)"),
                     ]),
        b.timeseries("Retrieval latency", "Latency the applications report for their retrieval "
                     "(latency_ms in the event), median and 95th percentile.", "s", [
                         Q(quantile(0.5, "ragdrift_retrieval_latency_seconds"), "{{app}} p50"),
                         Q(quantile(0.95, "ragdrift_retrieval_latency_seconds"), "{{app}} p95"),
                     ]),
        b.timeseries("User feedback per second", "Feedback signals the applications attach to retrievals "
                     "(rephrased, correction, thumbs down, thumbs up).", "reqps",
                     [Q(rate("ragdrift_feedback_total", by="signal"), "{{signal}}")]),
    )
    b.row(
        "Empty results",
        b.timeseries("Zero-result share by app", "Share of retrievals per app that returned no results.",
                     "percentunit", [Q(zero_ratio, "{{app}}")], threshold="zero_result_ratio"),
        b.timeseries("Filter-caused zero share by app", "Share of retrievals per app whose filters removed every "
                     "candidate. A jump with filter errors below points at a filter outage.", "percentunit",
                     [Q(filter_zero_ratio, "{{app}}")]),
    )
    b.row(
        "Scores",
        b.timeseries("Top-1 score", "Score of the best-ranked result, median and 10th percentile per app. Score "
                     "scales differ per retriever (buckets per app: metrics.score_buckets).", "none", [
                         Q(quantile(0.5, "ragdrift_top1_score"), "{{app}} p50"),
                         Q(quantile(0.1, "ragdrift_top1_score"), "{{app}} p10"),
                     ], min_val=None, width=8),
        b.timeseries("Mean admitted score", "Mean score over the results admitted to the context, averaged over "
                     "retrievals.", "none", [Q(mean("ragdrift_admitted_score"), "{{app}}")], min_val=None, width=8),
        b.timeseries("Score gap", "Top-1 minus top-2 score, median per app: a shrinking gap means the retriever "
                     "is less sure of its best hit.", "none", [Q(quantile(0.5, "ragdrift_score_gap"), "{{app}}")],
                     min_val=None, width=8),
        b.timeseries("Reranker rank shift", "Mean absolute rank change the reranker makes per result.", "short",
                     [Q(mean("ragdrift_rerank_rank_shift"), "{{app}}")], width=12),
        b.timeseries("Content age", "Age of admitted results at event time (event ts minus effective_date), median "
                     "and 90th percentile.", "d", [
                         Q(quantile(0.5, "ragdrift_content_age_days"), "{{app}} p50"),
                         Q(quantile(0.9, "ragdrift_content_age_days"), "{{app}} p90"),
                     ], width=12),
    )
    admitted_by_source = rate("ragdrift_admitted_results_total", by="source")
    admitted = rate("ragdrift_admitted_results_total")
    b.row(
        "Source concentration",
        b.timeseries("Admitted results by source", "Each source's share of the results admitted to the context "
                     "(top metrics.top_n sources; the rest are `other`).", "percentunit",
                     [Q(share("ragdrift_admitted_results_total", "source"), "{{source}}")], stack=True, max_val=1),
        b.timeseries("Source concentration", "Herfindahl index of admitted results over sources (sum of squared "
                     "shares: 1 = one source) and the largest source's share, over all replicas.", "percentunit", [
                         Q(hhi(admitted_by_source, admitted), "HHI"),
                         Q(f"max(\n  {admitted_by_source}\n  / on () group_left ()\n  ({admitted} > 0)\n)",
                           "top source share"),
                     ], max_val=1),
        b.timeseries("Parent diversity and duplicate dominance", "Per retrieval, mean over retrievals: unique "
                     "parents / admitted results (diversity), and the largest share of one parent in the admitted "
                     "set (dominance).", "percentunit", [
                         Q(mean("ragdrift_parent_diversity_ratio"), "{{app}} diversity"),
                         Q(mean("ragdrift_duplicate_dominance_ratio"), "{{app}} dominance"),
                     ], max_val=1),
        b.timeseries("Duplicate fingerprints", "Share of admitted results that repeat the text fingerprint of a "
                     "better-ranked admitted result.", "percentunit", [
                         Q(f"{rate('ragdrift_duplicate_fingerprint_results_total', by='app')}\n/\n"
                           f"({rate('ragdrift_admitted_results_total', by='app')} > 0)", "{{app}}"),
                     ]),
    )
    filters, error = "ragdrift_filter_outcomes_total", 'status="error"'
    b.row(
        "Filters (all apps)",
        b.timeseries("Filter runs by outcome", "Filter runs per second by filter and status (applied, skipped, "
                     "error), all apps.", "reqps",
                     [Q(rate(filters, "", "filter, status"), "{{filter}} {{status}}")], stack=True, width=8),
        b.timeseries("Filter error share", "Share of each filter's runs that ended in error, all apps.",
                     "percentunit", [Q(
                         f"(\n  {rate(filters, error, 'filter')}\n  or\n"
                         f"  0 * {rate(filters, '', 'filter')}\n)\n/\n({rate(filters, '', 'filter')} > 0)",
                         "{{filter}}")], threshold="filter_error_ratio", width=8),
        b.timeseries("Chunks removed by filter", "Chunks each filter removed per second (sum of `removed`), all "
                     "apps.", "short", [Q(rate("ragdrift_filter_removed_chunks_total", "", "filter"), "{{filter}}")],
                     width=8),
    )
    b.row(
        "Query mix",
        b.timeseries("Query types", "Share of retrievals per query slice (query.type; `unknown` when missing).",
                     "percentunit", [Q(share("ragdrift_query_type_retrievals_total", "query_type"), "{{query_type}}")],
                     stack=True, max_val=1, width=8),
        b.timeseries("Query languages (all apps)", "Share of retrievals per query language (query.language; "
                     "`unknown` when missing), all apps.", "percentunit",
                     [Q(share("ragdrift_query_language_retrievals_total", "language", ""), "{{language}}")],
                     stack=True, max_val=1, width=8),
        b.timeseries("New-term share by app", "Share of query-term occurrences whose term is new to the "
                     "vocabulary: a launch, a new product name, a bot.", "percentunit",
                     [Q(new_term_ratio, "{{app}}")], width=8),
    )
    wsel = f"{APP}, {W}"

    def wsum(metric: str, by: str | None = "app", sel: str = wsel) -> str:
        return f"sum by ({by}) ({metric}{{{sel}}})" if by else f"sum({metric}{{{sel}}})"

    b.row(
        "Event-time windows ($window)",
        b.timeseries("Zero-result and filter-caused zero share in the window", "From the agent's rolling "
                     "event-time window: numerators and denominators summed over replicas, then divided "
                     "(docs/metrics.md).", "percentunit", [
                         Q(f"{wsum('ragdrift_window_zero_result_retrievals')}\n/\n"
                           f"({wsum('ragdrift_window_retrievals')} > 0)", "{{app}} zero result"),
                         Q(f"{wsum('ragdrift_window_filter_zero_retrievals')}\n/\n"
                           f"({wsum('ragdrift_window_retrievals')} > 0)", "{{app}} filter-caused zero"),
                     ], width=8),
        b.timeseries("New-term share in the window", "New-term occurrences / term occurrences in the event-time "
                     "window, summed over replicas.", "percentunit", [
                         Q(f"{wsum('ragdrift_window_query_new_terms')}\n/\n"
                           f"({wsum('ragdrift_window_query_terms')} > 0)", "{{app}}"),
                     ], width=8),
        b.timeseries("Source concentration in the window", "Herfindahl index and top-source share of the admitted "
                     "results in the event-time window, from per-source counts summed over replicas.",
                     "percentunit", [
                         Q(hhi(wsum("ragdrift_window_admitted_results", "source"),
                               wsum("ragdrift_window_admitted_results", None)), "HHI"),
                         Q(f"max(\n  {wsum('ragdrift_window_admitted_results', 'source')}\n  / on () group_left ()\n"
                           f"  ({wsum('ragdrift_window_admitted_results', None)} > 0)\n)", "top source share"),
                     ], max_val=1, width=8),
    )
    return b.build()
