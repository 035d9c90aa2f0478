"""What every metric family gets for one event: its facts and the partition's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.core.config import CoreConfig
from agent.core.facts import Facts
from agent.core.labels import LabelSet
from agent.core.tally import Bins, Family, Histogram, Key

if TYPE_CHECKING:  # calibrated.py reads a View
    from agent.core.calibrated import Active


class Keys(dict):
    """The keys of every app-labelled family for one app, built on first use:
    family -> its key (a counter) or its `Bins` (a histogram). The state holds
    one per bounded app label, so their number is bounded too."""

    __slots__ = ("app", "config")

    def __init__(self, app: str, config: CoreConfig):
        super().__init__()
        self.app = app
        self.config = config

    def __missing__(self, family: Family) -> Key | Bins:
        app = self.app
        if isinstance(family, Histogram):
            keys = self[family] = family.keys(app, self.config.buckets_for(family.buckets, app))
        else:
            keys = self[family] = family.key(app)
        return keys


@dataclass(slots=True)
class View:
    facts: Facts
    app: str  # bounded app label
    keys: Keys  # the app's family keys
    config: CoreConfig
    labels: dict[str, LabelSet]
    new_terms: int  # query terms new to the vocabulary in use (the baseline's once one is active)
    calibrations: Active | None = None  # the score calibrations in force (agent/core/calibrated.py)
