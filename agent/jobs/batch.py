"""Build a week's judgment batch: now, on demand, or weekly, once for all replicas.

Reads every replica's candidates of the week from the store, takes the
sample one agent would take (agent/core/batch.py), asks the resolver for
text, writes the files under the export directory and records the batch,
together: the files are renamed into place inside the transaction that
records them, so a failed build leaves nothing and a retry starts afresh.

When a week can be built: once it has ended (Monday 00:00 UTC). Its batch
is built once. The week still running can be built with `partial`: such a
batch is recorded as partial, as often as it is asked for (each a batch of
its own), and never stands in the way of the week's own batch (`partial`
changes nothing once the week has ended). A week that has not begun, or
does not exist, is refused.

Pushing the batch to Label Studio is a step of its own, after the batch is
recorded: when Label Studio fails, the batch stays and `push` retries.
A build or a push has one `Deadline` (`judgment.batch_timeout_seconds`, or
the command's `--timeout`): the resolver's call and every Label Studio
request draw from it together.
The weekly job runs under a lock every replica respects and skips a week
that already has its batch.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agent import __version__
from agent.core import batch as batches
from agent.core.sampling import SIGNALS, UNIFORM, iso_week, shift_week, week_bounds
from agent.io.files import batch_files
from agent.io.http import resolver
from agent.io.http.fetch import Deadline
from agent.io.label_studio import client as label_studio
from agent.io.settings.agent import Settings
from agent.io.settings.judgment import THRESHOLDS, risk_config
from agent.io.store import locks
from agent.io.store.database import StoreError
from agent.io.store.queue import BatchExists, Queue

log = logging.getLogger("ragdrift.batch")


@dataclass(frozen=True, kw_only=True)
class Built:
    week: str
    batch_id: str
    directory: Path
    items: int
    partial: bool = False  # of a week still running
    project: int | None = None  # the Label Studio project, when one was created


@dataclass(frozen=True)
class Target:
    """A Label Studio to push batches to, and where its token is."""

    url: str
    token_file: str | None = None
    token_env: str = "LABEL_STUDIO_TOKEN"


class WeekError(ValueError):
    """A week that cannot be built (yet)."""


class NoSuchBatch(LookupError):
    """A batch id the store does not know."""


class NotPushed(RuntimeError):
    """The batch is built and recorded, but Label Studio did not take it."""

    def __init__(self, built: Built, reason: str):
        self.built = built
        super().__init__(f"{built.batch_id} is built and recorded, but Label Studio did not take it ({reason}): "
                         f"retry with `ragdrift batch push {built.batch_id}`")


# What a build or a push can meet that is not a bug: each says what, in one
# line that carries no secret and no judged text.
EXPECTED = (batch_files.ExportError, resolver.ResolverError, label_studio.LabelStudioError, StoreError, BatchExists,
            WeekError, NoSuchBatch, NotPushed, batches.Unsalted)


def failure(exc: Exception) -> str:
    """A failed job's exception in a log line: an expected error's message,
    else only its type (another exception's text may quote a token)."""
    return str(exc) if isinstance(exc, EXPECTED) else exc.__class__.__name__


def scheduled(settings: Settings, queue: Queue) -> str | None:
    """`weekly` as the agent schedules it: None when it did its part, else its failure in one log line."""
    try:
        weekly(settings, queue)
    except Exception as exc:
        return failure(exc)
    return None


def config_of(settings: Settings) -> batches.BatchConfig:
    """What the batch is built with, recorded in its manifest."""
    j = settings.judgment
    risk = risk_config(j)
    return batches.BatchConfig(
        budgets={**j.budgets, UNIFORM: j.uniform_budget}, default_budget=j.budget,
        holdout_share=j.holdout_share, double_judged_share=j.double_judged_share, salt=j.salt,
        configuration={
            "budget": j.budget, "uniform_budget": j.uniform_budget, "budgets": dict(j.budgets),
            "weights": {signal: risk.weight(signal) for signal in SIGNALS},
            "thresholds": {name: getattr(risk, name) for name in THRESHOLDS},
            "holdout_share": j.holdout_share, "double_judged_share": j.double_judged_share,
            "ragdrift": __version__,
            # Named only when on, so a batch of strata without versions records what it always did.
            **({"by_pipeline_version": True} if settings.windows.by_pipeline_version else {}),
        },
    )


def last_week(now: float) -> str:
    """The ISO week before the one holding `now`: the week a Monday batch covers."""
    return shift_week(iso_week(now), -1)


def running(week: str, now: float, partial: bool) -> bool:
    """Whether `week` is still running, which `partial` allows; refuse a week
    that does not exist or has not begun, and a running week without `partial`."""
    try:
        start, end = week_bounds(week)
    except (ValueError, OverflowError):
        raise WeekError(f"{week!r} is not an ISO week (YYYY-Www, weeks 01 to 52, or 53 in a long year)") from None
    if start > now:
        raise WeekError(f"{week} has not begun")
    if end > now and not partial:
        ends = datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%d %H:%M UTC")
        raise WeekError(f"{week} has not ended (it ends {ends}): build a partial batch of it with --partial")
    return end > now


def build(settings: Settings, queue: Queue, week: str, out: str | None = None, label_studio_files: bool = False,
          target: Target | None = None, partial: bool = False, now: float | None = None,
          deadline: Deadline | None = None) -> Built:
    """Build and record `week`'s batch (partial while it runs, if allowed),
    then push it to Label Studio if `target` is given.
    `WeekError` when the week cannot be built, `BatchExists` when it already
    has its batch, `NotPushed` when the batch is recorded but not pushed.
    `now` (default: the clock) decides which weeks have ended; the batch
    is recorded with the time it was built. Its requests share `deadline`
    (default: `judgment.batch_timeout_seconds` from now)."""
    deadline = deadline or Deadline(settings.judgment.batch_timeout_seconds)
    partial = running(week, time.time() if now is None else now, partial)
    group = settings.kafka.group_id
    if not partial and (existing := queue.batch_of(group, week)) is not None:
        raise BatchExists(existing)
    batch = batches.build(week, queue.week_candidates(group, week), config_of(settings))
    same = queue.batch(group, batch.batch_id)
    if same is not None and (partial or not same["partial"]):
        raise BatchExists(same)
    if same is not None:  # a partial batch of the same candidates: the same batch, now the week's
        queue.record_batch(group, week, batch.batch_id, time.time(), same["items"], same["directory"])
        built = Built(week=week, batch_id=batch.batch_id, directory=Path(same["directory"]), items=same["items"])
    else:
        built = _written(settings, queue, batch, out, label_studio_files or target is not None, partial, deadline)
    log.info("judgment batch built", extra={"week": week, "batch": built.batch_id, "items": built.items,
                                           "directory": str(built.directory), "partial": partial})
    if target is None:
        return built
    try:
        project = push(queue, group, built.batch_id, target, deadline)
    except (label_studio.LabelStudioError, batch_files.ExportError, StoreError) as exc:
        raise NotPushed(built, str(exc)) from None
    return Built(week=built.week, batch_id=built.batch_id, directory=built.directory, items=built.items, partial=partial, project=project)


def _written(settings: Settings, queue: Queue, batch: batches.Batch, out: str | None, label_studio_files: bool,
             partial: bool, deadline: Deadline) -> Built:
    """The batch's files, resolved, written and recorded."""
    r = settings.judgment.resolver
    texts = resolver.resolve(
        r.kind, [i["query"]["id"] for i in batch.items], [c["chunk_id"] for i in batch.items for c in i["chunks"]],
        path=r.path, command=r.command, url=r.url, timeout=r.timeout_seconds, deadline=deadline,
    )
    items = batch_files.blinded_items(batch, texts)
    extra = {}
    if label_studio_files:
        extra = {"label-studio/tasks.json": json.dumps(label_studio.tasks(items), ensure_ascii=False, indent=1) + "\n",
                 "label-studio/config.xml": label_studio.labeling_config(label_studio.TAGS)}
    root = Path(out or settings.judgment.export_dir).absolute()  # import and report run from anywhere
    recording = queue.recording(settings.kafka.group_id, batch.manifest["week"], batch.batch_id, time.time(), len(items),
                                str(root / batch.batch_id), partial)
    directory = batch_files.write(root, batch, items, extra, recording)
    return Built(week=batch.manifest["week"], batch_id=batch.batch_id, directory=directory, items=len(items), partial=partial)


def push(queue: Queue, group: str, batch_id: str, target: Target, deadline: Deadline) -> int:
    """Create a Label Studio project of a recorded batch's tasks (its
    label-studio/ files, else its items) and record it; the project's id.
    Its requests share `deadline`."""
    row = queue.batch(group, batch_id)
    if row is None:
        raise NoSuchBatch(f"{batch_id} is not a known batch")
    config, tasks = _tasks(Path(row["directory"]))
    client = label_studio.LabelStudio(target.url, label_studio.token_from(target.token_file, target.token_env),
                                      deadline=deadline)
    project = client.create_project(f"ragdrift {batch_id}", config)
    client.import_tasks(project, tasks)
    queue.record_project(group, batch_id, project, time.time())
    log.info("judgment batch pushed to Label Studio", extra={"batch": batch_id, "label_studio_project": project})
    return project


def _tasks(directory: Path) -> tuple[str, list[dict]]:
    """A batch's Label Studio configuration and tasks: its label-studio/ files,
    else made from its items (built without --format label-studio);
    `ExportError` naming a file that holds no tasks or items."""
    written = batch_files.read_label_studio(directory)
    try:
        if written is not None:
            file = directory / "label-studio" / "tasks.json"
            return written[0], label_studio.checked_tasks(written[1])
        file = directory / "items.jsonl"
        return label_studio.labeling_config(label_studio.TAGS), label_studio.tasks(batch_files.read_items(directory))
    except ValueError as exc:
        raise batch_files.ExportError(f"cannot push {file}: {exc}") from None


def weekly(settings: Settings, queue: Queue, now: float | None = None) -> Built | None:
    """The scheduled job: last week's batch, unless another replica holds the
    lock or the week already has its batch (a partial batch does not count)."""
    now = time.time() if now is None else now
    week = last_week(now)
    group = settings.kafka.group_id
    with locks.held(queue.store.engine, f"batch.{group}") as mine:
        if not mine:
            log.info("another replica builds this week's batch", extra={"week": week})
            return None
        if queue.batch_of(group, week) is not None:
            return None
        ls = settings.judgment.label_studio
        target = Target(ls.url, ls.token_file, ls.token_env) if ls.url else None
        return build(settings, queue, week, target=target, now=now)
