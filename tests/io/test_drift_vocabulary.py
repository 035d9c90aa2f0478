"""Every partition judges new terms and query clusters against the active baseline's one vocabulary,
and a restored partition finds the vocabulary its checkpoint names in the store (the drift feature's
hooks, through agent/ownership.py)."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from kafka import TopicPartition

from agent.core.config import CoreConfig
from agent.core.drift import freeze
from agent.core.drift.days import DriftConfig
from agent.core.judgment import JudgmentConfig
from agent.core.sampling import RARE_SLICE
from agent.core.sampling.risk import reference_from
from agent.core.state import PartitionState
from agent.io.background.periodic import new_scheduler
from agent.io.features import Wiring
from agent.io.features.drift import Drift
from agent.io.settings.agent import Settings
from agent.io.store.database import Store
from agent.io.store.drift import TABLES, DriftStore
from agent.ownership import Ownership
from agent.synth import ScheduledIncident, generate
from tests.generated_days import DAY0, generated_days


@pytest.fixture
def drift(url):
    with Store(url, None, TABLES) as store:
        yield DriftStore(store)


TP = TopicPartition("t", 0)


def ownership(drift: DriftStore) -> tuple[Ownership, Drift]:
    """The partitions' side of Ownership only: no broker is touched by what is tested here."""
    settings = Settings()  # drift on
    feature = Drift(Wiring(settings, drift.store, new_scheduler()))
    return Ownership(settings=settings, store=drift.store, consumer=None, letters=None, tracer=None, budget=None,
                     features=[feature]), feature


def test_partitions_share_the_active_baseline_and_a_restore_loads_it_by_version(drift):
    days = generated_days(7, 400)
    baseline = freeze(days, "vocab")
    drift.save_baseline(baseline)
    parts, feature = ownership(drift)
    before = parts._state(TP)
    assert before.context.baseline is None and before.feature("drift").queries is None  # no baseline yet: its own vocabulary
    feature.use(baseline, [before])
    assert before.context.baseline.version == baseline.version  # a partition owned already switches too
    first, second = parts._state(TP), parts._state(TP)
    assert first.context.baseline is second.context.baseline and first.context.baseline.version == baseline.version
    assert first.feature("drift").queries == baseline.queries
    # the same answer on every partition: a term of the baseline is known, a new one is new to both
    lines = list(generate(200, seed=99, start=DAY0 + timedelta(days=8), rate=1.0, incidents=[ScheduledIncident("new-terms", 0)]))
    for line in lines[:100]:
        first.process(line)
    for line in lines[100:]:
        second.process(line)
    assert first.vocabulary.to_dict() == PartitionState(CoreConfig()).vocabulary.to_dict()  # its own: untouched
    data = first.to_dict()
    assert data["baseline"] == baseline.version
    restored = PartitionState.from_dict(CoreConfig(), data, drift=DriftConfig(),
                                        **ownership(drift)[1].restore_context(data))
    assert restored.context.baseline.version == baseline.version
    assert restored.context.baseline.vocabulary.to_dict() == baseline.queries.vocabulary.to_dict()


def test_the_judgment_queue_judges_risk_against_the_active_baseline(drift):
    """The baseline that tells new terms also sets the risk signals' thresholds and query-type mix,
    and a restored partition judges against the same reference, found by its checkpoint's version."""
    baseline = freeze(generated_days(7, 400), "risk")
    drift.save_baseline(baseline)
    parts, feature = ownership(drift)
    state = parts._state(TP)
    feature.use(baseline, [state])
    reference = reference_from(baseline)
    assert state.context.baseline.reference == reference and reference.top1_low and reference.query_type_share
    # an event of a query type the baseline never saw is a rare slice; the same event without a baseline is not
    line = next(iter(generate(1, seed=5, start=DAY0 + timedelta(days=8))))
    doc = orjson.loads(line)
    doc["query"]["type"] = "never_seen"
    rare = orjson.dumps(doc)
    judged = PartitionState(CoreConfig(), state.context.baseline, judgment=JudgmentConfig())
    alone = PartitionState(CoreConfig(), judgment=JudgmentConfig())
    for partition in (judged, alone):
        partition.process(rare)
    signals = {c.stratum: c.signals for c in judged.feature("judgment").take()[0].added}
    assert signals and all(RARE_SLICE in s for s in signals.values())
    assert all(RARE_SLICE not in c.signals for c in alone.feature("judgment").take()[0].added)
    data = state.to_dict()
    restored = PartitionState.from_dict(CoreConfig(), data, drift=DriftConfig(),
                                        **ownership(drift)[1].restore_context(data))
    assert restored.context.baseline.reference == reference
