"""`ragdrift judgments report`: the judged figures of a batch, or of the last weeks' batches.

Batches come from the store's `ragdrift_batches` rows, their manifest and key
from the batch directory, their labels from the latest qrels
(agent/jobs/judgments.py); this module parses, computes, renders and plots.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

from agent.cli.common import UsageError, at_least, finite, open_store
from agent.cli.run import settings_from


def add_report(actions) -> None:
    report = actions.add_parser("report", help="precision, recall, MRR, hit rate and nDCG of judged batches, "
                                               "with intervals, agreement, missed tags and slices")
    report.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    which = report.add_mutually_exclusive_group()
    which.add_argument("--batch", metavar="ID", help="this batch (default: the newest)")
    which.add_argument("--weeks", metavar="N", type=int, default=1, help="the newest N weekly batches (default: 1)")
    report.add_argument("--format", choices=("table", "json", "md"), default="table", help="json: one report per line")
    report.add_argument("--plots", metavar="DIR", help="write precision over weeks and the reliability diagram as PNG")
    report.add_argument("--relevance-threshold", type=finite, default=2.0, metavar="G",
                        help="a mean grade at least G is relevant (default: 2)")
    report.add_argument("--gain", choices=("exp", "linear"), default="exp", help="nDCG gain: 2^g - 1 (default) or g")
    report.add_argument("--resamples", type=int, default=2000, metavar="N", help="bootstrap resamples per challenge interval")
    report.add_argument("--seed", type=int, default=0, help="the challenge bootstrap's seed")
    report.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from agent.core.judgments.report import Options
    from agent.jobs.report import render, reports

    at_least(args.weeks, 1, "--weeks")
    at_least(args.resamples, 1, "--resamples")
    at_least(args.seed, 0, "--seed")
    if args.plots and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plots needs matplotlib: pip install 'ragdrift-agent[plots]'")
    batches = _load(args.config, args.batch, args.weeks)
    if not batches:
        raise UsageError(f"no batch {args.batch}" if args.batch else "no judgment batch yet: build one with `ragdrift batch build`")
    options = Options(threshold=args.relevance_threshold, gain=args.gain, resamples=args.resamples, seed=args.seed)
    try:
        found = reports(batches, options)
    except ValueError as exc:  # labels the batch's key does not hold
        raise UsageError(str(exc)) from None
    sys.stdout.write(render(found, args.format))
    if args.plots:
        from agent.io.files.plots import plot

        for path in plot(found, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _load(config: str | None, batch: str | None, weeks: int):
    from agent.io.features.judgment import Judgment
    from agent.io.files.batch_files import ExportError
    from agent.io.store.database import StoreError
    from agent.io.store.qrels import Qrels
    from agent.io.store.queue import Queue
    from agent.jobs.judgments import judged_batches

    settings = settings_from(config)
    with open_store(settings, Judgment.tables, write=False) as store:
        try:
            return judged_batches(Queue(store), Qrels(store), settings.kafka.group_id, batch, weeks)
        except (ExportError, StoreError) as exc:
            raise UsageError(str(exc)) from None
