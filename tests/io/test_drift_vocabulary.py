"""Every partition judges new terms and query clusters against the active baseline's one vocabulary,
and a restored partition finds the vocabulary its checkpoint names in the store (agent/ownership.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent.core.config import CoreConfig
from agent.core.drift import freeze
from agent.core.drift.days import DriftConfig
from agent.core.state import PartitionState
from agent.io.store.drift import TABLES, DriftStore
from agent.io.settings.agent import KafkaSettings
from agent.io.store.database import Store
from agent.ownership import Ownership
from agent.synth import ScheduledIncident, generate
from tests.generated_days import DAY0, generated_days



@pytest.fixture
def drift(url):
    with Store(url, None, TABLES) as store:
        yield DriftStore(store)


def ownership(drift: DriftStore) -> Ownership:
    """The partitions' side of Ownership only: no broker is touched by what is tested here."""
    return Ownership(KafkaSettings(), CoreConfig(), drift.store, None, None, None, None, drift=DriftConfig(),
                     drift_store=drift)


def test_partitions_share_the_active_baseline_and_a_restore_loads_it_by_version(drift):
    days = generated_days(7, 400)
    baseline = freeze(days, "vocab")
    drift.save_baseline(baseline)
    parts = ownership(drift)
    before = parts._state()
    assert before.baseline is None and before.drift.queries is None  # no baseline yet: its own vocabulary
    parts.use_baseline(baseline)
    first, second = parts._state(), parts._state()
    assert first.baseline is second.baseline and first.baseline.version == baseline.version
    assert first.drift.queries == baseline.queries
    # the same answer on every partition: a term of the baseline is known, a new one is new to both
    lines = list(generate(200, seed=99, start=DAY0 + timedelta(days=8), rate=1.0, incidents=[ScheduledIncident("new-terms", 0)]))
    for line in lines[:100]:
        first.process(line)
    for line in lines[100:]:
        second.process(line)
    assert first.vocabulary.to_dict() == PartitionState(CoreConfig()).vocabulary.to_dict()  # its own: untouched
    data = first.to_dict()
    assert data["baseline"] == baseline.version
    restored = PartitionState.from_dict(CoreConfig(), data, baselines=ownership(drift)._vocabularies(data),
                                        drift=DriftConfig())
    assert restored.baseline.version == baseline.version
    assert restored.baseline.vocabulary.to_dict() == baseline.queries.vocabulary.to_dict()
