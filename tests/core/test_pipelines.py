"""An event's pipeline version, raw (agent/core/pipelines.py), and its settings in the core's configuration."""

import dataclasses
import random
from datetime import UTC, datetime

import msgspec
import orjson
import pytest

from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.model import Event, Pipeline
from agent.core.pipelines import conform, version_of
from agent.core.state import PartitionState, StateError
from tests.core.test_state import CONFIG, checkpoint, feed, stream

CONFIG_SPLIT = dataclasses.replace(CONFIG, by_pipeline_version=True, max_pipeline_versions=3)


def event(pipeline: Pipeline | None) -> Event:
    doc = {"schema": "retrieval.v1", "event_id": "ev-1", "ts": "2026-11-25T12:00:00Z", "app": "app",
           "query": {"id": "q0000000"}, "principal": {"tenant": "t1", "groups": []}, "cutoff_k": 1, "results": []}
    if pipeline is not None:
        doc["pipeline"] = msgspec.to_builtins(pipeline)
    return decode(msgspec.json.encode(doc)).event


def test_version_of_reads_the_pipeline_version_as_sent():
    assert version_of(event(Pipeline(version="v1.5-canary", retriever="bm25"))) == "v1.5-canary"


@pytest.mark.parametrize("pipeline", [None, Pipeline(retriever="bm25")])
def test_no_pipeline_or_no_version_is_none(pipeline):
    assert version_of(event(pipeline)) is None


def test_the_split_is_off_and_bounded_by_default():
    config = CoreConfig()
    assert not config.by_pipeline_version and config.max_pipeline_versions == 4
    assert CoreConfig(label_values={"pipeline_version": ("v1", "v2")}).label_values["pipeline_version"] == ("v1", "v2")
    with pytest.raises(ValueError, match="max_pipeline_versions"):
        CoreConfig(max_pipeline_versions=0)


# --------------------------------------------------------------------------- the split state

T0 = 1710158400  # 2024-03-11T12:00:00Z
SPLIT = CoreConfig(windows=(("5m", 300),), lateness_seconds=120, by_pipeline_version=True, max_pipeline_versions=2)


def doc(i: int, version: str | None, app: str = "alpha", t: float = T0, source: str = "wiki") -> bytes:
    """One event of one admitted result (score 0.5) from `source`, in English."""
    d = {"schema": "retrieval.v1", "event_id": f"e-{i}", "ts": datetime.fromtimestamp(t, UTC).isoformat(),
         "app": app, "query": {"id": f"query{i:06d}", "language": "en"},
         "principal": {"tenant": "t1", "groups": []}, "cutoff_k": 1,
         "results": [{"chunk_id": "c1", "parent_id": "p1", "source": source, "rank": 1, "score": 0.5}]}
    if version is not None:
        d["pipeline"] = {"version": version}
    return orjson.dumps(d)


def counts(tally: dict, name: str) -> dict[tuple, float]:
    return {key[1:]: value for key, value in tally.items() if key[0] == name}


def test_each_app_learns_versions_up_to_the_bound_then_other_and_none_without_one():
    state = feed(PartitionState(SPLIT), [doc(0, "v1"), doc(1, "v2"), doc(2, "v3"), doc(3, None), doc(4, "v1"),
                                         doc(5, "v3", app="beta")])
    totals = state.totals()
    assert counts(totals, "retrievals") == {("alpha", "v1"): 2, ("alpha", "v2"): 1, ("alpha", "other"): 1,
                                            ("alpha", "none"): 1, ("beta", "v3"): 1}
    assert counts(totals, "admitted_results")[("alpha", "v1", "wiki")] == 2  # after app and version, the source
    assert counts(totals, "top1_score_count")[("alpha", "none")] == 1
    assert counts(totals, "top1_score_bucket")[("alpha", "v1", "0.5")] == 2
    assert counts(totals, "query_language_retrievals") == {("en",): 6}  # no app label: not split
    # `none` is no learned version; the versions learned are checkpointed with the windows, not the labels.
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v2"], "beta": ["v3"]}
    assert "pipeline_version" not in state.labels and "pipeline_version" not in state.to_dict()["labels"]
    assert state.metrics.lead(state.process(doc(6, "v9")).event) == ("alpha", "other")


def test_a_fixed_version_list_learns_nothing():
    config = CoreConfig(by_pipeline_version=True, label_values={"pipeline_version": ("v2",)})
    state = feed(PartitionState(config), [doc(0, "v1"), doc(1, "v2"), doc(2, None), doc(3, "v1")])
    assert counts(state.totals(), "retrievals") == {("alpha", "other"): 2, ("alpha", "v2"): 1, ("alpha", "none"): 1}
    assert state.to_dict()["windows"]["pipeline_versions"] == {}


def test_off_the_keys_and_the_checkpoint_are_as_without_the_split():
    state = feed(PartitionState(CoreConfig()), [doc(0, "v1"), doc(1, None)])
    assert counts(state.totals(), "retrievals") == {("alpha",): 2}
    assert "pipeline_versions" not in state.to_dict()["windows"]
    assert state.metrics.lead(state.process(doc(2, "v1")).event) == ("alpha",)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_split_sums_to_the_unsplit_counts(seed):
    rng = random.Random(seed)
    raws = []
    for raw in stream(seed, 300):
        d = orjson.loads(raw)
        version = rng.choice(["v1", "v2", "v3", "v4", None])
        if version is not None:
            d["pipeline"] = {"version": version}
        raws.append(orjson.dumps(d))
    split = feed(PartitionState(CONFIG_SPLIT), raws)
    plain = feed(PartitionState(CONFIG), raws)
    assert conform(split.totals(), False) == pytest.approx(plain.totals())
    assert conform(split.windows.window(300, T0 + 4000), False) == pytest.approx(plain.windows.window(300, T0 + 4000))
    for app in ("alpha", "beta", "gamma"):  # three versions learned by each app, the fourth folded
        labels = {key[2] for key in split.totals() if key[0] == "retrievals" and key[1] == app}
        assert len(labels) == 5 and {"other", "none"} < labels <= {"v1", "v2", "v3", "v4", "other", "none"}


def test_a_split_state_checkpoints_and_continues_as_an_uninterrupted_one():
    raws = [doc(i, f"v{i % 3}", t=T0 + 20 * i) for i in range(30)] + [doc(30, None, t=T0 + 600)]
    whole = feed(PartitionState(SPLIT), raws)
    restored = feed(checkpoint(feed(PartitionState(SPLIT), raws[:12])), raws[12:])
    assert restored.to_dict() == whole.to_dict()


# --------------------------------------------------------------------------- switched between runs


def test_switched_on_the_buckets_counted_before_keep_their_sums_as_other():
    plain = CoreConfig(windows=SPLIT.windows, lateness_seconds=120)
    before = feed(PartitionState(plain), [doc(0, "v1"), doc(1, None, app="beta", source="news")])
    state = feed(PartitionState.from_dict(SPLIT, orjson.loads(orjson.dumps(before.to_dict()))), [doc(2, "v1")])
    assert counts(state.totals(), "retrievals") == {("alpha", "other"): 1, ("beta", "other"): 1, ("alpha", "v1"): 1}
    assert counts(state.totals(), "admitted_results") == {("alpha", "other", "wiki"): 1, ("beta", "other", "news"): 1,
                                                          ("alpha", "v1", "wiki"): 1}
    assert counts(state.windows.window(300, T0), "top1_score_bucket") == {("alpha", "other", "0.5"): 1,
                                                                            ("beta", "other", "0.5"): 1,
                                                                            ("alpha", "v1", "0.5"): 1}
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1"]}


def test_switched_off_the_versions_are_summed_and_forgotten():
    plain = CoreConfig(windows=SPLIT.windows, lateness_seconds=120)
    raws = [doc(0, "v1"), doc(1, "v2"), doc(2, None), doc(3, "v9")]
    split = feed(PartitionState(SPLIT), raws)
    state = PartitionState.from_dict(plain, orjson.loads(orjson.dumps(split.to_dict())))
    assert state.to_dict() == feed(PartitionState(plain), raws).to_dict()  # as if never split
    assert "pipeline_versions" not in state.to_dict()["windows"]


def test_sealed_buckets_stored_before_a_switch_are_read_in_the_new_layout():
    # A checkpoint stores each sealed bucket once, as it was counted: the ones
    # counted before the switch come back in the old layout at every restore.
    plain = CoreConfig(windows=(("1h", 3600),), lateness_seconds=60)
    split = CoreConfig(windows=plain.windows, lateness_seconds=60, by_pipeline_version=True)
    before = feed(PartitionState(plain), [doc(0, "v1", t=T0), doc(1, "v1", t=T0 + 600)])
    sealed = before.windows.sealed_items(0)
    assert sealed and all(len(key) == 2 for key, _ in sealed[0][1] if key[0] == "retrievals")
    data = orjson.loads(orjson.dumps(before.to_dict(sealed_elsewhere=True)))
    after = feed(PartitionState.from_dict(split, data, sealed), [doc(2, "v1", t=T0 + 900)])
    stored = sealed + after.windows.sealed_items(sealed[-1][0] + 1)  # those sealed since: in the new layout
    assert len(stored) == 2
    again = PartitionState.from_dict(split, orjson.loads(orjson.dumps(after.to_dict(sealed_elsewhere=True))), stored)
    for state in (after, again):
        assert counts(state.windows.window(3600, T0 + 900), "retrievals") == {("alpha", "other"): 2,
                                                                              ("alpha", "v1"): 1}


@pytest.mark.parametrize("damaged", [["v1"], {"alpha": 3}, 7])
def test_damaged_learned_versions_are_a_state_error(damaged):
    data = feed(PartitionState(SPLIT), [doc(0, "v1")]).to_dict()
    data["windows"]["pipeline_versions"] = damaged
    with pytest.raises(StateError, match="damaged state"):
        PartitionState.from_dict(SPLIT, data)
