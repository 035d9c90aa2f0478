"""The drift days' io side: their tables, the day deltas added in each checkpoint, the stored
baselines, the findings of the stored days and of the replica's sub-day windows
(agent/io/background/drift.py).

It also holds the baseline every partition judges new terms, query clusters
and the judgment queue's risk signals against (`active`): the newest stored
one, switched to on the consumer loop, with its vocabulary and risk reference
shared by every partition (`shared`, by version), and found in the store by
version for a checkpoint that names one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from kafka import TopicPartition

from agent.core.drift import Baseline
from agent.core.drift.days import DriftDays, HeldDeltas, recent_windows
from agent.core.sampling.risk import reference_from
from agent.core.state import ActiveBaseline, PartitionState
from agent.io.background.drift import RECENT_SECONDS, DriftCollector, DriftWatch, log
from agent.io.features import FeatureAdapter, Wiring
from agent.io.settings.agent import Settings
from agent.io.settings.drift import drift_config
from agent.io.store import drift
from agent.io.store.damaged import Damaged, DamagedCollector
from agent.io.store.drift import DriftStore


def shared_from(baseline: Baseline) -> ActiveBaseline:
    """What every partition reads of a baseline that holds a query model: its vocabulary, and the
    thresholds and query-type mix of the judgment queue's risk signals."""
    assert baseline.queries is not None
    return ActiveBaseline(baseline.version, baseline.queries.vocabulary, reference_from(baseline))


class Drift(FeatureAdapter[HeldDeltas]):
    name = DriftDays.name
    tables = drift.TABLES

    @staticmethod
    def enabled(settings: Settings) -> bool:
        return settings.drift.enabled

    def __init__(self, wiring: Wiring):
        config = drift_config(wiring.settings.drift)
        assert config is not None  # built only when enabled
        self.config = config
        self.store = DriftStore(wiring.store, Damaged(log))
        self.split = wiring.settings.windows.by_pipeline_version  # counted and judged per pipeline version
        self.watch = DriftWatch(self.store, wiring.settings.kafka.group_id, scheduler=wiring.scheduler,
                                split=self.split)
        self.next_recent = 0.0  # when the sub-day windows are evaluated next (time.time())
        self.active: Baseline | None = None  # the baseline every partition judges against
        self.shared: dict[str, ActiveBaseline] = {}  # version -> its vocabulary, one object for every partition

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> DriftDays:
        return self.config.partition()  # only deltas are held: a restored partition starts with none

    def writes(self, group: str, held: Sequence[tuple[TopicPartition, HeldDeltas]]) -> list:
        return [self.store.writes(group, [deltas for _, deltas in held])]

    def collectors(self) -> list:
        return [DriftCollector(self.watch), DamagedCollector("drift", self.store.damaged, (self.store.days.name,))]

    def start(self) -> None:
        self.watch.start()

    def restore_context(self, data: dict[str, Any]) -> dict[str, Any]:
        """The shared vocabularies a checkpoint may name: the ones in use, and the one it names from the
        store. A stored document that does not read back counts as missing (the restore then says so);
        a store that cannot be read raises `StoreError`."""
        version = data.get("baseline") if isinstance(data, dict) else None
        if isinstance(version, str) and version not in self.shared:
            try:
                found = self.store.load_baseline(version=version)
            except ValueError:
                found = None
            if found is not None and found.queries is not None:
                self.shared[version] = shared_from(found)
        return {"baselines": self.shared}

    def attach(self, state: PartitionState) -> None:
        """Judge the state's new terms and query clusters against the active baseline."""
        active = self.active
        queries = None if active is None else active.queries
        state.supply(self.name, baseline=None if active is None or queries is None else self.shared[active.version])
        self.days(state).queries = queries

    def use(self, baseline: Baseline | None, states: Sequence[PartitionState]) -> None:
        """Judge every partition (`states`, and those attached later) against `baseline` from now on."""
        if baseline is not None and baseline.queries is not None and baseline.version not in self.shared:
            self.shared[baseline.version] = shared_from(baseline)
        self.active = baseline
        for state in states:
            self.attach(state)

    def publish(self, states: Sequence[PartitionState], now: float) -> None:
        """Every `RECENT_SECONDS`: switch the partitions to the newest stored baseline, and judge the
        replica's sub-day windows against it."""
        if now < self.next_recent:
            return
        watched, active = self.watch.baseline, self.active
        if (watched and watched.version) != (active and active.version):
            self.use(watched, states)
        if watched is not None:  # nothing to judge against otherwise
            self.watch.judge_recent(recent_windows([self.days(s) for s in states], now, self.split), watched)
        self.next_recent = now + RECENT_SECONDS

    def days(self, state: PartitionState) -> DriftDays:
        """The partition's drift days: its feature by this one's name."""
        return cast(DriftDays, state.features[self.name])
