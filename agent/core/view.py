"""What every metric family gets for one event: its facts and the partition's context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.core.config import CoreConfig
from agent.core.facts import Facts
from agent.core.labels import LabelSet

if TYPE_CHECKING:  # calibrated.py reads a View
    from agent.core.calibrated import Active


@dataclass(slots=True)
class View:
    facts: Facts
    app: str  # bounded app label
    config: CoreConfig
    labels: dict[str, LabelSet]
    new_terms: int  # query terms new to the vocabulary in use (the baseline's once one is active)
    calibrations: Active | None = None  # the score calibrations in force (agent/core/calibrated.py)
