"""The live release gate's io side: its tables, the rows added in each checkpoint, and the periodic
evaluation of the stored rows with its collector (agent/io/background/live_gate.py)."""

from __future__ import annotations

from collections.abc import Sequence

from kafka import TopicPartition

from agent.core.compare.live import HeldRows, VersionCounts
from agent.io.background.live_gate import LiveGateCollector, LiveGateWatch, log
from agent.io.features import FeatureAdapter, Wiring
from agent.io.settings.agent import Settings
from agent.io.settings.live_gate import live_config, thresholds
from agent.io.store import live_gate
from agent.io.store.damaged import Damaged, DamagedCollector
from agent.io.store.live_gate import LiveGateStore


class LiveGate(FeatureAdapter[HeldRows]):
    name = VersionCounts.name
    tables = live_gate.TABLES

    @staticmethod
    def enabled(settings: Settings) -> bool:
        return settings.live_gate.enabled

    def __init__(self, wiring: Wiring):
        section = wiring.settings.live_gate
        self.config = live_config(section)
        self.rows = LiveGateStore(wiring.store, examples=section.examples, retention_days=section.retention_days,
                                  damaged=Damaged(log))
        versions = (section.stable, section.candidate) if section.stable else None
        self.watch = LiveGateWatch(self.rows, wiring.settings.kafka.group_id, thresholds(section),
                                   window_days=section.window_days, versions=versions,
                                   refresh_seconds=section.refresh_seconds,
                                   top_n=wiring.settings.metrics.top_n, scheduler=wiring.scheduler)

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> VersionCounts:
        return self.config.partition()  # only deltas are held: a restored partition starts with none

    def writes(self, group: str, held: Sequence[tuple[TopicPartition, HeldRows]]) -> list:
        return [self.rows.writes(group, [rows for _, rows in held])]

    def collectors(self) -> list:
        tables = (self.rows.days.name, self.rows.queries.name)
        return [LiveGateCollector(self.watch), DamagedCollector("live_gate", self.rows.damaged, tables)]

    def start(self) -> None:
        self.watch.start()
