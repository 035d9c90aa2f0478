"""`ragdrift generate`: deterministic synthetic traffic as JSON Lines."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import BinaryIO

from agent.cli.common import UsageError, progress


def add_parser(commands) -> None:
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
    gen.set_defaults(handler=generate)


def _timestamp(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 timestamp: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"timestamp needs an offset (e.g. Z): {text!r}")
    return value


def generate(args: argparse.Namespace) -> int:
    from agent import synth

    if args.events < 0 or args.rate <= 0 or not 0 <= args.invalid_rate <= 1:
        raise UsageError("--events must be >= 0, --rate > 0 and --invalid-rate in [0, 1]")
    try:
        incidents = [synth.parse_incident(text) for text in args.incident]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    lines = synth.generate(args.events, args.seed, args.start, args.rate, incidents, args.invalid_rate)
    with _open_output(args.output) as out, progress(args.events) as bar:  # a closed pipe: see agent.cli.main
        for line in lines:
            out.write(line + b"\n")
            bar.update(1)
    return 0


def _open_output(path: str) -> BinaryIO:
    if path == "-":
        return open(sys.stdout.fileno(), "wb", closefd=False)
    try:
        return open(path, "wb")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
