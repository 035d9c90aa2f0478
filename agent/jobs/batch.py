"""Build a week's judgment batch: now, on demand, or weekly, once for all replicas.

Reads every replica's candidates of the week from the store, takes the
sample one agent would take (agent/core/batch.py), asks the resolver for
text, writes the files under the export directory and, when asked, creates
a Label Studio project with the batch's tasks. The weekly job runs under a
lock every replica respects and skips a week that already has its batch.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from agent import __version__
from agent.core import batch as batches
from agent.core.sampling import SIGNALS, UNIFORM, iso_week, shift_week
from agent.io import export, label_studio, locks, resolver
from agent.io.queue import Queue
from agent.io.judgment_settings import THRESHOLDS, risk_config
from agent.io.settings import Settings

log = logging.getLogger("ragdrift.batch")


@dataclass(frozen=True)
class Built:
    week: str
    batch_id: str
    directory: Path
    items: int
    project: int | None = None  # the Label Studio project, when one was created


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
        },
    )


def last_week(now: float) -> str:
    """The ISO week before the one holding `now`: the week a Monday batch covers."""
    return shift_week(iso_week(now), -1)


def build(settings: Settings, queue: Queue, week: str, out: str | None = None, label_studio_files: bool = False,
          label_studio_url: str | None = None, token: str | None = None) -> Built:
    """Build `week`'s batch now, and record it as the week's batch if it is the first."""
    j = settings.judgment
    group = settings.kafka.group_id
    batch = batches.build(week, queue.week_candidates(group, week), config_of(settings))
    r = j.resolver
    texts = resolver.resolve(
        r.kind, [i["query"]["id"] for i in batch.items], [c["chunk_id"] for i in batch.items for c in i["chunks"]],
        path=r.path, command=r.command, url=r.url, timeout=r.timeout_seconds,
    )
    items = export.blinded_items(batch, texts)
    extra = {}
    config = label_studio.labeling_config(label_studio.TAGS)
    tasks = label_studio.tasks(items)
    if label_studio_files or label_studio_url:
        extra = {"label-studio/tasks.json": json.dumps(tasks, ensure_ascii=False, indent=1) + "\n",
                 "label-studio/config.xml": config}
    directory = export.write(out or j.export_dir, batch, items, extra)
    project = None
    if label_studio_url:
        client = label_studio.LabelStudio(label_studio_url, token)
        project = client.create_project(f"ragdrift {batch.batch_id}", config)
        client.import_tasks(project, tasks)
    queue.record_batch(group, week, batch.batch_id, time.time(), len(items), str(directory))
    log.info("judgment batch built", extra={"week": week, "batch": batch.batch_id, "items": len(items),
                                           "directory": str(directory), "label_studio_project": project})
    return Built(week, batch.batch_id, directory, len(items), project)


def weekly(settings: Settings, queue: Queue, now: float | None = None) -> Built | None:
    """The scheduled job: last week's batch, unless another replica holds the
    lock or the week already has its batch."""
    week = last_week(time.time() if now is None else now)
    group = settings.kafka.group_id
    with locks.held(queue.store.engine, f"batch.{group}") as mine:
        if not mine:
            log.info("another replica builds this week's batch", extra={"week": week})
            return None
        if queue.batch_of(group, week) is not None:
            return None
        ls = settings.judgment.label_studio
        token = label_studio.token_from(ls.token_file, ls.token_env) if ls.url else None
        return build(settings, queue, week, label_studio_url=ls.url, token=token)
