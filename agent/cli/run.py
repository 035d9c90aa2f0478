"""`ragdrift run` and `ragdrift check-config`: the agent against a real Kafka, and its configuration."""

from __future__ import annotations

import argparse
import json
import sys

from agent.cli.common import UsageError


def add_parser(commands) -> None:
    run_ = commands.add_parser("run", help="run the agent: consume retrieval.v1 from Kafka and expose metrics")
    run_.add_argument("--config", metavar="FILE", help="YAML configuration (RAGDRIFT_* variables override it)")
    run_.set_defaults(handler=run)

    check = commands.add_parser("check-config", help="validate a configuration file and print the result")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--format", choices=("table", "json"), default="table")
    check.set_defaults(handler=check_config)


def settings_from(path: str | None):
    """The settings from a file (and the environment), or a usage error naming the key."""
    from agent.io.settings.agent import ConfigError, load

    try:
        return load(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from agent.io import logs
    from agent.service import serve

    settings = settings_from(args.config)
    logs.setup(settings.logging.format, settings.logging.level)
    return serve(settings)


def check_config(args: argparse.Namespace) -> int:
    from agent.io.features import warnings
    from agent.service import FEATURES

    settings = settings_from(args.file)
    for warning in warnings(FEATURES, settings):
        print(f"ragdrift: warning: {warning}", file=sys.stderr)
    doc = settings.redacted()
    if args.format == "json":
        print(json.dumps(doc, sort_keys=True))
    else:
        from agent.core.escape import plain

        print(f"{args.file}: ok")
        for section, values in doc.items():
            for key, value in values.items():
                print(f"  {section}.{key} = {plain(str(value))}")  # the file's text: one line, no control sequence
    return 0
