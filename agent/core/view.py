"""What every metric family gets for one event: its facts and the partition's context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from agent.core.config import CoreConfig
from agent.core.facts import Facts
from agent.core.labels import LabelSet
from agent.core.tally import Family, Histogram, HistogramKeys, Key

if TYPE_CHECKING:  # calibrated.py reads a View
    from agent.core.calibrated import Active


@dataclass(frozen=True, eq=False)
class Table:
    """A family's keys by the raw value of one label dimension: `make(app, label)`
    builds what an observer needs for one bounded label value (a key, or keys).
    A family without an app label has one table for all apps (`by_app=False`,
    `make` then gets None for the app)."""

    dimension: str
    make: Callable[[Any, str], Any]  # the app: a str, or None when by_app is False
    by_app: bool = True


class Labelled(dict[str, Any]):
    """A `Table` for one app: raw value -> what `make` built for its label.

    Only values the label set keeps as themselves are remembered, so the table
    is bounded as the set is; a value folded into `other` is labelled again
    each time. A known value then costs one dict lookup: no label call and no
    key tuple built per update."""

    __slots__ = ("app", "labels", "make")

    def __init__(self, app: str | None, labels: LabelSet, make: Callable[[Any, str], Any]):
        super().__init__()
        self.app = app
        self.labels = labels
        self.make = make

    def __missing__(self, value: str) -> Any:
        label = self.labels(value)
        built = self.make(self.app, label)
        if label == value:
            self[value] = built
        return built


class Keys(dict[Any, Any]):
    """The keys of every family for one app, built on first use: family -> its
    key (a counter) or its `HistogramKeys` (a histogram), and `Table` -> its `Labelled`.
    The state holds one per bounded app label, so their number is bounded too;
    the tables of families without an app label are shared by all (`shared`)."""

    __slots__ = ("app", "config", "labels", "shared")

    def __init__(self, app: str, config: CoreConfig, labels: dict[str, LabelSet], shared: dict[Table, Labelled]):
        super().__init__()
        self.app = app
        self.config = config
        self.labels = labels
        self.shared = shared

    def __missing__(self, family: Family | Table) -> Key | HistogramKeys | Labelled:
        app = self.app
        keys: Key | HistogramKeys | Labelled | None
        if isinstance(family, Table):
            if family.by_app:
                keys = self[family] = Labelled(app, self.labels[family.dimension], family.make)
            else:
                keys = self.shared.get(family)
                if keys is None:
                    keys = self.shared[family] = Labelled(None, self.labels[family.dimension], family.make)
                self[family] = keys
        elif isinstance(family, Histogram):
            keys = self[family] = family.keys(app, self.config.buckets_for(family.buckets, app))
        else:
            keys = self[family] = family.key(app)
        return keys


@dataclass(slots=True)
class View:
    """The state keeps one per app label and refills it for each event (three
    stores instead of building one): observers read it and never keep it."""

    keys: Keys  # the app's family keys (and its bounded label, `keys.app`)
    facts: Facts = cast("Facts", None)  # noqa: RUF009 - None until the state sets it, before any observer reads it
    new_terms: int = 0  # query terms new to the vocabulary in use (the baseline's once one is active)
    calibrations: Active | None = None  # the score calibrations in force (agent/core/calibrated.py)
