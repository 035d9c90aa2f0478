"""The `ragdrift` command: `main()` and the parser, assembled from one module per command group."""

from __future__ import annotations

import argparse
import sys
import traceback

from agent import __version__
from agent.cli import baseline, demo, evaluate, generate, judgment, judgments, replay, run
from agent.cli.common import UsageError
from agent.io.secrets import scrub

__all__ = ["COMMAND_GROUPS", "UsageError", "build_parser", "main"]

# Each module adds its subcommands with `add_parser(commands)`; this order is the order in `--help`.
COMMAND_GROUPS = (generate, replay, run, baseline, judgment, judgments, evaluate, demo)


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
        print(f"ragdrift: error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: its traceback, with what looks like a credential masked
        print(scrub("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ragdrift",
        description="Monitor RAG retrieval in production from retrieval.v1 logs.",
    )
    parser.add_argument("--version", action="version", version=f"ragdrift {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.add_parser(commands)
    return parser
