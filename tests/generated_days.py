"""Daily drift counts of generated traffic, through the core's own path
(PartitionState, DriftDays): what the agent stores for each UTC day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig, counts_of
from agent.core.state import PartitionState
from agent.synth import generate

DAY0 = datetime(2026, 3, 2, tzinfo=UTC)


def day_counts(day: int, per_day: int, seed: int) -> dict:
    """Day `day` after DAY0: `per_day` events of the generator's stream `seed`, spread over the day."""
    state = PartitionState(CoreConfig(), drift=DriftConfig())
    for line in generate(per_day, seed=seed, start=DAY0 + timedelta(days=day), rate=per_day / 86400):
        state.process(line)
    return counts_of(state.feature("drift").take())


def generated_days(days: int, per_day: int, seed: int = 0) -> dict:
    """Days 0 .. days - 1, day d from stream seed + d."""
    out: dict = {}
    for d in range(days):
        out.update(day_counts(d, per_day, seed + d))
    return out
