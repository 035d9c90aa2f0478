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
    rep.add_argument("--config", metavar="FILE", help="the agent's configuration, for --sample (its judgment section)")
    rep.set_defaults(handler=replay)


def replay(args: argparse.Namespace) -> int:
    from agent.core.config import CoreConfig
    from agent.core.judging import QueueRows, samples
    from agent.core.partitions import Outbox
    from agent.core.state import PartitionState
    from agent.core.summary import summarize

    at_least(args.max_bytes, 1, "--max-bytes")
    judging, versions = _judging(args) if args.sample else (None, {})
    streams = [_open_input(path) for path in args.files]
    # A batch tool over a finite input: keep every label value, so that source
    # concentration is exact rather than folded into `other`.
    state = PartitionState(CoreConfig(max_label_values=1 << 30, **versions), judging=judging)
    rejected: Counter[str] = Counter()
    rows = Outbox()  # every week's candidates, as the store would hold them
    with progress() as bar:
        run(state, _lines(streams), args.max_bytes, rejected, rows if judging is not None else None, bar.update)
    summary = summarize(state.totals(), dict(rejected))
    if judging is not None:
        rows.take(state)
        held = cast(QueueRows, rows.judging)
        summary["security_incidents"] = len(held.incidents)
        summary["sample"] = _sample(samples(held.added.values(), judging.budgets))
    if args.format == "json":
        print(json.dumps(summary, sort_keys=True))
    else:
        print(_table(summary))
    return 0


def run(state, lines: Iterator[bytes], max_bytes: int, rejected: Counter, rows=None, tick=lambda n: None) -> None:
    """Feed `lines` through `state`, as the agent's consumer loop does per poll: every `ROUND` lines
    the round's additions are read back (`take_added`), which lets the windows forget buckets they
    retired, and the judgment candidates move to `rows` when it is given."""
    from agent.core.reasons import RejectedEvent

    for n, line in enumerate(lines, 1):
        try:
            state.process(line, max_bytes)
        except RejectedEvent as exc:
            rejected[exc.kind] += 1
        if n % ROUND == 0:
            state.take_added()
            if rows is not None:
                rows.take(state)
        tick(1)
    state.take_added()


ROUND = 10000


def _judging(args: argparse.Namespace):
    """The configuration's judgment sampling, and its split by pipeline version (the sample's strata
    name versions as the agent's do)."""
    from agent.cli.run import settings_from
    from agent.core.config import PIPELINE_VERSION
    from agent.io.settings.agent import load
    from agent.io.settings.judgment import JudgmentSettings, judging_config

    settings = settings_from(args.config) if args.config else load(None, environ={})
    w = settings.windows
    versions = {}
    if w.by_pipeline_version:
        fixed = w.labels.get(PIPELINE_VERSION)
        versions = {"by_pipeline_version": True, "max_pipeline_versions": w.max_pipeline_versions,
                    "label_values": {PIPELINE_VERSION: tuple(fixed)} if fixed else {}}
    return judging_config(settings.judgment) or judging_config(JudgmentSettings()), versions


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
    rows: list[tuple[str, str]] = []
    events = summary["events"]
    rows.append(("events processed", str(events["processed"])))
    rows.append(("events late", str(events["late"])))
    for reason, count in events["rejected"].items():
        rows.append((f"rejected: {reason}", str(count)))
    for week, strata in summary.get("sample", {}).items():
        for stratum, taken in strata.items():
            rows.append((f"sample {week} {stratum}", f"{len(taken['event_ids'])} events, tau {_fmt(taken['tau'])}"))
    for key, value in summary.items():
        if key == "events" or isinstance(value, dict):
            continue
        rows.append((key.replace("_", " "), _fmt(value)))
    for kind, shares in (("query type", summary["query_type_share"]), ("language", summary["language_share"])):
        for name, share in shares.items():
            rows.append((f"{kind}: {name}", _fmt(share)))
    for name, outcome in summary["filters"].items():
        rows.append((f"filter {name}", ", ".join(f"{k} {v}" for k, v in outcome.items())))
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
