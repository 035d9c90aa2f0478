"""`ragdrift judgments import|pull`: judged labels back into the store as versioned qrels.

`import` reads judges' files (JSONL, CSV, Label Studio's JSON export; the
format from the extension, else the content); `pull` reads a Label Studio
project's annotations through its REST API. Both check every label against
its batch's key and import nothing when any row is bad: each problem is
printed with its file, line and reason, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.cli.common import UsageError, at_least, http_url, open_store, positive
from agent.cli.report import add_report
from agent.cli.run import settings_from


def add_parser(commands) -> None:
    judgments = commands.add_parser("judgments", help="judged batches back: import labels from files or Label Studio, and report on them")
    actions = judgments.add_subparsers(dest="action", required=True, metavar="ACTION")
    for add in SUBCOMMANDS:
        add(actions)


def add_import(actions) -> None:
    imp = actions.add_parser("import", help="import judges' labels from JSONL, CSV or Label Studio JSON export files")
    imp.add_argument("files", nargs="+", metavar="FILE",
                     help="*.jsonl, *.csv or a Label Studio *.json export (else told apart by content)")
    _common(imp)
    imp.set_defaults(handler=import_files)


def add_pull(actions) -> None:
    pull = actions.add_parser("pull", help="import the annotations of a Label Studio project through its REST API")
    pull.add_argument("--label-studio-url", required=True, metavar="URL", help="the Label Studio server")
    pull.add_argument("--project", required=True, type=int, metavar="ID", help="the project's id")
    pull.add_argument("--label-studio-token-file", metavar="FILE",
                      help="file holding the Label Studio API token (default: $LABEL_STUDIO_TOKEN)")
    pull.add_argument("--timeout", type=positive, default=60.0, metavar="SECONDS",
                      help="time for the whole exchange with Label Studio, to the export's last byte (default: 60)")
    pull.add_argument("--max-export-mb", type=positive, default=100.0, metavar="MB",
                      help="the largest export read, in megabytes; memory use is about five times it (default: 100)")
    _common(pull)
    pull.set_defaults(handler=pull_project)


def add_calibrate(actions) -> None:
    calibrate = actions.add_parser("calibrate", help="refit the score calibrations on the newest judged batches "
                                                     "(import and pull do it when labels are newer than the fits)")
    _common(calibrate)
    calibrate.set_defaults(handler=calibrate_scores)


SUBCOMMANDS = [add_import, add_pull, add_report, add_calibrate]  # each adds one `ragdrift judgments` action


def _common(parser) -> None:
    parser.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    parser.add_argument("--format", choices=("table", "json"), default="table")


def import_files(args: argparse.Namespace) -> int:
    from agent.core.judgments.importing import parse

    parsed = []
    for file in args.files:
        try:
            text = Path(file).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
        parsed.append(parse(file, text))
    return _import(args, parsed)


def pull_project(args: argparse.Namespace) -> int:
    from agent.core.judgments.importing import parse_label_studio
    from agent.io.http.fetch import Deadline
    from agent.io.label_studio.client import LabelStudio, LabelStudioError, TooLarge, token_from

    at_least(args.project, 1, "--project")
    url = http_url(args.label_studio_url, "--label-studio-url")
    settings = settings_from(args.config)
    try:
        token = token_from(args.label_studio_token_file, settings.judgment.label_studio.token_env)
        client = LabelStudio(url, token, timeout=args.timeout, deadline=Deadline(args.timeout),
                             max_bytes=int(args.max_export_mb * 1_000_000))
        exported = client.export_annotations(args.project)
    except TooLarge as exc:
        raise UsageError(f"{exc}: pull again with a larger --max-export-mb (memory use is about five times "
                         "the export's size)") from None
    except LabelStudioError as exc:
        raise UsageError(str(exc)) from None
    return _import(args, [parse_label_studio(f"label-studio project {args.project}", exported)], settings)


def _tables():
    from agent.io.features import tables_of
    from agent.io.features.calibration import ScoreCalibrations
    from agent.io.features.judgment import Judgment

    return tables_of((Judgment, ScoreCalibrations))


def _import(args: argparse.Namespace, parsed: list, settings=None) -> int:
    from agent.core.judgments.importing import Refused
    from agent.io.files.batch_files import ExportError
    from agent.io.store.database import StoreError
    from agent.io.store.qrels import Qrels
    from agent.io.store.queue import Queue
    from agent.jobs.judgments import import_parsed, recalibrate

    settings = settings or settings_from(args.config)
    with open_store(settings, _tables(), write=True) as store:
        try:
            queue, qrels = Queue(store), Qrels(store)
            imported = import_parsed(queue, qrels, settings.kafka.group_id, parsed)
            # committed: from here on nothing turns the import into an error
            fits, failed = recalibrate(store, queue, qrels, settings.kafka.group_id, settings.judgment.calibration)
        except Refused as exc:
            return _refused(args, exc.problems)
        except (ExportError, StoreError) as exc:
            raise UsageError(str(exc)) from None
    if failed is not None:
        print(f"ragdrift: warning: labels imported, but the calibration failed and stays owed (the next import "
              f"or `ragdrift judgments calibrate` fits again): {failed}", file=sys.stderr)
    summaries = [x.summary() for x in imported]
    for duplicate in (d for s in summaries for d in s["duplicates"]):
        print(f"ragdrift: warning: {duplicate}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps({"imported": True, "files": summaries, "calibrations": [_fit(f) for f in fits],
                          "calibration_error": failed}, sort_keys=True))
        return 0
    for s in summaries:
        batches = ", ".join(s["batches"]) or "no batch"
        counts = (f"{s['new']} new, {s['changed']} changed, {s['unchanged']} unchanged"
                  if s["new"] or s["changed"] else "nothing new (already imported)" if s["labels"] else "no labels")
        skipped = f"; {s['skipped']} without a grade skipped" if s["skipped"] else ""
        print(f"{s['file']}: {s['labels']} labels of {batches}: {counts}{skipped}")
    for fit in fits:
        print(_fit_line(fit))
    return 0


def calibrate_scores(args: argparse.Namespace) -> int:
    from agent.io.files.batch_files import ExportError
    from agent.io.store.database import StoreError
    from agent.io.store.qrels import Qrels
    from agent.io.store.queue import Queue
    from agent.jobs.judgments import calibrate

    settings = settings_from(args.config)
    with open_store(settings, _tables(), write=True) as store:
        try:
            fits = calibrate(store, Queue(store), Qrels(store), settings.kafka.group_id, settings.judgment.calibration)
        except (ExportError, StoreError) as exc:
            raise UsageError(str(exc)) from None
    if args.format == "json":
        print(json.dumps({"calibrations": [_fit(f) for f in fits]}, sort_keys=True))
    elif not fits:
        print("no judged batch with graded chunks yet: nothing to fit")
    for f in fits if args.format != "json" else ():
        print(_fit_line(f))
    return 0


def _fit(fit) -> dict:
    return {"app": fit.app, "pipeline_version": fit.pipeline_version, "labels": fit.n, "ece": fit.ece,
            "brier": fit.brier}


def _fit_line(fit) -> str:
    """One fit's line; its app and pipeline version come from a batch's key, and are escaped."""
    from agent.core.escape import plain

    error = ("too few to cross-validate" if fit.ece is None
             else f"cross-validated ECE {fit.ece:.3f}, Brier {fit.brier:.3f}")
    version = plain(fit.pipeline_version) if fit.pipeline_version else "no pipeline version"
    return f"calibration {plain(fit.app)} / {version}: {fit.n} judged chunks, {error}"


def _refused(args: argparse.Namespace, problems) -> int:
    files = len({p.file for p in problems})
    if args.format == "json":
        print(json.dumps({"imported": False, "problems": [
            {"file": p.file, "unit": p.unit, "line": p.line, "reason": p.reason} for p in problems]}, sort_keys=True))
    else:
        for p in problems:
            print(f"ragdrift: {p}", file=sys.stderr)
    raise UsageError(f"nothing imported: {len(problems)} problem(s) in {files} file(s)")
