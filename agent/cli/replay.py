"""`ragdrift replay`: JSON Lines events through the agent's decode and metric path."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from typing import BinaryIO, cast

from agent.cli.common import UsageError, at_least, progress


def add_parser(commands) -> None:
    rep = commands.add_parser("replay", help="run JSON Lines events through the agent's decode and metric path")
    rep.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines files ('-' for stdin)")
    rep.add_argument("--format", choices=("table", "json"), default="table")
    rep.add_argument("--max-bytes", type=int, default=1 << 20, help="messages above this size are too_large")
    rep.add_argument("--sample", action="store_true",
                     help="also take the judgment sample (per week and stratum) and count security incidents")
    rep.add_argument("--config", metavar="FILE",
                     help="the agent's configuration: its judgment section for --sample, and windows.by_pipeline_version"
                          " (a summary per pipeline version besides the whole)")
    rep.set_defaults(handler=replay)


def replay(args: argparse.Namespace) -> int:
    from agent.cli.run import settings_from
    from agent.core.config import CoreConfig
    from agent.core.judgment import JudgmentIntake, QueueRows, samples
    from agent.core.partitions import Outbox
    from agent.core.pipelines import conform
    from agent.core.state import PartitionState
    from agent.core.summary import by_version, summarize

    at_least(args.max_bytes, 1, "--max-bytes")
    settings = settings_from(args.config) if args.config else None
    judging = _judging(settings) if args.sample else None
    split = settings is not None and settings.windows.by_pipeline_version
    streams = [_open_input(path) for path in args.files]
    # A batch tool over a finite input: keep every label value (and pipeline version), so that source
    # concentration is exact rather than folded into `other`.
    state = PartitionState(CoreConfig(max_label_values=1 << 30, by_pipeline_version=split,
                                      max_pipeline_versions=1 << 30), judgment=judging)
    rejected: Counter[str] = Counter()
    rows = Outbox()  # what every feature took (the judgment queue: every week's candidates, as stored)
    with progress() as bar:
        run(state, _lines(streams), args.max_bytes, rejected, rows, bar.update)
    totals = state.totals()
    summary = summarize(conform(totals, False), dict(rejected))
    if split:
        summary["pipeline_versions"] = by_version(totals)
    if args.sample:
        intake = cast(JudgmentIntake, state.feature("judgment"))
        held = cast(QueueRows, rows.held[intake.name])
        summary["security_incidents"] = len(held.incidents)
        summary["sample"] = _sample(samples(held.added.values(), intake.config.budgets))
    if args.format == "json":
        print(json.dumps(summary, sort_keys=True))
    else:
        print(_table(summary))
    return 0


def run(state, lines: Iterator[bytes], max_bytes: int, rejected: Counter, rows, tick=lambda n: None) -> None:
    """Feed `lines` through `state`, as the agent's consumer loop does per poll, and as its checkpoints
    do every `ROUND` lines: the round's additions are read back (`take_added`), which lets the windows
    forget buckets they retired, and what every feature took moves to `rows` (an `Outbox`)."""
    from agent.core.reasons import RejectedEvent

    for n, line in enumerate(lines, 1):
        try:
            state.process(line, max_bytes)
        except RejectedEvent as exc:
            rejected[exc.kind] += 1
        if n % ROUND == 0:
            state.take_added()
            rows.take(state)
        tick(1)
    state.take_added()
    rows.take(state)


ROUND = 10000


def _judging(settings):
    from agent.io.settings.agent import load
    from agent.io.settings.judgment import JudgmentSettings, judgment_config

    settings = settings or load(None, environ={})
    return judgment_config(settings.judgment) or judgment_config(JudgmentSettings())


def _sample(selections: dict) -> dict:
    """{week: {stratum: {tau, event_ids}}}, largest priority first."""
    out: dict = {}
    for (week, stratum), selection in selections.items():
        out.setdefault(week, {})[stratum] = {"tau": selection.tau, "event_ids": [c.event_id for c in selection.items]}
    return out


def _open_input(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def _lines(streams: list[BinaryIO]) -> Iterator[bytes]:
    for stream in streams:
        with stream:
            for line in stream:
                line = line.rstrip(b"\r\n")
                if line.strip():
                    yield line


def _table(summary: dict) -> str:
    rows = _rows(summary)
    for version, part in summary.get("pipeline_versions", {}).items():
        rows += [(f"pipeline {version}: {label}", value) for label, value in _rows(part)]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def _rows(summary: dict) -> list[tuple[str, str]]:
    """The table's rows of a summary, or of a pipeline version's (without the figures it has not)."""
    rows: list[tuple[str, str]] = []
    events = summary["events"]
    rows.append(("events processed", str(events["processed"])))
    if "late" in events:
        rows.append(("events late", str(events["late"])))
    for reason, count in events.get("rejected", {}).items():
        rows.append((f"rejected: {reason}", str(count)))
    for week, strata in summary.get("sample", {}).items():
        for stratum, taken in strata.items():
            rows.append((f"sample {week} {stratum}", f"{len(taken['event_ids'])} events, tau {_fmt(taken['tau'])}"))
    for key, value in summary.items():
        if key == "events" or isinstance(value, dict):
            continue
        rows.append((key.replace("_", " "), _fmt(value)))
    for kind, key in (("query type", "query_type_share"), ("language", "language_share")):
        for name, share in summary.get(key, {}).items():
            rows.append((f"{kind}: {name}", _fmt(share)))
    for name, outcome in summary.get("filters", {}).items():
        rows.append((f"filter {name}", ", ".join(f"{k} {v}" for k, v in outcome.items())))
    return rows


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
