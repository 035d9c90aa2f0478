"""`ragdrift dead-letters`: why a producer's events are refused, summed from the dead-letter topic.

It reads the topic once, to its end as it stands, with a consumer of no group
(agent/io/kafka/dead_letter_topic.py), and prints counts by reason kind and by
reason with list positions folded, where the letters sit, which source
offsets they stand for, and a few example event ids per reason. No payload
and no other payload text is ever printed: an event id only when it can be
read safely (agent/core/dead_letter_summary.py). Reasons and topic names are
the topic's text: the table writes each through escape.plain, JSON escapes
every character beyond ASCII.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from agent.cli.common import UsageError, at_least, json_text, positive, progress
from agent.cli.run import settings_from
from agent.core.escape import plain

MAX_EXAMPLES = 1000


def add_parser(commands) -> None:
    dead = commands.add_parser("dead-letters", help="why events are refused: the dead-letter topic summed by reason")
    dead.add_argument("--config", metavar="FILE",
                      help="the agent's YAML configuration (its kafka section: servers, dead-letter topic, client settings)")
    dead.add_argument("--bootstrap-servers", metavar="HOSTS", help="host:port,... (default: kafka.bootstrap_servers)")
    dead.add_argument("--topic", help="the topic to read (default: kafka.dead_letter_topic)")
    dead.add_argument("--since", metavar="TIME", help="only letters written at or after this RFC 3339 time")
    dead.add_argument("--examples", type=int, default=3, metavar="N", help="example event ids per reason (default 3)")
    dead.add_argument("--timeout", type=positive, default=30.0, metavar="SECONDS",
                      help="longest wait on the broker: reaching it, its offsets, any stretch of reading without a "
                           "record (default 30)")
    dead.add_argument("--format", choices=("table", "json"), default="table")
    dead.set_defaults(handler=dead_letters)


def dead_letters(args: argparse.Namespace) -> int:
    from agent.core.dead_letter_summary import Summary
    from agent.io.kafka.dead_letter_topic import TopicError, letter, reading

    at_least(args.examples, 0, "--examples")
    if args.examples > MAX_EXAMPLES:  # each reason keeps this many in memory, and prints them
        raise UsageError(f"--examples must be at most {MAX_EXAMPLES}, got {args.examples}")
    since = _since(args.since)
    kafka = _kafka(settings_from(args.config), args.bootstrap_servers)
    topic = args.topic if args.topic is not None else kafka.dead_letter_topic
    if not topic:
        raise UsageError("--topic must not be empty")
    summary = Summary(args.examples)
    try:
        with reading(kafka, topic, args.timeout, since) as topic_reading, progress(topic_reading.expected) as bar:
            for record in topic_reading.records():
                summary.add(letter(record))
                bar.update(1)
    except TopicError as exc:
        raise UsageError(str(exc)) from None
    report = {"topic": topic, "since": args.since, **summary.to_dict()}
    print(json_text(report, indent=2) if args.format == "json" else _table(report))
    return 0


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {plain(text)!r}: expected an RFC 3339 time") from None
    if when.tzinfo is None:
        raise UsageError(f"--since {plain(text)!r}: the time needs an offset (Z or +hh:mm)")
    return when.timestamp()


def _kafka(settings, servers: str | None):
    """The kafka section, with --bootstrap-servers; a usage error when its client settings are not
    kafka-python's (`kafka.library: confluent-kafka` with settings: this command reads with kafka-python)."""
    import dataclasses

    from agent.io.kafka.options import CONFLUENT

    kafka = settings.kafka
    if kafka.library == CONFLUENT and (kafka.client or kafka.consumer):
        raise UsageError("dead-letters reads with kafka-python, and kafka.client / kafka.consumer hold librdkafka "
                         "settings (kafka.library: confluent-kafka); give it a configuration with kafka-python's names")
    if servers is not None:
        if not all(part.strip() for part in servers.split(",")):
            raise UsageError("--bootstrap-servers must be a comma-separated list of host:port")
        kafka = dataclasses.replace(kafka, bootstrap_servers=servers)
    return kafka


def _table(report: dict) -> str:
    lines = [f"dead letters in {plain(report['topic'])}"
             + (f" since {plain(report['since'])}" if report["since"] else "") + f": {report['total']}"]
    for part in report["partitions"]:
        written = f", written {part['first_written']} to {part['last_written']}" if part["first_written"] else ""
        lines.append(f"  partition {part['partition']}: {part['count']} at offsets "
                     f"{part['first_offset']}-{part['last_offset']}{written}")
    if report["without_reason"]:
        lines.append(f"  without a reason header: {report['without_reason']}")
    if report["kinds"]:
        lines += ["", "by kind:"]
        width = max(len(plain(k["kind"])) for k in report["kinds"])
        lines += [f"  {plain(k['kind']):<{width}}  {k['count']:>8}" for k in report["kinds"]]
        lines += _others(report["other_kinds"], "kinds")
    if report["reasons"]:
        lines += ["", "by reason (list positions folded):"]
        width = max(len(plain(r["reason"])) for r in report["reasons"])
        for r in report["reasons"]:
            lines.append(f"  {plain(r['reason']):<{width}}  {r['count']:>8}")
            if r["examples"]:
                lines.append(f"      e.g. {', '.join(map(_example, r['examples']))}")
        lines += _others(report["other_reasons"], "reasons")
    if report["sources"] or report["without_source"]:
        lines += ["", "source offsets:"]
        for s in report["sources"]:
            lines.append(f"  {plain(s['topic'])}/{s['partition']}: {s['count']} letters for offsets "
                         f"{s['first_offset']}-{s['last_offset']}")
        lines += _others(report["other_sources"], "source partitions")
        if report["without_source"]:
            lines.append(f"  without source headers: {report['without_source']}")
    return "\n".join(lines)


def _example(example: dict) -> str:
    """`event-id (topic/partition@offset)`, or either alone."""
    source = example["source"]
    at = None if source is None else f"{plain(source['topic'])}/{source['partition']}@{source['offset']}"
    if example["event_id"] is None:
        return str(at)
    return plain(example["event_id"]) + (f" ({at})" if at else "")


def _others(others: dict, what: str) -> list[str]:
    if not others["count"]:
        return []
    untracked = " and more beyond the distinct ones counted" if others["untracked"] else ""
    return [f"  others: {others['count']} letters under {others['distinct']} more {what}{untracked}"]
