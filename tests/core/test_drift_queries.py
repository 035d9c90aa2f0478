"""The query mix from hashed terms: bottom-k samples, the vocabulary and the clusters (agent/core/drift/queries.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.core.decoder import decode
from agent.core.drift import freeze
from agent.core.drift.days import DriftDays
from agent.core.drift.queries import NEW, QUERIES, SAMPLE, QueryModel, fit, merge_sample, sample_key
from agent.core.facts import facts_of
from agent.core.feature import alone
from agent.core.vocabulary import Vocabulary
from agent.synth import generate
from tests.core.test_properties import FAST
from tests.generated_days import DAY0, generated_days

keys = st.dictionaries(st.text("0123456789abcdef", min_size=4, max_size=4), st.just(("t",)), max_size=12)


@FAST
@given(st.lists(keys, max_size=5), st.integers(1, 8))
def test_a_bottom_k_sample_is_the_k_smallest_keys_of_the_union_however_merged(parts, k):
    union = {key: v for part in parts for key, v in part.items()}
    expected = {key: union[key] for key in sorted(union)[:k]}
    forwards, backwards = {}, {}
    for part in parts:
        merge_sample(forwards, part, k)
        merge_sample(forwards, part, k)  # twice: no change
    for part in reversed(parts):
        merge_sample(backwards, part, k)
    assert forwards == backwards == expected


def test_a_query_is_new_when_half_its_terms_are_unknown_else_its_nearest_centre():
    vocabulary = Vocabulary(1 << 10)
    vocabulary.add_all(["a", "b", "c", "d"])
    model = fit([[{"1": ("a", "b"), "2": ("a", "b"), "3": ("c", "d"), "4": ("c", "d")}]], clusters=2)[0]
    ab, cd = model.assign([("a", "b"), ("c", "d")])
    assert ab != cd
    known = {"a", "b", "c", "d"}
    counts = model.categories([("a", "b"), ("a", "x"), ("c", "d", "y"), ("x",), ()], known)
    # ("a", "x"): half unknown, new; ("c", "d", "y"): one in three, placed; () is not counted
    assert counts == {NEW: 2, f"c{ab}": 1, f"c{cd}": 1}
    assert QueryModel.from_dict(model.to_dict()) == model


def test_baseline_days_judge_new_terms_against_the_other_days():
    days = [[{"1": ("a", "b")}], [{"2": ("a", "b")}], [{"3": ("z", "a", "b"), "4": ("z", "b")}]]
    _, counts = fit(days, clusters=1)
    assert counts[0] == [{"c0": 1}] and counts[1] == [{"c0": 1}]
    assert counts[2] == [{"c0": 1, NEW: 1}]  # "z" is in no other day: ("z", "b") half unknown, new


def test_the_day_sample_is_the_bottom_k_of_its_events_with_terms():
    lines = list(generate(3 * SAMPLE, seed=5, start=DAY0, rate=1.0))
    days = DriftDays()
    events = [decode(line).event for line in lines]
    for e in events:
        days.observe(facts := facts_of(e), alone(facts))
    rows = days.take()
    for app in {e.app for e in events}:
        mine = {sample_key(e.event_id): e.query.terms for e in events if e.app == app and e.query.terms}
        expected = {k: mine[k] for k in sorted(mine)[:SAMPLE]}
        assert {k: tuple(v) for k, v in rows[(DAY0.date().isoformat(), app, QUERIES)].items()} == \
            {k: tuple(v) for k, v in expected.items()}


def test_freeze_with_samples_is_byte_identical_and_carries_the_model():
    days = generated_days(7, 600)
    first, second = freeze(days, "q"), freeze(days, "q")
    assert first.to_json() == second.to_json()
    assert first.queries is not None and len(first.queries.centres) == 8
    assert all("query_cluster" in a.mixes for a in first.apps.values())
    terms = [t for apps in days.values() for c in apps.values() for q in c.queries.values() for t in q]
    assert all(t in first.queries.vocabulary for t in terms)
