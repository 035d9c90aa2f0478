"""The `ragdrift` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import BinaryIO

from agent import __version__


class UsageError(Exception):
    """An input or usage problem: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line that names the problem, as for every other usage error."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args) or 0
    except UsageError as exc:
        print(f"ragdrift: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ragdrift",
        description="Monitor RAG retrieval in production from retrieval.v1 logs.",
    )
    parser.add_argument("--version", action="version", version=f"ragdrift {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = commands.add_parser("generate", help="write deterministic synthetic retrieval.v1 traffic as JSON Lines")
    gen.add_argument("--events", type=int, required=True, help="number of lines to write")
    gen.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    gen.add_argument("--start", type=_timestamp, help="event time of the first event (RFC 3339)")
    gen.add_argument("--rate", type=float, default=20.0, help="events per second of event time")
    gen.add_argument(
        "--incident", action="append", default=[], metavar="KIND@MINUTE",
        help="inject an incident: leak, stale, score-drift, source-dominance, filter-outage, new-terms",
    )
    gen.add_argument("--invalid-rate", type=float, default=0.0, help="share of lines that are invalid messages")
    gen.add_argument("--output", "-o", default="-", help="file to write (default stdout)")
    gen.set_defaults(handler=_generate)

    rep = commands.add_parser("replay", help="run JSON Lines events through the agent's decode and metric path")
    rep.add_argument("files", nargs="+", metavar="FILE", help="JSON Lines files ('-' for stdin)")
    rep.add_argument("--format", choices=("table", "json"), default="table")
    rep.add_argument("--max-bytes", type=int, default=1 << 20, help="messages above this size are too_large")
    rep.set_defaults(handler=_replay)

    run = commands.add_parser("run", help="run the agent: consume retrieval.v1 from Kafka and expose metrics")
    run.add_argument("--config", metavar="FILE", help="YAML configuration (RAGDRIFT_* variables override it)")
    run.set_defaults(handler=_run)

    check = commands.add_parser("check-config", help="validate a configuration file and print the result")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--format", choices=("table", "json"), default="table")
    check.set_defaults(handler=_check_config)

    demo = commands.add_parser("demo", help="embedded broker, live traffic with incidents, and the agent")
    demo.add_argument("--rate", type=float, default=50.0, help="events per second")
    demo.add_argument("--port", type=int, default=9108, help="metrics port (0 picks a free one)")
    demo.add_argument("--minutes", type=float, default=0, help="stop after this many minutes (0: until Ctrl-C)")
    demo.add_argument("--seed", type=int, default=1)
    demo.set_defaults(handler=_demo)
    return parser


def _settings(path: str | None):
    from agent.io.settings import ConfigError, load

    try:
        return load(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    from agent.io import logs
    from agent.service import serve

    settings = _settings(args.config)
    logs.setup(settings.logging.format, settings.logging.level)
    return serve(settings)


def _check_config(args: argparse.Namespace) -> int:
    doc = _settings(args.file).redacted()
    if args.format == "json":
        print(json.dumps(doc, sort_keys=True))
    else:
        print(f"{args.file}: ok")
        for section, values in doc.items():
            for key, value in values.items():
                print(f"  {section}.{key} = {value}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from agent.demo import Demo

    return Demo(rate=args.rate, port=args.port, minutes=args.minutes, seed=args.seed).run()


def _timestamp(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 timestamp: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"timestamp needs an offset (e.g. Z): {text!r}")
    return value


def _generate(args: argparse.Namespace) -> int:
    from agent import synth

    if args.events < 0 or args.rate <= 0 or not 0 <= args.invalid_rate <= 1:
        raise UsageError("--events must be >= 0, --rate > 0 and --invalid-rate in [0, 1]")
    try:
        incidents = [synth.parse_incident(text) for text in args.incident]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    lines = synth.generate(args.events, args.seed, args.start, args.rate, incidents, args.invalid_rate)
    try:
        with _open_output(args.output) as out, _progress(args.events) as bar:
            for line in lines:
                out.write(line + b"\n")
                bar.update(1)
    except BrokenPipeError:  # `ragdrift generate ... | head` is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _open_output(path: str) -> BinaryIO:
    if path == "-":
        return open(sys.stdout.fileno(), "wb", closefd=False)
    try:
        return open(path, "wb")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def _replay(args: argparse.Namespace) -> int:
    from agent.core.config import CoreConfig
    from agent.core.reasons import RejectedEvent
    from agent.core.state import PartitionState
    from agent.core.summary import summarize

    streams = [_open_input(path) for path in args.files]
    # A batch tool over a finite input: keep every label value, so that source
    # concentration is exact rather than folded into `other`.
    state = PartitionState(CoreConfig(max_label_values=1 << 30))
    rejected: Counter[str] = Counter()
    with _progress() as bar:
        for line in _lines(streams):
            try:
                state.process(line, args.max_bytes)
            except RejectedEvent as exc:
                rejected[exc.kind] += 1
            bar.update(1)
    summary = summarize(state.totals(), dict(rejected))
    if args.format == "json":
        print(json.dumps(summary, sort_keys=True))
    else:
        print(_table(summary))
    return 0


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


def _progress(total: int | None = None):
    """A progress bar on stderr, only when a person is watching it."""
    from tqdm import tqdm

    return tqdm(total=total, unit=" events", disable=not sys.stderr.isatty(), file=sys.stderr, mininterval=0.5)


def _table(summary: dict) -> str:
    rows: list[tuple[str, str]] = []
    events = summary["events"]
    rows.append(("events processed", str(events["processed"])))
    rows.append(("events late", str(events["late"])))
    for reason, count in events["rejected"].items():
        rows.append((f"rejected: {reason}", str(count)))
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


if __name__ == "__main__":
    sys.exit(main())
