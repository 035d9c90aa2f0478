"""What every metric family gets for one event: the event plus shared derivations."""

from __future__ import annotations

from dataclasses import dataclass

from agent.core.config import CoreConfig
from agent.core.model import Event, Result
from agent.core.labels import LabelSet
from agent.core.vocabulary import Vocabulary


@dataclass(slots=True)
class View:
    event: Event
    ts: float  # event time, epoch seconds
    app: str  # bounded app label
    admitted: list[Result]  # the admitted set A, in rank order
    config: CoreConfig
    labels: dict[str, LabelSet]
    vocabulary: Vocabulary


def admitted_set(event: Event) -> list[Result]:
    """A: results with `packed` true, by default those with `rank <= cutoff_k`."""
    k = event.cutoff_k
    return [r for r in event.results if (r.rank <= k if r.packed is None else r.packed)]
