"""Every feature on the io side: one object owning what the feature needs outside the core.

A feature's io side (`FeatureAdapter` here) declares its store tables (`tables`, from its
repositories: the agent creates every feature's, the commands open the ones
they read), builds each partition's core feature (`partition`: fresh, or
rebuilt from its rows on a restore), turns what a checkpoint takes from the
partitions into rows written in the checkpoint's transaction (`writes`),
forgets a partition's rows when its topic was recreated (`forget`), gives
what a checkpoint's restore needs (`restore_context`), sets up each new or
restored state (`attach`), renders its collectors, schedules its periodic
refreshes on the agent's one scheduler and reads its own section of the
settings. What a feature reads from another is declared (`needs`), and
`warnings` names, at start and in `ragdrift check-config`, what a
configuration loses when that other one is off. The agent
(agent/service.py, agent/runner.py, agent/ownership.py) knows features only
through this class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from apscheduler.schedulers.background import BackgroundScheduler
from kafka import TopicPartition
from prometheus_client.registry import Collector
from sqlalchemy import MetaData, Table

from agent.core.feature import PartitionFeature, Pending
from agent.core.state import PartitionState
from agent.io.settings.agent import Settings
from agent.io.store.database import Store


@dataclass(frozen=True)
class Wiring:
    """What every feature is built from."""

    settings: Settings
    store: Store  # opened with every feature's tables
    scheduler: BackgroundScheduler  # the agent's one background scheduler, started after the features are built
    _: KW_ONLY
    # Jobs (agent/jobs), which io may not import, by the name the feature that runs one looks it up by.
    jobs: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


P = TypeVar("P", bound=Pending)  # its partition feature's outbox holder


class FeatureAdapter(Generic[P]):
    """A feature's io side; a subclass overrides the hooks it needs, the others do nothing."""

    name: ClassVar[str]  # its partition feature's name (its outbox holder), or its own when it has none
    tables: ClassVar[tuple[Callable[[MetaData], Table], ...]] = ()
    # The features it reads from, by name, each with what it loses while that one is off.
    needs: ClassVar[Mapping[str, str]] = {}

    def __init__(self, wiring: Wiring) -> None:
        """Built by `built` when `enabled`."""

    @staticmethod
    def enabled(settings: Settings) -> bool:
        raise NotImplementedError

    @staticmethod
    def settings_warnings(settings: Settings) -> list[str]:
        """What is wrong with its own settings without being an error (it is on)."""
        return []

    def partition(self, group: str, tp: TopicPartition, restore: bool) -> PartitionFeature[P] | None:
        """The partition's core feature, fresh or (`restore`) rebuilt from its rows; None: it has none."""
        return None

    def writes(self, group: str, held: Sequence[tuple[TopicPartition, P]]) -> list[Any]:
        """Rows joined to the checkpoint of these partitions (`Store.save`'s `joined`), from their outbox holders
        (never empty: called only for a feature with a partition part)."""
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

    def restore_context(self, data: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments `PartitionState.from_dict` needs for this checkpointed state (`data`, not yet
        upgraded); `StoreError` when the store cannot be read (the agent then stops, and restarts)."""
        return {}

    def attach(self, state: PartitionState) -> None:
        """Set up a partition's state, new or restored, before its first event."""

    def publish(self, states: Sequence[PartitionState], now: float) -> None:
        """After the agent published a snapshot of `states`, every partition it owns (on the consumer loop)."""


def tables_of(features: Sequence[type[FeatureAdapter[Any]]]) -> tuple[Callable[[MetaData], Table], ...]:
    return tuple(table for feature in features for table in feature.tables)


def built(features: Sequence[type[FeatureAdapter[Any]]], wiring: Wiring) -> list[FeatureAdapter[Any]]:
    """The features the settings enable, in their order; two of one name, or a need naming no feature,
    raise ValueError."""
    names = [feature.name for feature in features]
    if len(set(names)) != len(names):
        raise ValueError(f"two features of one name: {names}")
    unknown = sorted({need for feature in features for need in feature.needs} - set(names))
    if unknown:
        raise ValueError(f"features needed but not known: {unknown}")
    return [feature(wiring) for feature in features if feature.enabled(wiring.settings)]


def warnings(features: Sequence[type[FeatureAdapter[Any]]], settings: Settings) -> list[str]:
    """What the enabled features lose under these settings: their own settings' warnings, and each
    feature they need that is off. Not errors: the agent runs, and says so at start and in check-config."""
    on = {feature.name for feature in features if feature.enabled(settings)}
    out = []
    for feature in features:
        if feature.name in on:
            out += feature.settings_warnings(settings)
            out += [f"{feature.name}: {need} is off: {lost}" for need, lost in feature.needs.items() if need not in on]
    return out

