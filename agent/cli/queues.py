"""`ragdrift batch build|push` and `ragdrift security list`: the judgment and security queues.

The security list's texts come from the store (app names, event and chunk
ids): the table writes each through escape.plain, so none adds a line or a
control sequence.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from datetime import UTC, datetime

from agent.cli.common import UsageError, at_least, http_url, open_store, positive
from agent.cli.run import settings_from
from agent.core.escape import plain

_NAMED = 20  # unreadable rows named by event id; the count covers the rest


def add_parser(commands) -> None:
    batch = commands.add_parser("batch", help="judgment batches: build one now, push one to Label Studio")
    actions = batch.add_subparsers(dest="action", required=True, metavar="ACTION")
    build = actions.add_parser("build", help="build a week's blind judgment batch from the stored candidates")
    build.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store and judgment sections)")
    build.add_argument("--week", help="ISO week, e.g. 2026-W48 (default: last week)")
    build.add_argument("--partial", action="store_true",
                       help="build the week still running, as a partial batch (the week's own batch comes once it ends)")
    build.add_argument("--out", metavar="DIR", help="export directory (default: judgment.export_dir)")
    build.add_argument("--format", choices=("files", "label-studio"), default="files",
                       help="label-studio: also write Label Studio tasks and labeling configuration")
    _label_studio_options(build, "then create a Label Studio project with the batch's tasks")
    build.set_defaults(handler=build_batch)
    push = actions.add_parser("push", help="create a Label Studio project of a built batch's tasks (again)")
    push.add_argument("batch", metavar="BATCH", help="the batch id, e.g. 2026-W48-6c27fe2b")
    push.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store and judgment sections)")
    _label_studio_options(push, "Label Studio (default: judgment.label_studio.url)")
    push.set_defaults(handler=push_batch)

    security = commands.add_parser("security", help="the security review queue")
    actions = security.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="events that served unauthorized results, oldest first")
    listing.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    listing.add_argument("--since", metavar="TIME", help="only events at or after this RFC 3339 time")
    listing.add_argument("--limit", type=int, default=None, metavar="N", help="only the N oldest rows")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.set_defaults(handler=list_security)


def _label_studio_options(parser, url_help: str) -> None:
    parser.add_argument("--label-studio-url", metavar="URL", help=url_help)
    parser.add_argument("--label-studio-token-file", metavar="FILE",
                        help="file holding the Label Studio API token "
                             "(default: judgment.label_studio.token_file, else $LABEL_STUDIO_TOKEN)")
    parser.add_argument("--timeout", type=positive, metavar="SECONDS",
                        help="time for every request of the command together: the resolver's, Label Studio's "
                             "(default: judgment.batch_timeout_seconds)")


@contextmanager
def _queue(settings, *, write: bool):
    """The queues of the agent's store, closed when the block ends."""
    from agent.io.store.queue import TABLES, Queue

    with open_store(settings, TABLES, write=write) as store:
        yield Queue(store)


def build_batch(args: argparse.Namespace) -> int:
    from agent.jobs import batch

    settings = settings_from(args.config)
    now = datetime.now(UTC).timestamp()
    week = args.week or batch.last_week(now)
    target = _target(settings, args.label_studio_url, args.label_studio_token_file) if args.label_studio_url else None
    with _queue(settings, write=True) as queue, _one_line():
        try:
            built = batch.build(settings, queue, week, args.out, args.format == "label-studio", target,
                                args.partial, now, _deadline(settings, args.timeout))
        except batch.NotPushed as exc:  # recorded: say so, then why Label Studio has not got it
            _print_built(exc.built)
            raise
    _print_built(built)
    return 0


def push_batch(args: argparse.Namespace) -> int:
    from agent.io.secrets import redact_url
    from agent.jobs import batch

    settings = settings_from(args.config)
    url = args.label_studio_url or settings.judgment.label_studio.url
    if not url:
        raise UsageError("no Label Studio to push to: pass --label-studio-url or set judgment.label_studio.url")
    target = _target(settings, url, args.label_studio_token_file)
    with _queue(settings, write=True) as queue, _one_line():
        project = batch.push(queue, settings.kafka.group_id, args.batch, target, _deadline(settings, args.timeout))
    print(f"{args.batch}: Label Studio project {project} at {redact_url(url)}")
    return 0


def _target(settings, url: str, token_file: str | None):
    from agent.jobs.batch import Target

    ls = settings.judgment.label_studio
    return Target(http_url(url, "--label-studio-url"), token_file or ls.token_file, ls.token_env)


def _deadline(settings, timeout: float | None):
    """The command's deadline, from now: `--timeout`, else the configured one."""
    from agent.io.http.fetch import Deadline

    return Deadline(timeout or settings.judgment.batch_timeout_seconds)


def _print_built(built) -> None:
    partial = " (partial: the week has not ended)" if built.partial else ""
    project = f", Label Studio project {built.project}" if built.project is not None else ""
    print(f"{built.batch_id}: {built.items} items for {built.week}{partial} in {built.directory}{project}")


@contextmanager
def _one_line():
    """The errors a batch command expects, as one line each (exit status 2)."""
    from agent.jobs.batch import EXPECTED

    try:
        yield
    except EXPECTED as exc:
        raise UsageError(str(exc)) from None


def list_security(args: argparse.Namespace) -> int:
    at_least(args.limit, 0, "--limit")
    settings = settings_from(args.config)
    since = None
    if args.since is not None:
        try:
            since = datetime.fromisoformat(args.since.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise UsageError(f"--since {args.since!r}: expected an RFC 3339 time") from None
    with _queue(settings, write=False) as queue:
        incidents, unreadable = queue.incidents(settings.kafka.group_id, since, args.limit)
    if args.format == "json":
        for incident in incidents:
            sys.stdout.write(json.dumps(incident.to_dict(), sort_keys=True) + "\n")
    else:
        print(f"{'time':<20} {'app':<16} {'event':<36} {'unauthorized':>12}  chunks")
        for x in incidents:
            when = datetime.fromtimestamp(x.ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            chunks = ", ".join(plain(r[0]) for r in x.unauthorized) or "(claims missing)"
            print(f"{when:<20} {plain(x.app):<16} {plain(x.event_id):<36} {len(x.unauthorized):>12}  {chunks}")
    if unreadable:  # after the rows that could be read: the queue stays usable with a damaged row
        sys.stdout.flush()
        named = ", ".join(map(plain, unreadable[:_NAMED])) + (f" and {len(unreadable) - _NAMED} more" if len(unreadable) > _NAMED else "")
        print(f"ragdrift: error: {len(unreadable)} unreadable security queue row(s) skipped, event ids: {named}",
              file=sys.stderr)
        return 1
    return 0
