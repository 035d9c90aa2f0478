"""`ragdrift demo`: the embedded broker, live traffic with incidents, and the agent.

`agent.demo` is imported only when the command runs: the production path never loads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.cli.common import UsageError, finite

# Events per second: at the lowest, one event in 100 s; faster than the
# highest, one Python producer falls behind and the schedule means nothing.
MIN_RATE, MAX_RATE = 0.01, 100_000
PRODUCER_HINT = "pip install ./producer"  # from a clone of the repository; `make` installs it in .venv


def add_parser(commands) -> None:
    demo_ = commands.add_parser("demo", help="embedded broker, live traffic with incidents, and the agent")
    demo_.add_argument("--rate", type=finite, default=50.0,
                       help=f"events per second ({MIN_RATE:g} to {MAX_RATE:g})")
    demo_.add_argument("--port", type=int, default=9108, help="metrics port (0 picks a free one)")
    demo_.add_argument("--minutes", type=finite, default=0, help="stop after this many minutes (0: until Ctrl-C)")
    demo_.add_argument("--seed", type=int, default=1)
    demo_.add_argument("--dir", default="ragdrift-demo", metavar="DIR",
                       help="where the demo keeps its store, batches and configuration (default: ragdrift-demo)")
    demo_.set_defaults(handler=demo)


def demo(args: argparse.Namespace) -> int:
    try:
        from agent.demo.app import Demo
    except ModuleNotFoundError as exc:  # the demo's app sends its traffic through the producer library
        if exc.name != "ragdrift_producer":
            raise
        raise UsageError(f"the demo's app needs the producer library, which is not installed: {PRODUCER_HINT}") from None
    from agent.demo.broker import BrokerMissing, tansu_bin
    from agent.io.settings import checks

    # Every argument before the broker starts: afterwards a bad one would stop a thread, not the demo.
    if not MIN_RATE <= args.rate <= MAX_RATE:
        raise UsageError(f"--rate {args.rate:g}: expected events per second from {MIN_RATE:g} to {MAX_RATE:g}")
    if args.minutes < 0:
        raise UsageError(f"--minutes {args.minutes:g}: expected 0 (until Ctrl-C) or more")
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port}: expected a TCP port (0 picks a free one)")
    if not checks.path(args.dir):
        raise UsageError("--dir: expected a directory path")
    try:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, say
        raise UsageError(f"--dir {args.dir!r}: cannot make the directory: {exc.strerror}") from None
    try:
        tansu_bin()  # before anything starts: without the `demo` extra, one line that says what to install
    except BrokerMissing as exc:
        raise UsageError(str(exc)) from None
    return Demo(rate=args.rate, port=args.port, minutes=args.minutes, seed=args.seed, directory=args.dir).run()
