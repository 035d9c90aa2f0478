"""The `ragdrift` command: `main()` and the parser, assembled from one module per command group."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback

from agent.cli import baseline, compare, dead_letters, demo, evaluate, generate, judgments, queues, replay, run
from agent.cli.common import UsageError
from agent.cli.version import VersionAction
from agent.io.secrets import scrub

__all__ = ["COMMAND_GROUPS", "UsageError", "build_parser", "main"]

# Each module adds its subcommands with `add_parser(commands)`; this order is the order in `--help`.
COMMAND_GROUPS = (generate, replay, run, dead_letters, baseline, queues, judgments, evaluate, compare, demo)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """One line that names the problem, as for every other usage error."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _run(build_parser().parse_args(argv))
        finally:  # output still buffered meets a closed pipe here, not at exit
            sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()


def _run(args: argparse.Namespace) -> int:
    """The command's status; the errors it anticipates as one line on stderr."""
    try:
        return args.handler(args) or 0
    except UsageError as exc:
        print(f"ragdrift: error: {scrub(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away: main's to handle, not a bug
        raise
    except Exception as exc:
        if _store_error(exc):  # the store failed after it was opened: one line, as a usage error
            print(f"ragdrift: error: {scrub(str(exc))}", file=sys.stderr)
            return 2
        print(scrub("".join(traceback.format_exception(exc))), end="", file=sys.stderr)  # a bug, credentials masked
        return 1


def _stdout_closed() -> int:
    """The reader of our output went away (`ragdrift ... | head`): stop quietly,
    with the status of a process ended by SIGPIPE, as other command-line tools do.
    Whatever is still buffered goes to /dev/null, so the flush at exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + int(signal.SIGPIPE)


def _store_error(exc: Exception) -> bool:
    """Whether `exc` is the store's error, looked up through the loaded module:
    a command that did not load it cannot have raised one."""
    store = sys.modules.get("agent.io.store.database")
    return store is not None and isinstance(exc, store.StoreError)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ragdrift",
        description="Monitor RAG retrieval in production from retrieval.v1 logs.",
    )
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.add_parser(commands)
    return parser
