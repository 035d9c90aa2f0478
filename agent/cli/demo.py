"""`ragdrift demo`: the embedded broker, live traffic with incidents, and the agent.

`agent.demo` is imported only when the command runs: the production path never loads it.
"""

from __future__ import annotations

import argparse

from agent.cli.common import UsageError


def add_parser(commands) -> None:
    demo_ = commands.add_parser("demo", help="embedded broker, live traffic with incidents, and the agent")
    demo_.add_argument("--rate", type=float, default=50.0, help="events per second")
    demo_.add_argument("--port", type=int, default=9108, help="metrics port (0 picks a free one)")
    demo_.add_argument("--minutes", type=float, default=0, help="stop after this many minutes (0: until Ctrl-C)")
    demo_.add_argument("--seed", type=int, default=1)
    demo_.add_argument("--dir", default="ragdrift-demo", metavar="DIR",
                       help="where the demo keeps its store, batches and configuration (default: ragdrift-demo)")
    demo_.set_defaults(handler=demo)


def demo(args: argparse.Namespace) -> int:
    from agent.demo.app import Demo
    from agent.demo.broker import BrokerMissing, tansu_bin

    if not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port}: expected a TCP port (0 picks a free one)")
    try:
        tansu_bin()  # before anything starts: without the `demo` extra, one line that says what to install
    except BrokerMissing as exc:
        raise UsageError(str(exc)) from None
    return Demo(rate=args.rate, port=args.port, minutes=args.minutes, seed=args.seed, directory=args.dir).run()
