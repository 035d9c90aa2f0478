"""The metric families as a partition feature: each event into its window bucket, through every family.

The first feature of every state, always on; the others read the watermark
it leaves in the context. Its windows are its section of the checkpointed
state ("windows"), sealed buckets apart (agent/core/windows.py). What `take`
returns is what the events since the last call added, which the agent sums
into the process's counters after every poll (agent/runner.py); so nothing
is left for a checkpoint's outbox, whose slot (`Counted`) holds nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.core.config import CoreConfig
from agent.core.facts import Facts
from agent.core.families import OBSERVERS, UNKNOWN_FIELDS
from agent.core.feature import Context
from agent.core.labels import LabelSet
from agent.core.tally import Tally, inc
from agent.core.view import Keys, Labelled, Table, View
from agent.core.windows import Windows


class Counted:
    """The metric families' outbox slot: empty, their checkpointed part being the state itself."""

    __slots__ = ()

    def absorb(self, taken: Tally) -> None:
        """Taken after every poll for the process's counters already: nothing is left at a checkpoint."""

    def clear(self) -> None:
        pass


class MetricFamilies:
    __slots__ = ("config", "labels", "shared", "views", "windows")
    name = "windows"

    def __init__(self, config: CoreConfig, labels: dict[str, LabelSet]) -> None:
        self.config = config
        self.labels = labels  # the state's bounded label sets
        self.windows = Windows(config)
        self.views: dict[str, View] = {}  # per app label, with its family keys: derived, never checkpointed
        self.shared: dict[Table, Labelled] = {}  # key tables of families without an app label, for every view

    def observe(self, facts: Facts, ctx: Context) -> None:
        windows = self.windows
        target, bookkeeping = windows.slot(facts.ts, ctx.now)
        if bookkeeping:
            target[(bookkeeping,)] = target.get((bookkeeping,), 0) + 1
        ctx.watermark = windows.watermark
        app = ctx.app
        view = self.views.get(app)
        if view is None:
            view = self.views[app] = View(Keys(app, self.config, self.labels, self.shared))
        view.facts, view.new_terms, view.calibrations = facts, ctx.new_terms, ctx.calibrations
        for observe in OBSERVERS:
            observe(view, target)
        if ctx.unknown_fields:
            inc(target, UNKNOWN_FIELDS.key(), ctx.unknown_fields)

    def take(self) -> Tally:
        """What the events since the last call added (`Windows.take_added`)."""
        return self.windows.take_added()

    def outbox(self) -> Counted:
        return Counted()

    def flush_due(self, held: Counted) -> bool:
        return False

    def to_dict(self, sealed_elsewhere: bool = False) -> dict[str, Any]:
        return self.windows.to_dict(sealed_elsewhere)

    def restore(self, section: dict[str, Any] | None, sealed: Sequence[Sequence[Any]]) -> None:
        if section is None:
            raise KeyError(self.name)  # every state has its windows
        self.windows = Windows.from_dict(self.config, section, sealed)
