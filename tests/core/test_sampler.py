"""Judgment sampling, part 2: candidates, the bounded per-week sampler, its
checkpoint and change log, and `select`, which merges replicas."""

from __future__ import annotations

import json
import random

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.core.sampling import (
    OTHER,
    UNIFORM,
    Budgets,
    Candidate,
    ResultRef,
    RiskConfig,
    Sampler,
    Selection,
    assess,
    candidates_of,
    select,
    strata_for,
    uniform,
)  # fmt: skip
from tests.core.test_properties import FAST

WEEK = "2026-W48"
STRATUM = "app|lexical"


def cand(event_id: str, w: float = 1.0, week: str = WEEK, stratum: str = STRATUM, salt: str = "") -> Candidate:
    u = uniform(event_id, week, salt)
    return Candidate(
        event_id=event_id, ts=0.0, week=week, stratum=stratum, app="app", query_id="q0000000",
        query_type="lexical", language="en", cutoff_k=3, pipeline_version=None,
        results=(ResultRef("c1", "p1", "wiki", 1, 0.5),), w=w, u=u, priority=w / u,
    )  # fmt: skip


def top(candidates, n: int) -> list[str]:
    return [c.event_id for c in sorted(candidates, key=lambda c: c.key, reverse=True)[:n]]


def ids(candidates) -> list[str]:
    return [c.event_id for c in candidates]


# A population: event ids with weights, some offered twice with another weight.
POPULATION = st.lists(
    st.tuples(st.integers(0, 400), st.sampled_from([1.0, 1.5, 2.0, 3.0, 8.0])), min_size=0, max_size=120
)


# --------------------------------------------------------------------------- candidates


def test_candidates_of_an_event():
    doc = {
        "schema": "retrieval.v1", "event_id": "ev-7", "ts": "2026-11-25T12:00:00Z", "app": "app",
        "query": {"id": "q0000000", "type": "lexical", "language": "EN-us"},
        "principal": {"tenant": "t1", "groups": []}, "cutoff_k": 2, "pipeline": {"version": "v3"},
        "results": [{"chunk_id": f"c{r}", "parent_id": "p", "source": "wiki", "rank": r, "score": 1 / r}
                    for r in (3, 1, 2)],
        "feedback": {"thumbs": -1},
    }  # fmt: skip
    f = facts_of(decode(orjson.dumps(doc)).event)
    risk = assess(f, 0, RiskConfig())
    risky, flat = candidates_of(f, risk, salt="s")
    assert (risky.stratum, risky.w, flat.stratum, flat.w) == ("app|lexical", 4.0, UNIFORM, 1.0)
    assert risky.u == flat.u == uniform("ev-7", WEEK, "s") and risky.priority == 4.0 / risky.u
    assert risky.results == (ResultRef("c1", "p", "wiki", 1, 1.0), ResultRef("c2", "p", "wiki", 2, 0.5))  # admitted
    assert (risky.week, risky.language, risky.pipeline_version, risky.signals) == (WEEK, "en-us", "v3", ("thumbs_down",))
    assert strata_for("app", None, 2.5) == (("app|unknown", 2.5), (UNIFORM, 1.0))
    bounded = candidates_of(f, risk, salt="s", stratum="app|other")
    assert [(c.stratum, c.w) for c in bounded] == [("app|other", 4.0), (UNIFORM, 1.0)]
    assert bounded[0].query_type == "lexical"  # the record keeps the event's own type


def test_offer_refuses_a_candidate_the_estimator_cannot_use():
    sampler = Sampler()
    for bad in (msgspec.structs.replace(cand("a"), w=0.0, priority=0.0),
                msgspec.structs.replace(cand("a"), priority=123.0)):  # fmt: skip
        with pytest.raises(ValueError):
            sampler.offer(bad)


# --------------------------------------------------------------------------- the sampler


def test_keeps_the_k_plus_one_largest_priorities():
    sampler = Sampler(Budgets(k=5))
    offered = [cand(f"e{i}", w=1 + i % 4) for i in range(200)]
    kept = [sampler.offer(c) for c in offered]
    assert ids(sampler.kept(WEEK, STRATUM)) == top(offered, 6)
    assert sum(kept) >= 6  # some were kept for a while, then evicted
    selection = sampler.selection(WEEK, STRATUM)
    assert ids(selection.items) == top(offered, 5) and selection.tau == sampler.kept(WEEK, STRATUM)[5].priority


@FAST
@given(POPULATION, st.randoms(use_true_random=False))
def test_kept_set_depends_on_the_offered_set_not_the_order(population, rnd):
    offered = [cand(f"e{i}", w) for i, w in population]
    shuffled = offered[:]
    rnd.shuffle(shuffled)
    a, b = Sampler(Budgets(k=4)), Sampler(Budgets(k=4))
    for c in offered:
        a.offer(c)
    for c in shuffled:
        b.offer(c)
    assert a.kept(WEEK, STRATUM) == b.kept(WEEK, STRATUM)
    assert a.kept(WEEK, STRATUM) == select(offered, 5).items  # the K + 1 largest, one per event


def test_an_event_offered_again_keeps_its_larger_priority():
    sampler = Sampler(Budgets(k=2))
    low, high = cand("x", 1.0), cand("x", 50.0)
    assert sampler.offer(high) and sampler.offer(low)
    assert sampler.kept(WEEK, STRATUM) == (high,)
    sampler.take_changes()
    assert sampler.offer(cand("x", 60.0)) and sampler.kept(WEEK, STRATUM)[0].w == 60.0
    assert ids(sampler.take_changes().added) == ["x"]  # an upsert


def test_strata_beyond_the_bound_fold_into_other():
    sampler = Sampler(Budgets(k=1, max_strata=2))
    for i in range(6):
        sampler.offer(cand(f"e{i}", stratum=f"app|t{i}"))
    sampler.offer(cand("u1", stratum=UNIFORM))
    assert sampler.strata(WEEK) == ("app|t0", "app|t1", OTHER, UNIFORM)
    assert ids(sampler.kept(WEEK, OTHER)) == top([cand(f"e{i}") for i in range(2, 6)], 2)
    assert {c.stratum for c in sampler.kept(WEEK, OTHER)} == {OTHER}
    assert sampler.offer(cand("e9", stratum="app|t1"))  # a held stratum still takes offers


def test_weeks_are_bounded_by_advance_and_by_count():
    sampler = Sampler(Budgets(k=1, keep_weeks=2))
    for week in ("2026-W45", "2026-W46", "2026-W47"):  # keep_weeks + 1 held before any advance
        assert sampler.offer(cand("a", week=week))
    assert not sampler.offer(cand("a", week="2026-W48")) and sampler.refused == {"weeks_full": 1}
    assert sampler.advance("2026-W48") == ("2026-W45", "2026-W46")  # holds W47 to W49
    assert sampler.weeks() == ("2026-W47",)
    assert sampler.offer(cand("a", week="2026-W48")) and sampler.offer(cand("a", week="2026-W49"))
    assert not sampler.offer(cand("b", week="2026-W46")) and not sampler.offer(cand("b", week="2026-W50"))
    assert sampler.refused == {"weeks_full": 1, "late": 1, "early": 1}
    assert sampler.advance("2027-W01") == ("2026-W47", "2026-W48", "2026-W49") and sampler.weeks() == ()


def test_memory_is_bounded_whatever_the_traffic():
    budgets = Budgets(k=3, uniform_k=5, max_strata=4, keep_weeks=2)
    sampler = Sampler(budgets)
    rnd = random.Random(7)
    for i in range(3000):
        week = f"2026-W{rnd.randint(1, 52):02d}"
        stratum = UNIFORM if i % 2 else f"app{rnd.randint(0, 30)}|t{rnd.randint(0, 9)}"
        sampler.offer(cand(f"e{i}", w=rnd.choice([1.0, 2.0, 9.0]), week=week, stratum=stratum))
    assert len(sampler.weeks()) <= budgets.keep_weeks + 1
    for week in sampler.weeks():
        assert len(sampler.strata(week)) <= budgets.max_strata + 2  # plus other and uniform
        assert all(len(sampler.kept(week, s)) <= budgets.k_for(s) + 1 for s in sampler.strata(week))


# --------------------------------------------------------------------------- checkpoint and change log


def busy_sampler() -> Sampler:
    sampler = Sampler(Budgets(k=3, uniform_k=4, max_strata=2))
    sampler.advance("2026-W48")
    for i in range(60):
        sampler.offer(cand(f"e{i}", w=1 + i % 5, week=("2026-W47", WEEK)[i % 2], stratum=f"app|t{i % 4}"))
        sampler.offer(cand(f"e{i}", week=WEEK, stratum=UNIFORM))
        if i == 30:
            sampler.take_changes()
    sampler.offer(cand("late", week="2026-W40"))
    return sampler


def test_checkpoint_round_trip_through_json():
    sampler = busy_sampler()
    data = json.loads(json.dumps(sampler.to_dict()))
    restored = Sampler.from_dict(sampler.budgets, data)
    assert restored.to_dict() == sampler.to_dict()
    assert restored.refused == {"late": 1}
    for week in sampler.weeks():
        for stratum in sampler.strata(week):
            assert restored.kept(week, stratum) == sampler.kept(week, stratum)
    assert restored.take_changes() == sampler.take_changes()
    for c in [cand("n1", 5.0), cand("n2", 1.0, stratum=UNIFORM)]:  # and they go on alike
        assert restored.offer(c) == sampler.offer(c)
    assert restored.to_dict() == sampler.to_dict()


def rows(sampler: Sampler) -> dict[tuple[str, str, str], Candidate]:
    return {(c.week, c.stratum, c.event_id): c for w in sampler.weeks() for s in sampler.strata(w)
            for c in sampler.kept(w, s)}  # fmt: skip


def test_restoring_under_smaller_budgets_evicts_and_reports_it():
    sampler = busy_sampler()
    sampler.take_changes()
    store = rows(sampler)  # as written so far
    smaller = Sampler.from_dict(Budgets(k=1, uniform_k=4, max_strata=2), sampler.to_dict())
    changes = smaller.take_changes()
    assert changes.added == () and changes.evicted
    assert all(stratum != UNIFORM for _, stratum, _ in changes.evicted)  # its budget did not shrink
    for row in changes.evicted:
        del store[row]
    assert store == rows(smaller)
    assert all(len(smaller.kept(w, s)) <= 2 for w in smaller.weeks() for s in smaller.strata(w) if s != UNIFORM)


@pytest.mark.parametrize("bad", [{}, {"version": 99}, {"version": 1, "weeks": {}},
                                 {"version": 1, "range": None, "refused": {}, "changes": [],
                                  "weeks": {WEEK: {STRATUM: [{"event_id": "x"}]}}}])  # fmt: skip
def test_a_damaged_checkpoint_raises_value_error(bad):
    with pytest.raises(ValueError):
        Sampler.from_dict(Budgets(), bad)


@FAST
@given(st.lists(st.tuples(st.integers(0, 60), st.sampled_from([1.0, 2.0, 7.0]), st.booleans(), st.booleans()),
                max_size=150))  # fmt: skip
def test_applying_the_changes_keeps_a_store_equal_to_the_kept_rows(steps):
    sampler = Sampler(Budgets(k=2, uniform_k=3))
    store: dict[tuple[str, str, str], Candidate] = {}

    def apply(changes):
        for c in changes.added:
            store[(c.week, c.stratum, c.event_id)] = c
        for row in changes.evicted:
            assert row in store  # a delete always names a row that was written
            del store[row]

    for i, w, uniform_stratum, take in steps:
        sampler.offer(cand(f"e{i}", w, stratum=UNIFORM if uniform_stratum else STRATUM))
        if take:
            apply(sampler.take_changes())
    apply(sampler.take_changes())
    assert store == rows(sampler)


# --------------------------------------------------------------------------- select and merge


def test_select_takes_everything_when_there_are_at_most_k():
    offered = [cand(f"e{i}", 2.0) for i in range(5)]
    for k in (5, 9):
        selection = select(offered, k)
        assert selection.tau == 0.0 and sorted(ids(selection.items)) == sorted(ids(offered))
    assert select([], 3) == Selection((), 0.0)
    assert select(offered, 0) == Selection((), max(c.priority for c in offered))
    assert select(offered, 4).tau == min(c.priority for c in offered)


def test_select_drops_duplicates_keeping_the_larger_priority():
    selection = select([cand("a", 1.0), cand("a", 9.0), cand("b", 1.0)], 5)
    assert sorted((c.event_id, c.w) for c in selection.items) == [("a", 9.0), ("b", 1.0)]


@FAST
@given(POPULATION, st.integers(1, 4), st.integers(0, 8), st.randoms(use_true_random=False))
def test_replicas_merge_into_the_sample_of_all_traffic(population, replicas, k, rnd):
    """Split the traffic across replicas arbitrarily; each keeps its own K + 1;
    selecting from their union equals selecting from all events."""
    offered = [cand(f"e{i}", w) for i, w in population]
    samplers = [Sampler(Budgets(k=k)) for _ in range(replicas)]
    for c in offered:
        rnd.choice(samplers).offer(c)
    union = [c for s in samplers for c in s.kept(WEEK, STRATUM)]
    assert select(union, k) == select(offered, k)
