"""What every metric family gets for one event: its facts and the partition's context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, cast

from agent.core.config import CoreConfig
from agent.core.facts import Facts
from agent.core.labels import LabelSet
from agent.core.tally import Family, Histogram, HistogramKeys, Key

if TYPE_CHECKING:  # calibrated.py reads a View
    from agent.core.calibrated import Active


@dataclass(frozen=True, eq=False)
class Table:
    """A family's keys by the raw value of one label dimension: `make(*lead, label)`
    builds what an observer needs for one bounded label value (a key, or keys),
    after the view's leading label values (`Keys.lead`). A family without an
    app label has one table for all views (`by_app=False`, `make` then gets the
    label alone). Without a dimension, the values are a few the code names
    (feedback signals, say), which need no label set to bound them."""

    dimension: str | None
    make: Callable[..., Any]
    by_app: bool = True


class Labelled(dict[str, Any]):
    """A `Table` for one view: raw value -> what `make` built for its label.

    Only values the label set keeps as themselves are remembered, so the table
    is bounded as the set is; a value folded into `other` is labelled again
    each time. A known value then costs one dict lookup: no label call and no
    key tuple built per update."""

    __slots__ = ("labels", "lead", "make")

    def __init__(self, lead: tuple[str, ...], labels: LabelSet | None, make: Callable[..., Any]):
        super().__init__()
        self.lead = lead
        self.labels = labels  # None: the values are the code's own
        self.make = make

    def __missing__(self, value: str) -> Any:
        label = value if self.labels is None else self.labels(value)
        built = self.make(*self.lead, label)
        if label == value:
            self[value] = built
        return built


class Keys(dict[Any, Any]):
    """The keys of every family for one view, built on first use: family -> its
    key (a counter) or its `HistogramKeys` (a histogram), and `Table` -> its `Labelled`.

    A family with an app label leads its keys with the view's `lead`: the app
    label, then the pipeline version label when the families are split by it
    (agent/core/metrics.py). The state holds one per bounded lead, so their
    number is bounded too; the tables of families without an app label are
    shared by all (`shared`)."""

    __slots__ = ("app", "config", "labels", "lead", "shared")

    def __init__(self, lead: tuple[str, ...], config: CoreConfig, labels: dict[str, LabelSet], *,
                 shared: dict[Table, Labelled]):
        super().__init__()
        self.app = lead[0]
        self.lead = lead
        self.config = config
        self.labels = labels
        self.shared = shared

    def __missing__(self, family: Family | Table) -> Key | HistogramKeys | Labelled:
        lead = self.lead
        keys: Key | HistogramKeys | Labelled | None
        if isinstance(family, Table):
            labels = None if family.dimension is None else self.labels[family.dimension]
            if family.by_app:
                keys = self[family] = Labelled(lead, labels, family.make)
            else:
                keys = self.shared.get(family)
                if keys is None:
                    keys = self.shared[family] = Labelled((), labels, family.make)
                self[family] = keys
        elif isinstance(family, Histogram):
            keys = self[family] = family.keys(lead, self.config.buckets_for(family.buckets, self.app))
        else:
            keys = self[family] = family.key(*lead)
        return keys


@dataclass(slots=True)
class View:
    """The state keeps one per app label (and pipeline version label, when split)
    and refills it for each event (three stores instead of building one):
    observers read it and never keep it."""

    keys: Keys  # its family keys (and its bounded labels, `keys.lead`)
    facts: Facts = cast("Facts", None)  # noqa: RUF009 - None until the state sets it, before any observer reads it
    _: KW_ONLY
    new_terms: int = 0  # query terms new to the vocabulary in use (the baseline's once one is active)
    calibrations: Active | None = None  # the score calibrations in force (agent/core/calibrated.py)
