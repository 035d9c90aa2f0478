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
from agent.core.pipelines import conform, of_version, version_of, versions_in
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
    state.take_added()
    state.process(doc(6, "v9"))
    assert state.context.lead() == ("alpha", "other")  # the exemplars' labels: those of the event's counters
    assert state.take_added()[("retrievals", *state.context.lead())] == 1


def test_a_fixed_version_list_learns_nothing():
    config = CoreConfig(by_pipeline_version=True, label_values={"pipeline_version": ("v2",)})
    state = feed(PartitionState(config), [doc(0, "v1"), doc(1, "v2"), doc(2, None), doc(3, "v1")])
    assert counts(state.totals(), "retrievals") == {("alpha", "other"): 2, ("alpha", "v2"): 1, ("alpha", "none"): 1}
    assert state.to_dict()["windows"]["pipeline_versions"] == {}


def test_off_the_keys_and_the_checkpoint_are_as_without_the_split():
    state = feed(PartitionState(CoreConfig()), [doc(0, "v1"), doc(1, None)])
    assert counts(state.totals(), "retrievals") == {("alpha",): 2}
    assert "pipeline_versions" not in state.to_dict()["windows"]
    state.take_added()
    state.process(doc(2, "v1"))
    assert state.context.lead() == ("alpha",)
    assert state.take_added()[("retrievals", *state.context.lead())] == 1


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

UNSPLIT_TALLY = {("retrievals", "a"): 3, ("admitted_results", "a", "wiki"): 4, ("top1_score_bucket", "a", "0.5"): 3,
                 ("top1_score_sum", "a"): 1.5, ("query_language_retrievals", "en"): 3, ("late_events",): 1}
SPLIT_TALLY = {("retrievals", "a", "v1"): 2, ("retrievals", "a", "none"): 1, ("admitted_results", "a", "v1", "wiki"): 4,
               ("top1_score_bucket", "a", "v1", "0.5"): 2, ("top1_score_bucket", "a", "none", "0.5"): 1,
               ("top1_score_sum", "a", "v1"): 1.0, ("top1_score_sum", "a", "none"): 0.5,
               ("query_language_retrievals", "en"): 3, ("late_events",): 1}


def test_conform_gives_unsplit_keys_the_version_other_and_sums_split_ones():
    assert conform(UNSPLIT_TALLY, True) == {
        ("retrievals", "a", "other"): 3, ("admitted_results", "a", "other", "wiki"): 4,
        ("top1_score_bucket", "a", "other", "0.5"): 3, ("top1_score_sum", "a", "other"): 1.5,
        ("query_language_retrievals", "en"): 3, ("late_events",): 1}  # no app label: as it was
    assert conform(SPLIT_TALLY, False) == UNSPLIT_TALLY
    # A tally already laid out so is returned as it is, not copied.
    assert conform(UNSPLIT_TALLY, False) is UNSPLIT_TALLY and conform(SPLIT_TALLY, True) is SPLIT_TALLY
    assert conform({("late_events",): 1}, True) == {("late_events",): 1}


def test_of_version_and_versions_in():
    assert versions_in(SPLIT_TALLY) == ["none", "v1"]
    assert of_version(SPLIT_TALLY, "none") == {("retrievals", "a"): 1, ("top1_score_bucket", "a", "0.5"): 1,
                                               ("top1_score_sum", "a"): 0.5}


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


# --------------------------------------------------------------------------- versions come and go

DAY = 86400
RELEASES = CoreConfig(by_pipeline_version=True)  # 5m, 1h, 24h windows, 300 s lateness, 4 versions per app, 900 s idle


def releases() -> list[bytes]:
    """Five releases, one a day, each version serving until the next: v1 at day 0 and 1, v2 at day 1
    and 2, ..., v5 from day 4. Version k's last event is at day k."""
    raws = [doc(0, "v1")]
    for k in range(1, 5):
        raws += [doc(2 * k - 1, f"v{k}", t=T0 + k * DAY), doc(2 * k, f"v{k + 1}", t=T0 + k * DAY)]
    return raws


def test_a_new_release_takes_the_slot_of_a_version_stopped_for_the_idle_time():
    # Four versions at T0, v1 again at T0 + 600 s. v5 finds the set full: at a watermark of
    # T0 + 600 and of T0 + 900 no version has gone 900 s without an event (v2..v4's last, T0,
    # is not before T0 + 900 - 900), so v5 counts as `other`; at T0 + 901 v2..v4 have stopped
    # and are forgotten, and v5 takes a slot. What they counted keeps their name in the
    # windows; v2, seen again, is learned again into a free slot.
    raws = [doc(k, f"v{k}") for k in range(1, 5)] + [doc(5, "v1", t=T0 + 600), doc(6, "v5", t=T0 + 900),
                                                      doc(7, "v5", t=T0 + 901), doc(8, "v5", t=T0 + 960)]
    state = feed(PartitionState(RELEASES), raws)
    assert counts(state.totals(), "retrievals") == {("alpha", "v1"): 2, ("alpha", "v2"): 1, ("alpha", "v3"): 1,
                                                    ("alpha", "v4"): 1, ("alpha", "other"): 2, ("alpha", "v5"): 1}
    windows = state.to_dict()["windows"]
    assert windows["pipeline_versions"] == {"alpha": ["v1", "v5"]}
    assert windows["pipeline_versions_seen"] == {"alpha": {"v1": T0 + 600, "v5": T0 + 960}}
    assert set(state.feature("windows").by_label) == {"v1", "v5", "other"}  # the views of v2..v4 are let go
    state = feed(state, [doc(9, "v2", t=T0 + 1000)])
    assert counts(state.windows.window(300, T0 + 1000), "retrievals") == {
        ("alpha", "other"): 2, ("alpha", "v5"): 1, ("alpha", "v2"): 1}
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v2", "v5"]}


def test_an_exemplar_takes_the_labels_of_the_series_its_event_was_counted_in():
    # v5 arrives at T0 + 1000 while the set is full: at the watermark before it (T0 + 600) no version has
    # stopped, so it counts as `other`. Its own time frees v2..v4's places; the exemplar's labels must
    # still be those it was counted under, and looking them up must not learn v5.
    state = feed(PartitionState(RELEASES), [doc(k, f"v{k}") for k in range(1, 5)] + [doc(5, "v1", t=T0 + 600)])
    state.take_added()
    state.process(doc(6, "v5", t=T0 + 1000))
    assert state.context.lead() == ("alpha", "other")
    assert counts(state.take_added(), "retrievals") == {("alpha", "other"): 1}
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v2", "v3", "v4"]}


def test_what_forgotten_versions_left_in_retired_moves_to_other():
    # At day 4, v5 finds v1..v3 stopped (last seen at days 1 to 3) and takes a slot. The buckets
    # older than the windows' 24h + 300 s hold v1's, v2's and v3's day-2 event: in `retired` they
    # move to `other`; v3's day-3 event is still in a bucket, under its name.
    state = feed(PartitionState(RELEASES), releases())
    assert counts(state.windows.retired, "retrievals") == {("alpha", "other"): 5}
    assert counts(state.totals(), "retrievals") == {("alpha", "other"): 5, ("alpha", "v3"): 1, ("alpha", "v4"): 2,
                                                    ("alpha", "v5"): 1}
    assert counts(state.windows.window(DAY, T0 + 4 * DAY), "retrievals") == {("alpha", "v4"): 1, ("alpha", "v5"): 1}
    windows = state.to_dict()["windows"]
    assert windows["pipeline_versions"] == {"alpha": ["v4", "v5"]}
    assert windows["pipeline_versions_seen"] == {"alpha": {"v4": T0 + 4 * DAY, "v5": T0 + 4 * DAY}}


def test_what_each_round_added_is_unchanged_when_a_version_is_forgotten():
    state, taken = PartitionState(RELEASES), {}
    for raw in releases():
        state.process(raw)
        for key, value in state.take_added().items():
            assert value > 0
            taken[key] = taken.get(key, 0) + value
    # The process's counters keep what each version counted; the state's retired sums regroup it.
    assert counts(taken, "retrievals") == {("alpha", f"v{k}"): 2 for k in range(1, 5)} | {("alpha", "v5"): 1}
    assert conform(taken, False) == pytest.approx(conform(state.totals(), False))


@pytest.mark.parametrize("cut", [1, 5, 8, 9])
def test_a_state_forgetting_versions_checkpoints_and_continues_as_an_uninterrupted_one(cut):
    raws = releases()
    assert checkpoint(feed(PartitionState(RELEASES), raws[:cut])).to_dict() == \
        feed(PartitionState(RELEASES), raws[:cut]).to_dict()
    assert feed(checkpoint(feed(PartitionState(RELEASES), raws[:cut])), raws[cut:]).to_dict() == \
        feed(PartitionState(RELEASES), raws).to_dict()


def test_versions_checkpointed_without_their_last_seen_count_as_seen_at_the_restored_watermark():
    raws = [doc(0, "v1"), *(doc(k, f"v{k}", t=T0 + DAY) for k in (2, 3, 4))]
    data = orjson.loads(orjson.dumps(feed(PartitionState(RELEASES), raws).to_dict()))
    assert data["windows"]["pipeline_versions_seen"] == {"alpha": {"v1": T0, "v2": T0 + DAY, "v3": T0 + DAY,
                                                                   "v4": T0 + DAY}}
    old = dict(data, windows={k: v for k, v in data["windows"].items() if k != "pipeline_versions_seen"})
    # Ten minutes on, v1 has stopped (no event since T0): the state that kept its time forgets it
    # (and what it left in `retired` moves to `other`); the one restored without it counts v1 as
    # seen at T0 + 1 day, not stopped.
    later = [doc(5, "v2", t=T0 + DAY + 600), doc(6, "v5", t=T0 + DAY + 600)]
    kept = feed(PartitionState.from_dict(RELEASES, data), later)
    assert counts(kept.totals(), "retrievals") == {("alpha", "other"): 1, ("alpha", "v2"): 2, ("alpha", "v3"): 1,
                                                   ("alpha", "v4"): 1, ("alpha", "v5"): 1}
    restored = feed(PartitionState.from_dict(RELEASES, old), later)
    assert counts(restored.totals(), "retrievals") == {("alpha", "v1"): 1, ("alpha", "v2"): 2, ("alpha", "v3"): 1,
                                                       ("alpha", "v4"): 1, ("alpha", "other"): 1}
    assert restored.to_dict()["windows"]["pipeline_versions_seen"]["alpha"]["v1"] == T0 + DAY
    # 900 s after the restored watermark (the watermark the first v5 event found), v1, v3 and
    # v4 have stopped: the second v5 event takes a slot; v2, seen at T0 + 1 day + 600 s, stays.
    restored = feed(restored, [doc(7, "v5", t=T0 + DAY + 960), doc(8, "v5", t=T0 + DAY + 961)])
    assert restored.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v2", "v5"]}
    assert counts(restored.totals(), "retrievals") == {("alpha", "v2"): 2, ("alpha", "v3"): 1, ("alpha", "v4"): 1,
                                                       ("alpha", "v5"): 1, ("alpha", "other"): 3}


@pytest.mark.parametrize("damaged", [["v1"], {"alpha": ["v1"]}, {"alpha": {"v1": "yesterday"}}])
def test_damaged_last_seen_times_are_a_state_error(damaged):
    data = feed(PartitionState(SPLIT), [doc(0, "v1")]).to_dict()
    data["windows"]["pipeline_versions_seen"] = damaged
    with pytest.raises(StateError, match="damaged state"):
        PartitionState.from_dict(SPLIT, data)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_versions_coming_and_going_keep_the_sums(seed):
    # Releases every few minutes, a version stopping after two minutes without events, some
    # events late: each app names two versions at a time, but many over the stream, and the
    # split still sums to the unsplit counts.
    rng = random.Random(seed)
    raws, t = [], T0
    for i in range(600):
        t += rng.expovariate(1 / 20)
        release = int(t - T0) // 240
        version = rng.choice([f"v{release}", f"v{max(0, release - 1)}", f"v{release + 1}", None])
        raws.append(doc(i, version, app=rng.choice(["alpha", "beta"]), t=t - rng.uniform(0, 400)))
    config = dataclasses.replace(SPLIT, pipeline_version_idle_seconds=120)
    split, plain = PartitionState(config), PartitionState(dataclasses.replace(config, by_pipeline_version=False))
    named = set()  # the versions that counted under their own name
    for raw in raws:
        version = version_of(split.process(raw).event)
        if split.context.pipeline_version == version:
            named.add(version)
        plain.process(raw)
        assert all(len(v.known) <= 2 for v in split.feature("windows").versions.values())
    assert conform(split.totals(), False) == pytest.approx(plain.totals())
    assert len(named - {None}) >= 8  # two at a time per app, but 8 and more over the stream
    assert feed(checkpoint(feed(PartitionState(config), raws[:300])), raws[300:]).to_dict() == split.to_dict()


def test_a_version_dated_ahead_has_not_stopped_until_the_watermark_passes_its_time():
    # v1 is written at T0 dated 50 minutes ahead: it has not stopped until the watermark is
    # 900 s past T0 + 3000 s; what it counted moves to `other` in `retired` once it is forgotten.
    state = PartitionState(SPLIT)
    state.process(doc(0, "v1", t=T0 + 3000), now=T0)
    state.process(doc(1, "v2"), now=T0)
    state.process(doc(2, "v3", t=T0 + 600), now=T0 + 600)
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v2"]}
    for i, t in enumerate(range(T0 + 1200, T0 + 4200, 600)):
        state.process(doc(3 + i, "v3", t=t), now=t)
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v3"]}
    state.process(doc(9, "v4", t=T0 + 3900), now=T0 + 3900)  # the watermark is T0 + 3600
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v3"]}
    state.process(doc(10, "v4", t=T0 + 4200), now=T0 + 4200)  # T0 + 3900: 900 s after T0 + 3000
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v1", "v3"]}
    state.process(doc(11, "v4", t=T0 + 4260), now=T0 + 4260)
    assert state.to_dict()["windows"]["pipeline_versions"] == {"alpha": ["v3", "v4"]}
    learned = {"v3", "v4", "none", "other"}
    for tally in [state.windows.retired, *state.windows.buckets.values()]:
        assert all(key[2] in learned for key in tally if key[0] == "retrievals")
    assert counts(state.windows.retired, "retrievals")[("alpha", "other")] >= 2
