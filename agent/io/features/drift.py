"""The drift days' io side: their tables, the day deltas added in each checkpoint, the stored
baselines, the findings of the stored days and of the replica's sub-day windows
(agent/io/background/drift.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from kafka import TopicPartition

from agent.core.drift import Baseline
from agent.core.drift.days import DriftDays, HeldDeltas, recent_windows
from agent.core.state import PartitionState
from agent.io.background.drift import RECENT_SECONDS, DriftCollector, DriftWatch
from agent.io.features import Baselines, Feature, Wiring
from agent.io.settings.agent import Settings
from agent.io.settings.drift import drift_config
from agent.io.store import drift
from agent.io.store.drift import DriftStore


class Drift(Feature[HeldDeltas]):
    name = DriftDays.name
    tables = drift.TABLES

    @staticmethod
    def enabled(settings: Settings) -> bool:
        return settings.drift.enabled

    def __init__(self, wiring: Wiring):
        config = drift_config(wiring.settings.drift)
        assert config is not None  # built only when enabled
        self.config = config
        self.store = DriftStore(wiring.store)
        self.watch = DriftWatch(self.store, wiring.settings.kafka.group_id, scheduler=wiring.scheduler)
        self.next_recent = 0.0  # when the sub-day windows are evaluated next (time.time())

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> DriftDays:
        return self.config.partition()  # only deltas are held: a restored partition starts with none

    def writes(self, group: str, held: Sequence[tuple[TopicPartition, HeldDeltas]]) -> list:
        return [self.store.writes(group, [deltas for _, deltas in held])]

    def collectors(self) -> list:
        return [DriftCollector(self.watch)]

    def start(self) -> None:
        self.watch.start()

    def share(self, state: PartitionState, baseline: Baseline | None) -> None:
        self.days(state).queries = None if baseline is None else baseline.queries

    def baseline(self, version: str) -> Baseline | None:
        try:
            return self.store.load_baseline(version=version)
        except ValueError:  # a stored document that does not read back: the state's restore says it is missing
            return None

    def publish(self, states: Sequence[PartitionState], now: float, baselines: Baselines) -> None:
        """Every `RECENT_SECONDS`: switch the partitions to the newest stored baseline, and judge the
        replica's sub-day windows against it."""
        if now < self.next_recent:
            return
        watched, active = self.watch.baseline, baselines.active
        if (watched and watched.version) != (active and active.version):
            baselines.use_baseline(watched)
        if watched is not None:  # nothing to judge against otherwise
            self.watch.judge_recent(recent_windows([self.days(s) for s in states], now))
        self.next_recent = now + RECENT_SECONDS

    def days(self, state: PartitionState) -> DriftDays:
        """The partition's drift days: its feature by this one's name."""
        return cast(DriftDays, state.features[self.name])
