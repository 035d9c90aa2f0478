"""A feature plugs into a partition's state and outbox through the protocol alone (agent/core/feature.py)."""

from __future__ import annotations

import pytest

from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig
from agent.core.feature import KeptAsRows
from agent.core.partitions import Outbox, Owned, flush_due
from agent.core.state import PartitionState
from agent.synth import generate


class Added(dict):
    def absorb(self, taken: dict) -> None:
        for key, n in taken.items():
            self[key] = self.get(key, 0) + n


class PerVersion(KeptAsRows):
    """Events per (app label, pipeline version): the shape of a release gate's counts."""

    name = "versions"
    reads = frozenset({"app"})
    writes = frozenset()

    def __init__(self, flush_at: int = 10**9):
        self.counts: dict = {}
        self.flush_at = flush_at

    def observe(self, facts, ctx) -> None:
        pipeline = facts.event.pipeline
        key = (ctx.app, pipeline.version if pipeline is not None else None)
        self.counts[key] = self.counts.get(key, 0) + 1

    def take(self) -> dict:
        counts, self.counts = self.counts, {}
        return counts

    def outbox(self) -> Added:
        return Added()

    def flush_due(self, held: Added) -> bool:
        return sum(held.values()) + sum(self.counts.values()) >= self.flush_at


LINES = list(generate(300, seed=3))


def test_a_new_feature_is_fed_taken_and_held_across_a_failed_checkpoint():
    feature = PerVersion()
    state = PartitionState(CoreConfig(), features=[feature])
    box = Outbox()
    for line in LINES[:100]:
        state.process(line)
    box.take(state)  # a checkpoint that fails: the holder keeps its counts
    for line in LINES[100:]:
        state.process(line)
    box.take(state)
    assert state.feature("versions") is feature and sum(box.held["versions"].values()) == len(LINES)
    assert sum(state.totals().values()) > 0  # the metric families saw the same events
    box.clear()
    assert box.held["versions"] == {}


def test_a_feature_may_call_for_a_checkpoint():
    owned = Owned.fresh(PartitionState(CoreConfig(), features=[PerVersion(flush_at=50)]), 0)
    for line in LINES[:49]:
        owned.state.process(line)
    assert not flush_due(owned)
    owned.state.process(LINES[49])
    assert flush_due(owned)


def test_a_configuration_is_given_by_its_feature_s_name():
    with pytest.raises(TypeError):
        PartitionState(CoreConfig(), judgment=DriftConfig())
    with pytest.raises(LookupError, match="no feature 'drift'"):
        PartitionState(CoreConfig()).feature("drift")  # off: no such feature


class Checkpointed(PerVersion):
    """A feature keeping its counts in the checkpointed state, under its name."""

    name = "checkpointed"

    def to_dict(self, sealed_elsewhere: bool = False) -> dict:
        return {"counts": [[app, version, n] for (app, version), n in sorted(self.counts.items(), key=str)]}

    def restore(self, section, sealed) -> None:
        self.counts = {(app, version): n for app, version, n in section["counts"]}


def test_a_feature_s_section_follows_the_shared_context_and_comes_back_on_a_restore():
    state = PartitionState(CoreConfig(), features=[Checkpointed()])
    for line in LINES:
        state.process(line)
    data = state.to_dict()
    assert list(data) == ["version", "baseline", "labels", "vocabulary", "windows", "checkpointed"]
    restored = PartitionState.from_dict(CoreConfig(), data, features=[Checkpointed()])
    assert restored.feature("checkpointed").counts == state.feature("checkpointed").counts
    assert restored.to_dict() == data
    assert "checkpointed" not in PartitionState.from_dict(CoreConfig(), data).to_dict()  # off: its section is dropped


def test_two_features_of_one_name_are_refused():
    with pytest.raises(ValueError):
        PartitionState(CoreConfig(), features=[PerVersion(), PerVersion()])
    clash = PerVersion()
    clash.name = "windows"  # the metric families' name
    with pytest.raises(ValueError):
        PartitionState(CoreConfig(), features=[clash])


@pytest.mark.parametrize("name", ["version", "baseline", "labels", "vocabulary", "windows"])
def test_a_feature_may_not_take_a_name_of_the_state_s_own(name):
    """Its section would overwrite a key of the checkpoint (the metric families' `windows` among them)."""
    feature = PerVersion()
    feature.name = name
    with pytest.raises(ValueError, match=r"may not be named|two features"):
        PartitionState(CoreConfig(), features=[feature])


class ReadsTheWatermark(PerVersion):
    name = "late"
    reads = frozenset({"app", "watermark"})


class FillsTheApp(PerVersion):
    name = "app_filler"
    writes = frozenset({"app"})


def test_a_feature_reads_only_what_the_state_or_a_feature_before_it_fills():
    """The metric families fill the watermark; a feature reading it comes after them (always: they are
    first), and a feature may not fill a field the state or an earlier feature fills."""
    assert PartitionState(CoreConfig(), features=[ReadsTheWatermark()]).feature("late")
    with pytest.raises(ValueError, match=r"'app_filler' fills \['app'\]"):
        PartitionState(CoreConfig(), features=[FillsTheApp()])
    nothing = ReadsTheWatermark()
    nothing.reads = frozenset({"app", "relevance"})
    with pytest.raises(ValueError, match=r"'late' reads \['relevance'\]"):
        PartitionState(CoreConfig(), features=[nothing])


def test_every_context_field_is_filled_before_the_features_or_declared_by_one():
    """What each of the product's features reads and fills is what its `observe` does (agent/core/*)."""
    from agent.catalog import partition_features
    from agent.core.feature import FILLED_BEFORE, Context

    features = partition_features()
    assert set(Context.__slots__) == FILLED_BEFORE | {field for f in features for field in f.writes}
    read = {field for f in features for field in f.reads}
    assert read <= set(Context.__slots__) and set(Context.__slots__) - read == set()


class Counting(PerVersion):
    """A feature with counters of its own: what its events added leaves through `added`, after every poll."""

    name = "counting"

    def __init__(self):
        super().__init__()
        self.since: dict = {}

    def observe(self, facts, ctx) -> None:
        self.since[("seen", ctx.app)] = self.since.get(("seen", ctx.app), 0) + 1

    def added(self) -> dict:
        since, self.since = self.since, {}
        return since


def test_the_counters_grow_by_what_every_feature_added():
    state = PartitionState(CoreConfig(), features=[Counting()])
    for line in LINES[:40]:
        state.process(line)
    first = state.take_added()
    for line in LINES[40:]:
        state.process(line)
    second = state.take_added()
    assert sum(v for k, v in first.items() if k[0] == "seen") == 40
    assert sum(v for k, v in second.items() if k[0] == "seen") == len(LINES) - 40
    retrievals = [sum(v for k, v in taken.items() if k[0] == "retrievals") for taken in (first, second)]
    assert retrievals == [40, len(LINES) - 40]  # the metric families' counters, through the same member
    assert state.take_added() == {}


class Sealing(PerVersion):
    name = "sealing"
    seals = True


def test_one_feature_at_most_seals():
    """The store keeps one numbered series of sealed parts per partition: the metric families'."""
    assert PartitionState(CoreConfig()).sealing.name == "windows"
    with pytest.raises(ValueError, match=r"one feature seals parts of its section, not \['windows', 'sealing'\]"):
        PartitionState(CoreConfig(), features=[Sealing()])


def test_a_field_held_in_force_is_set_only_by_the_feature_that_supplies_it():
    state = PartitionState(CoreConfig())
    state.supply("calibration", calibrations=None)
    with pytest.raises(ValueError, match=r"feature 'calibration' does not supply \['baseline'\]"):
        state.supply("calibration", baseline=None)
    with pytest.raises(ValueError, match=r"does not supply \['app'\]"):
        state.supply("drift", app="x")  # filled from each event, by the state
