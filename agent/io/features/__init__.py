"""Every feature on the io side: one object owning what the feature needs outside the core.

A feature (`Feature` here) declares its store tables (`tables`, from its
repositories: the agent creates every feature's, the commands open the ones
they read), builds each partition's core feature (`partition`: fresh, or
rebuilt from its rows on a restore), turns what a checkpoint takes from the
partitions into rows written in the checkpoint's transaction (`writes`),
forgets a partition's rows when its topic was recreated (`forget`), renders
its collectors, schedules its periodic refreshes on the agent's one scheduler
and reads its own section of the settings. The agent (agent/service.py,
agent/runner.py, agent/ownership.py) knows features only through this class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from apscheduler.schedulers.background import BackgroundScheduler
from kafka import TopicPartition
from prometheus_client.registry import Collector
from sqlalchemy import MetaData, Table

from agent.core.drift import Baseline
from agent.core.feature import Feature as PartitionFeature
from agent.core.feature import Pending
from agent.core.state import PartitionState
from agent.io.background.judgment import Weekly
from agent.io.settings.agent import Settings
from agent.io.store.database import Store


@dataclass(frozen=True)
class Wiring:
    """What every feature is built from."""

    settings: Settings
    store: Store  # opened with every feature's tables
    scheduler: BackgroundScheduler  # the agent's one background scheduler, started after the features are built
    weekly: Weekly | None = None  # the weekly judgment batch: a job (agent/jobs), which io may not import


class Baselines(Protocol):
    """The baseline every partition judges new terms against (agent/ownership.py), as a feature switches it."""

    active: Baseline | None

    def use_baseline(self, baseline: Baseline | None) -> None: ...


P = TypeVar("P", bound=Pending)  # its partition feature's outbox slot


class Feature(Generic[P]):
    """A feature's io side; a subclass overrides the hooks it needs, the others do nothing."""

    name: ClassVar[str]  # its partition feature's name (its outbox slot), or its own when it has none
    tables: ClassVar[tuple[Callable[[MetaData], Table], ...]] = ()

    def __init__(self, wiring: Wiring) -> None:
        """Built by `built` when `enabled`."""

    @staticmethod
    def enabled(settings: Settings) -> bool:
        raise NotImplementedError

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> PartitionFeature[P] | None:
        """The partition's core feature, fresh or (`restore`) rebuilt from its rows; None: it has none."""
        return None

    def writes(self, group: str, held: Sequence[tuple[TopicPartition, P]]) -> list[Any]:
        """Rows joined to the checkpoint of these partitions (`Store.save`'s `joined`), from their outbox slots."""
        return []

    def forget(self, group: str, tp: TopicPartition) -> list:
        """Rows to delete with the checkpoint of a partition started afresh (`Store.reset`'s `joined`)."""
        return []

    def collectors(self) -> list[Collector]:
        return []

    def start(self) -> None:
        """Its first reads, once the scheduler runs."""

    def prepare(self, state: PartitionState) -> None:
        """Before a partition's records of a poll are processed."""

    def share(self, state: PartitionState, baseline: Baseline | None) -> None:
        """The baseline every partition judges against is now `baseline`."""

    def baseline(self, version: str) -> Baseline | None:
        """A stored baseline by version, for a checkpoint that names it; None: not this feature's to find."""
        return None

    def publish(self, states: Sequence[PartitionState], now: float, baselines: Baselines) -> None:
        """After the agent published a snapshot of `states` (on the consumer loop)."""


def tables_of(features: Sequence[type[Feature[Any]]]) -> tuple[Callable[[MetaData], Table], ...]:
    return tuple(table for feature in features for table in feature.tables)


def built(features: Sequence[type[Feature[Any]]], wiring: Wiring) -> list[Feature[Any]]:
    """The features the settings enable, in their order."""
    return [feature(wiring) for feature in features if feature.enabled(wiring.settings)]

