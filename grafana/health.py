"""Agent health: can the numbers on the other dashboards be trusted right now?
Replicas up, throughput, consumer lag, Kafka reachability, checkpoints (and
the pauses failed checkpoints cause), dead letters, and what a scrape costs.

Per replica, as the agent-health alerts are: series keep the target labels
(instance, job). `up`, `scrape_*` and `process_*` are scoped with the alerts'
agent target selector, read from rules/ragdrift.rules.yaml.
"""

from __future__ import annotations

from agent.core.partitions import PAUSE_AFTER_FAILURES
from grafana.kit import APP, Board, Q, query_variable
from grafana.overview import rate
from grafana.thresholds import Rules

UID = "ragdrift-agent-health"
R = "$__rate_interval"
I = 'instance=~"$instance"'  # noqa: E741


def build(rules: Rules):
    job = f"{rules.job_matcher}, {I}"  # e.g. job=~"ragdrift.*", instance=~"$instance"
    instance = query_variable("instance", "Replica", f"label_values({rules.target_selector}, instance)",
                              "ragdrift replicas (targets of the agent target selector of the rules).")
    b = Board(rules, UID, "ragdrift / Agent health",
              "Can the other ragdrift dashboards be trusted right now? Replicas, throughput, lag, Kafka, "
              "checkpoints, dead letters and scrape cost, per replica.", [instance])
    checkpoint_age = (f"(\n    time() - ragdrift_last_checkpoint_timestamp_seconds{{{I}}}\n  or\n"
                      f"    0 * ragdrift_assigned_partitions{{{I}}} + Inf\n"
                      f"    unless ragdrift_last_checkpoint_timestamp_seconds\n)\n"
                      f"and\nragdrift_assigned_partitions{{{I}}} > 0")
    lag = f"sum by (instance, job) (ragdrift_consumer_lag_messages{{{I}}})"
    drain = (f"{lag}\n/\n(\n  sum by (instance, job) (rate(ragdrift_events_total{{{I}}}[{R}]))\n  or\n"
             f"  0 * {lag}\n)")
    b.row(
        "Replicas",
        b.stat("Replicas up", "Scraped replicas that answered the last scrape, of all the replicas Prometheus "
               "targets (up).", "none", [Q(f"sum(up{{{job}}})", "up"), Q(f"count(up{{{job}}})", "targets")],
               decimals=0, width=4),
        b.stat("Assigned partitions", "Kafka partitions the selected replicas own, summed.", "none",
               [Q(f"sum(ragdrift_assigned_partitions{{{I}}})")], decimals=0, width=4),
        b.stat("Longest Kafka outage", "The longest time any selected replica has had no answer from Kafka "
               "(0 while it answers).", "s", [Q(f"max(ragdrift_kafka_unreachable_seconds{{{I}}})")],
               threshold="kafka_unreachable_seconds", width=4),
        b.stat("Oldest checkpoint", "Time since the oldest last successful checkpoint among the replicas that own "
               "partitions (+Inf: none since it started).", "s", [Q(f"max(\n{checkpoint_age}\n)")],
               threshold="checkpoint_age_seconds", width=4),
        b.table("Versions", "Replicas per ragdrift and Python version (ragdrift_build_info).",
                [Q(f"count by (version, python) (ragdrift_build_info{{{I}}})", table=True)], width=8, height=4),
        b.timeseries("Up", "1 when Prometheus scraped the replica, 0 when the scrape failed.", "none",
                     [Q(f"up{{{job}}}", "{{instance}}")], max_val=1, width=8),
        b.timeseries("Partitions", "Partitions each replica owns; those it leaves unread (a checkpoint of a newer "
                     "release); and per step, partitions started afresh (topic recreated or log lost) and damaged "
                     "checkpoints set aside.", "short", [
                         Q(f"ragdrift_assigned_partitions{{{I}}}", "{{instance}} assigned"),
                         Q(f"sum by (instance) (ragdrift_unreadable_partitions{{{I}}})", "{{instance}} unreadable"),
                         Q(f"increase(ragdrift_offset_resets_total{{{I}}}[{R}])", "{{instance}} offset resets"),
                         Q(f"increase(ragdrift_checkpoints_set_aside_total{{{I}}}[{R}])", "{{instance}} set aside"),
                     ], width=8),
        b.timeseries("Uptime", "Time since each replica's process started.", "s",
                     [Q(f"time() - process_start_time_seconds{{{job}}}", "{{instance}}")], width=8),
    )
    b.row(
        "Throughput and lag",
        b.timeseries("Messages read per second", "Messages read from Kafka per replica: processed, and rejected "
                     "to the dead-letter topic.", "reqps",
                     [Q(rate("ragdrift_events_total", I, "instance, outcome"), "{{instance}} {{outcome}}")],
                     width=8),
        b.timeseries("Consumer lag", "Messages between each replica's log end (probed every "
                     "kafka.probe_interval_seconds, also while paused) and its next offset to process.", "short",
                     [Q(lag, "{{instance}}")], width=8),
        b.timeseries("Time to drain the backlog", "Backlog divided by the replica's current throughput: the "
                     "delay of its security pages (+Inf: a backlog and no progress; empty when idle).", "s",
                     [Q(drain, "{{instance}}")], threshold="lag_drain_seconds", width=8),
        b.timeseries("Late, future and ignored input", "Per second: events older than the allowed lateness and "
                     "events dated in the future (both counted in totals, not in windows), and event fields the "
                     "agent ignored.", "reqps", [
                         Q(rate("ragdrift_late_events_total", I, "instance"), "{{instance}} late"),
                         Q(rate("ragdrift_future_events_total", I, "instance"), "{{instance}} future"),
                         Q(rate("ragdrift_unknown_fields_total", I, "instance"), "{{instance}} ignored fields"),
                     ], width=12),
        b.timeseries("Retrievals processed per second by app", "Retrieval events each replica processed per "
                     "second, per selected app: where a replica's throughput goes.", "reqps",
                     [Q(rate("ragdrift_retrievals_total", f"{APP}, {I}", "instance, app"), "{{instance}} {{app}}")],
                     width=12),
    )
    b.row(
        "Kafka and checkpoints",
        b.timeseries("Kafka unreachable", "Seconds since Kafka last answered each replica, while its probes fail "
                     "(0 while it answers). Nothing is consumed meanwhile.", "s",
                     [Q(f"ragdrift_kafka_unreachable_seconds{{{I}}}", "{{instance}}")],
                     threshold="kafka_unreachable_seconds", width=8),
        b.timeseries("Since Kafka last answered", "Time since each replica's last answer from Kafka (a fetch, a "
                     "log-end probe or an assignment).", "s",
                     [Q(f"time() - ragdrift_kafka_last_contact_timestamp_seconds{{{I}}}", "{{instance}}")],
                     width=8),
        b.timeseries("Checkpoint age", "Time since each replica's last successful checkpoint, for replicas that own "
                     "partitions. A crash replays everything since then.", "s",
                     [Q(checkpoint_age, "{{instance}}")], threshold="checkpoint_age_seconds", width=8),
        b.timeseries("Checkpoints and pauses", f"Checkpoint transactions per second by outcome. After "
                     f"{PAUSE_AFTER_FAILURES} failed checkpoints in a row a replica pauses consumption until one "
                     f"succeeds (the paused series reads 1 meanwhile).", "reqps",
                     [Q(rate("ragdrift_checkpoints_total", I, "instance, outcome"), "{{instance}} {{outcome}}"),
                      Q(f"ragdrift_consumption_paused{{{I}}}", "{{instance}} paused")],
                     width=12),
        b.stat("Checkpoint errors", "Failed checkpoint transactions in the time range, selected replicas.", "none",
               [Q(f"sum(increase(ragdrift_checkpoints_total{{outcome=\"error\", {I}}}[$__range]))", instant=True)],
               zero_is_good=True, decimals=0, graph=False, width=12, height=8),
    )
    dead = "ragdrift_dead_letters_total"
    b.row(
        "Dead letters (all replicas)",
        b.timeseries("Dead letters per second by reason", "Rejected messages sent to the dead-letter topic, by "
                     "reason (invalid_json, invalid_field, unsupported_schema, too_large, pii_suspected).", "reqps",
                     [Q(rate(dead, "", "reason"), "{{reason}}")], stack=True),
        b.timeseries("Dead-letter share by reason", "Share of the messages read from Kafka that went to the "
                     "dead-letter topic, per reason, all replicas. Those events are in no metric or sample.",
                     "percentunit", [Q(f"{rate(dead, '', 'reason')}\n/ on () group_left ()\n"
                                       f"({rate('ragdrift_events_total', '')} > 0)", "{{reason}}")],
                     threshold="dead_letter_ratio"),
    )
    b.row(
        "Scrape cost",
        b.timeseries("Scrape duration", "How long Prometheus took to scrape each replica's /metrics (every "
                     "collector: retrieval families, windows, health, judgment), and that time per 1000 samples "
                     "(the cost of rendering, apart from how many series there are).", "s", [
                         Q(f"scrape_duration_seconds{{{job}}}", "{{instance}}"),
                         Q(f"scrape_duration_seconds{{{job}}}\n/ (scrape_samples_scraped{{{job}}} > 0) * 1000",
                           "{{instance}} per 1000 samples"),
                     ], width=8),
        b.timeseries("Samples per scrape", "Samples each scrape returned and new series it added: the label cap "
                     "(metrics.top_n) bounds both.", "short", [
                         Q(f"scrape_samples_scraped{{{job}}}", "{{instance}} samples"),
                         Q(f"scrape_samples_post_metric_relabeling{{{job}}}", "{{instance}} after relabelling"),
                         Q(f"scrape_series_added{{{job}}}", "{{instance}} series added"),
                     ], width=8),
        b.timeseries("CPU", "CPU seconds per second each replica's process uses (1 = one core).", "short",
                     [Q(f"rate(process_cpu_seconds_total{{{job}}}[{R}])", "{{instance}}")], width=8),
        b.timeseries("Memory", "Resident and virtual memory of each replica's process.", "bytes", [
                         Q(f"process_resident_memory_bytes{{{job}}}", "{{instance}} resident"),
                         Q(f"process_virtual_memory_bytes{{{job}}}", "{{instance}} virtual"),
                     ]),
        b.timeseries("File descriptors", "Open file descriptors of each replica's process, and its limit.",
                     "short", [
                         Q(f"process_open_fds{{{job}}}", "{{instance}} open"),
                         Q(f"process_max_fds{{{job}}}", "{{instance}} limit"),
                     ]),
    )
    return b.build()
