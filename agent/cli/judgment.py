"""`ragdrift batch build` and `ragdrift security list`: the judgment and security queues."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timezone

from agent.cli.common import UsageError, open_store
from agent.cli.run import settings_from

_WEEK = re.compile(r"\d{4}-W\d{2}\Z")


def add_parser(commands) -> None:
    batch = commands.add_parser("batch", help="judgment batches: build one now")
    actions = batch.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build a week's blind judgment batch from the stored candidates")
    build.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store and judgment sections)")
    build.add_argument("--week", help="ISO week, e.g. 2026-W48 (default: last week)")
    build.add_argument("--out", metavar="DIR", help="export directory (default: judgment.export_dir)")
    build.add_argument("--format", choices=("files", "label-studio"), default="files",
                       help="label-studio: also write Label Studio tasks and labeling configuration")
    build.add_argument("--label-studio-url", metavar="URL", help="create a Label Studio project with the batch's tasks")
    build.add_argument("--label-studio-token-file", metavar="FILE",
                       help="file holding the Label Studio API token (default: $LABEL_STUDIO_TOKEN)")
    build.set_defaults(handler=build_batch)

    security = commands.add_parser("security", help="the security review queue")
    actions = security.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="events that served unauthorized results, oldest first")
    listing.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    listing.add_argument("--since", metavar="TIME", help="only events at or after this RFC 3339 time")
    listing.add_argument("--limit", type=int, default=None)
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.set_defaults(handler=list_security)


def _queue(settings):
    from agent.io.queue import TABLES, Queue

    return Queue(open_store(settings, TABLES))


def build_batch(args: argparse.Namespace) -> int:
    from agent.core.batch import Unsalted
    from agent.io.export import ExportError
    from agent.io.label_studio import LabelStudioError, token_from
    from agent.io.resolver import ResolverError
    from agent.jobs import batch

    settings = settings_from(args.config)
    if args.week is not None and not _WEEK.match(args.week):
        raise UsageError(f"--week {args.week!r}: expected an ISO week such as 2026-W48")
    week = args.week or batch.last_week(datetime.now(timezone.utc).timestamp())
    queue = _queue(settings)
    try:
        token = None
        if args.label_studio_url:
            token = token_from(args.label_studio_token_file, settings.judgment.label_studio.token_env)
        built = batch.build(settings, queue, week, args.out, args.format == "label-studio", args.label_studio_url, token)
    except (ExportError, ResolverError, LabelStudioError, Unsalted) as exc:
        raise UsageError(str(exc)) from None
    finally:
        queue.store.close()
    project = f", Label Studio project {built.project}" if built.project is not None else ""
    print(f"{built.batch_id}: {built.items} items for {built.week} in {built.directory}{project}")
    return 0


def list_security(args: argparse.Namespace) -> int:
    settings = settings_from(args.config)
    since = None
    if args.since is not None:
        try:
            since = datetime.fromisoformat(args.since.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise UsageError(f"--since {args.since!r}: expected an RFC 3339 time") from None
    queue = _queue(settings)
    try:
        incidents = queue.incidents(settings.kafka.group_id, since, args.limit)
    finally:
        queue.store.close()
    if args.format == "json":
        for incident in incidents:
            sys.stdout.write(json.dumps(incident.to_dict(), sort_keys=True) + "\n")
        return 0
    print(f"{'time':<20} {'app':<16} {'event':<36} {'unauthorized':>12}  chunks")
    for x in incidents:
        when = datetime.fromtimestamp(x.ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        chunks = ", ".join(r[0] for r in x.unauthorized) or "(claims missing)"
        print(f"{when:<20} {x.app:<16} {x.event_id:<36} {len(x.unauthorized):>12}  {chunks}")
    return 0
