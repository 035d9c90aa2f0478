"""What every metric family gets for one event: its facts and the partition's context."""

from __future__ import annotations

from dataclasses import dataclass

from agent.core.config import CoreConfig
from agent.core.facts import Facts
from agent.core.labels import LabelSet
from agent.core.vocabulary import Vocabulary


@dataclass(slots=True)
class View:
    facts: Facts
    app: str  # bounded app label
    config: CoreConfig
    labels: dict[str, LabelSet]
    vocabulary: Vocabulary
