"""The judgment queue's io side: its queue and label tables, its candidate and incident rows
in each checkpoint, its figures and the weekly batch (agent/io/background/judgment.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from kafka import TopicPartition

from agent.core.judgment import JudgmentIntake, QueueRows
from agent.io.background.judgment import WEEKLY, JudgmentCollector, JudgmentJobs
from agent.io.features import FeatureAdapter, Wiring
from agent.io.features.drift import Drift
from agent.io.settings.agent import Settings
from agent.io.settings.judgment import judgment_config, unsalted
from agent.io.store import qrels, queue
from agent.io.store.qrels import Qrels
from agent.io.store.queue import Queue


class Judgment(FeatureAdapter[QueueRows]):
    name = JudgmentIntake.name
    tables = (*queue.TABLES, *qrels.TABLES)
    needs: ClassVar[Mapping[str, str]] = {
        Drift.name: "the risk signals new_terms and rare_slice never fire: they read its frozen baseline"}

    @staticmethod
    def enabled(settings: Settings) -> bool:
        return settings.judgment.enabled

    @staticmethod
    def settings_warnings(settings: Settings) -> list[str]:
        warning = unsalted(settings.judgment)
        return [warning] if warning else []

    def __init__(self, wiring: Wiring):
        settings = wiring.settings
        config = judgment_config(settings.judgment)
        assert config is not None  # built only when enabled
        self.config = config
        self.settings = settings
        self.queue = Queue(wiring.store)
        self.jobs = JudgmentJobs(settings, self.queue, Qrels(wiring.store), top_n=settings.metrics.top_n,
                                 scheduler=wiring.scheduler, weekly=wiring.jobs.get(WEEKLY))

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> JudgmentIntake:
        """A restored partition offers its stored candidates back to a fresh sampler (agent/core/judgment.py)."""
        weeks = self.config.budgets.keep_weeks + 1
        return self.config.partition(self.queue.partition_candidates(group, tp.topic, tp.partition, weeks)
                                     if restore else ())

    def writes(self, group: str, held: Sequence[tuple[TopicPartition, QueueRows]]) -> list:
        return [self.queue.writes(group, tp.topic, tp.partition, rows.added.values(), rows.evicted, rows.incidents)
                for tp, rows in held]

    def forget(self, group: str, tp: TopicPartition) -> list:
        """Its sampler's rows (incidents stay: they happened)."""
        return [self.queue.forget(group, tp.topic, tp.partition)]

    def collectors(self) -> list:
        return [JudgmentCollector(self.jobs)]

    def start(self) -> None:
        self.jobs.start()
