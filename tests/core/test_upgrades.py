"""Checkpointed state that upgrades: a state written by an earlier release
loads, a future version bump migrates it, an unreadable state is refused
cleanly; and a baseline vocabulary is shared by reference, not copied."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from agent import synth
from agent.core import state as state_module
from agent.core.config import CoreConfig
from agent.core.state import STATE_VERSION, ActiveBaseline, NewerState, PartitionState, StateError, migrate
from agent.core.tally import from_items
from agent.core.vocabulary import Vocabulary

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "checkpoints" / "state-v1.json"


@pytest.fixture(scope="module")
def v1() -> dict:
    return json.loads(FIXTURE.read_text())


def _config(v1: dict) -> CoreConfig:
    c = v1["config"]
    return CoreConfig(lateness_seconds=c["lateness_seconds"], windows=tuple(map(tuple, c["windows"])),
                      vocabulary_bits=c["vocabulary_bits"])


def test_a_checkpoint_written_by_the_previous_release_loads(v1):
    assert v1["state"]["version"] == 1 and STATE_VERSION == 2
    restored = PartitionState.from_dict(_config(v1), v1["state"], v1["sealed"])
    assert restored.totals() == from_items(v1["totals"])
    assert restored.context.baseline is None
    # It goes on from where it stopped, and checkpoints in today's version.
    for line in synth.generate(20, seed=4, start=datetime(2026, 11, 30, 9, 30, tzinfo=UTC)):
        restored.process(line)
    again = orjson.loads(orjson.dumps(restored.to_dict()))
    assert again["version"] == STATE_VERSION
    assert PartitionState.from_dict(_config(v1), again).to_dict() == again


def test_a_future_version_bump_migrates_step_by_step(v1, monkeypatch):
    seen = []

    def v2_to_v3(data: dict) -> dict:
        seen.append(data["version"])
        return {**data, "version": 3}

    monkeypatch.setattr(state_module, "STATE_VERSION", 3)
    upgraded = migrate(v1["state"], {**state_module.MIGRATIONS, 2: v2_to_v3}, latest=3)
    assert upgraded["version"] == 3 and upgraded["baseline"] is None and seen == [2]
    assert v1["state"]["version"] == 1  # the stored form is not changed in place


@pytest.mark.parametrize("data", [
    {"version": 0}, {"version": "1"}, {"version": True}, {}, [], None, {"version": 2},
    {"version": 2, "baseline": None, "labels": {}, "vocabulary": {}, "windows": {}},
    {"version": 2, "baseline": None, "labels": "damaged", "vocabulary": {}},
])
def test_a_damaged_state_is_a_state_error_not_a_newer_one(data):
    with pytest.raises(StateError) as raised:
        PartitionState.from_dict(CoreConfig(), data)
    assert not isinstance(raised.value, NewerState)


@pytest.mark.parametrize("data", [
    {"version": STATE_VERSION + 1},
    {"version": STATE_VERSION + 1, "baseline": None, "labels": {}, "a_section_to_come": {"rows": [1]}},
])
def test_a_state_of_a_newer_release_is_a_newer_state(data):
    with pytest.raises(NewerState):
        PartitionState.from_dict(CoreConfig(), data)


def test_a_baseline_vocabulary_is_shared_and_referenced_by_version():
    config = CoreConfig(vocabulary_bits=1 << 12)
    vocabulary = Vocabulary(1 << 12, 7)
    for term in ("tA1b2C3d4", "tZ9y8X7w6"):
        vocabulary.add(term)
    vocabulary.frozen = True
    baseline = ActiveBaseline("2026-w48", vocabulary)
    parts = [PartitionState(config, baseline) for _ in range(2)]
    for part in parts:
        assert part.context.baseline.vocabulary is vocabulary  # one filter, whatever the partition count
    data = orjson.loads(orjson.dumps(parts[0].to_dict()))
    assert data["baseline"] == "2026-w48"
    assert vocabulary.to_dict()["array"] not in orjson.dumps(data).decode()
    assert PartitionState.from_dict(config, data, baselines={"2026-w48": baseline}).context.baseline is baseline
    with pytest.raises(StateError, match="2026-w48"):
        PartitionState.from_dict(config, data)


def test_new_terms_are_new_to_the_baseline_once_one_is_active():
    config = CoreConfig(vocabulary_bits=1 << 12)
    empty = ActiveBaseline("empty", Vocabulary(1 << 12, 7, frozen=True))
    own, shared = PartitionState(config), PartitionState(config, empty)
    lines = list(synth.generate(200, seed=5))
    for line in lines + lines:  # the second pass repeats every term
        own.process(line)
        shared.process(line)

    def count(state, name):
        return sum(v for k, v in state.totals().items() if k[0] == name)

    assert count(shared, "query_new_terms") == count(shared, "query_terms") > 0  # nothing is in the baseline
    assert count(own, "query_new_terms") < count(own, "query_terms") / 2  # the partition learns its terms
