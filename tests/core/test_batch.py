"""The weekly batch plan: blinded items, the private key, the holdout and the
regression list; and the per-partition judging state that feeds it."""

from __future__ import annotations

import hashlib
import json
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.batch import BatchConfig, Unsalted, _order_key, _shuffled, build
from agent.core.config import CoreConfig
from agent.core.judgment import JudgmentConfig, JudgmentIntake
from agent.core.partitions import Outbox
from agent.core.reasons import RejectedEvent
from agent.core.sampling import UNIFORM, Budgets, ResultRef, in_holdout, select
from agent.core.state import PartitionState
from agent.synth import generate, parse_incident
from tests.core.test_properties import FAST
from tests.core.test_sampler import cand

WEEK = "2026-W48"
SALT = "a deployment's secret"
CONFIG = BatchConfig(budgets={UNIFORM: 4}, default_budget=3, holdout_share=0.3, double_judged_share=0.5, salt=SALT)
BLINDED_KEYS = {"item", "judges", "query", "chunks"}


def population(n: int = 40) -> list:
    risky = [cand(f"e{i:03d}", w=1.0 + i % 4, stratum="app|lexical") for i in range(n)]
    flat = [cand(f"e{i:03d}", w=1.0, stratum=UNIFORM) for i in range(n)]
    return risky + flat


def test_the_batch_takes_the_top_k_of_each_stratum_with_tau():
    batch = build(WEEK, population(), CONFIG)
    by_stratum = {}
    for row in batch.key:
        by_stratum.setdefault(row["stratum"], set()).add(row["event_id"])
    risky = select([c for c in population() if c.stratum != UNIFORM], 3)
    flat = select([c for c in population() if c.stratum == UNIFORM], 4)
    assert by_stratum == {"app|lexical": {c.event_id for c in risky.items}, UNIFORM: {c.event_id for c in flat.items}}
    events = sum(max(c.w, risky.tau) / c.w for c in risky.items)  # the sample's estimate of the stratum's 40 events
    assert batch.manifest["strata"]["app|lexical"] == {"k": 3, "tau": risky.tau, "events": events, "sampled": 3}
    assert all(row["tau"] == batch.manifest["strata"][row["stratum"]]["tau"] for row in batch.key)
    assert all(row["weight"] == max(row["w"], row["tau"]) / row["w"] for row in batch.key)


def test_judges_see_no_score_rank_pipeline_app_or_stratum():
    batch = build(WEEK, population(), CONFIG)
    for item in batch.items:
        assert set(item) == BLINDED_KEYS
        assert set(item["query"]) == {"id", "text"}
        assert all(set(chunk) == {"chunk", "chunk_id", "text"} for chunk in item["chunks"])
    text = json.dumps(batch.items)
    for word in ("score", "rank", "pipeline", "stratum", "app|", "weight", "priority", "event_id"):
        assert word not in text


def test_the_same_candidates_give_the_same_batch_in_any_order():
    first = build(WEEK, population(), CONFIG)
    again = build(WEEK, list(reversed(population())), CONFIG)
    assert (first.batch_id, first.manifest, first.items, first.key) == (again.batch_id, again.manifest, again.items,
                                                                        again.key)


def five_chunks(c):
    return type(c)(**{**{f: getattr(c, f) for f in c.__struct_fields__},
                      "results": tuple(ResultRef(f"c{j}", "p", "s", j, 1.0 - j / 10) for j in range(1, 6))})


def shown_ranks(batch) -> dict[str, tuple[int, ...]]:
    """Item -> the ranks of its chunks in the order judges see them (from the key)."""
    key = {row["item"]: row for row in batch.key}
    return {item["item"]: tuple(next(c["rank"] for c in key[item["item"]]["chunks"] if c["chunk"] == chunk["chunk"])
                                for chunk in item["chunks"]) for item in batch.items}


def test_chunks_are_shuffled_and_the_key_maps_them_back():
    batch = build(WEEK, [five_chunks(cand(f"e{i:03d}", stratum=UNIFORM)) for i in range(30)], CONFIG)
    orders = set(shown_ranks(batch).values())
    assert all(sorted(ranks) == [1, 2, 3, 4, 5] for ranks in orders)
    assert len(orders) > 1  # not the rank order every time


# --------------------------------------------------------------------------- what judges can work out

WIDE = BatchConfig(budgets={UNIFORM: 40}, default_budget=30, salt=SALT)
GUESSES = ("", "salt", "secret", "ragdrift", "changeme", SALT + " ")


def wide_population() -> list:
    """Three strata, 100 sampled events (some in two strata), five chunks each."""
    return [five_chunks(cand(f"e{i:03d}", w=1.0 + i % 4, stratum=s))
            for s in ("app|lexical", "app|semantic") for i in range(60)] + [
        five_chunks(cand(f"e{i:03d}", stratum=UNIFORM)) for i in range(60)]


def unsalted(n: int, seed: str) -> list[int]:
    """The order an unkeyed shuffle gives: anyone can compute it from a public id."""
    keys = [hashlib.blake2b(f"{seed}\x1f{i}".encode(), digest_size=16).hexdigest() for i in range(n)]
    return sorted(range(n), key=keys.__getitem__)


def guessed(n: int, seed: str, salt: str) -> list[int]:
    """The order this code gives under a guessed salt."""
    return _shuffled(list(range(n)), _order_key(salt), seed)


# What someone holding the judges' files and this code would try: the old unkeyed order, and guessed salts.
ATTACKS = [unsalted] + [lambda n, seed, g=g: guessed(n, seed, g) for g in GUESSES]


def unblinded_order(batch) -> list[tuple[str, str]]:
    """(stratum, event) before any shuffle: strata by name, each by priority, largest first."""
    by_stratum: dict[str, list] = {}
    for row in batch.key:
        by_stratum.setdefault(row["stratum"], []).append(row)
    return [(s, r["event_id"]) for s in sorted(by_stratum)
            for r in sorted(by_stratum[s], key=lambda r: (r["priority"], r["event_id"]), reverse=True)]


def test_the_judges_files_and_the_code_do_not_tell_a_chunks_rank():
    batch = build(WEEK, wide_population(), WIDE)
    truth = shown_ranks(batch)
    positions = 5 * len(truth)
    assert positions == 500
    for attack in ATTACKS:
        # The attacker's guess: the chunk shown j-th is the one of rank attack(5, item)[j] + 1.
        right = sum(rank == i + 1 for item, ranks in truth.items() for rank, i in zip(ranks, attack(5, item)))
        assert right / positions < 0.3  # chance is 1/5: over 500 positions, 0.3 is 5.6 standard deviations out


def test_the_judges_files_and_the_code_do_not_tell_an_items_stratum_or_priority():
    batch = build(WEEK, wide_population(), WIDE)
    before = unblinded_order(batch)
    key = {row["item"]: (row["stratum"], row["event_id"]) for row in batch.key}
    shown = [key[item["item"]] for item in sorted(batch.items, key=lambda i: i["item"])]  # by item number
    assert len(shown) == 100 and sorted(shown) == sorted(before)
    for attack in ATTACKS:
        # The attacker's guess: item number p is the attack(n, batch id)[p]-th event before the shuffle.
        right = sum(before[i] == row for i, row in zip(attack(len(before), batch.batch_id), shown))
        assert right <= 5  # chance is 1 of 100
        strata = sum(before[i][0] == row[0] for i, row in zip(attack(len(before), batch.batch_id), shown))
        assert strata / len(shown) < 0.55  # chance is 0.34 (strata of 30, 30 and 40 items)
    # Item numbers do not follow the strata either: from one to the next the stratum changes about 65 times
    # in 99, as in a random order (2 times in stratum order).
    changes = sum(a[0] != b[0] for a, b in pairwise(shown))
    assert changes > 50


def test_the_salt_changes_both_orders():
    one = build(WEEK, wide_population(), WIDE)
    other = build(WEEK, wide_population(), BatchConfig(**{**WIDE.__dict__, "salt": SALT + "!"}))

    def by_event(batch):
        events = {row["item"]: row["event_id"] + "/" + row["stratum"] for row in batch.key}
        return [(events[item], ranks) for item, ranks in sorted(shown_ranks(batch).items())]

    first, second = by_event(one), by_event(other)
    assert [e for e, _ in first] != [e for e, _ in second]
    same = dict(first)
    assert sum(same[e] == ranks for e, ranks in second) < 10  # two random orders of 5 agree 1 time in 120


def test_a_batch_needs_a_salt():
    with pytest.raises(Unsalted, match=r"judgment\.salt is empty") as info:
        build(WEEK, population(), BatchConfig(**{**CONFIG.__dict__, "salt": ""}))
    assert "\n" not in str(info.value)


def test_no_holdout_query_is_in_the_regression_list():
    batch = build(WEEK, population(200), CONFIG)
    held = {row["query_id"] for row in batch.key if row["holdout"]}
    assert held and all(in_holdout(q, CONFIG.holdout_share, SALT) for q in held)
    assert not held & {row["query_id"] for row in batch.regression}
    assert batch.manifest["counts"]["holdout"] == sum(row["holdout"] for row in batch.key)


def test_a_share_of_items_goes_to_two_judges():
    batch = build(WEEK, population(200), CONFIG)
    doubles = sum(item["judges"] == 2 for item in batch.items)
    assert 0 < doubles < len(batch.items)
    assert batch.manifest["counts"]["double_judged"] == doubles


def test_an_event_with_nothing_admitted_stays_in_the_key_without_an_item():
    empty = type(cand("e1"))(**{**{f: getattr(cand("e1", stratum=UNIFORM), f) for f in cand("e1").__struct_fields__},
                                "results": ()})
    batch = build(WEEK, [empty], CONFIG)
    assert batch.items == [] and batch.key[0]["item"] is None
    assert batch.manifest["counts"]["without_chunks"] == 1


# --------------------------------------------------------------------------- the partition's side


def lines(n: int = 1500) -> list[bytes]:
    return list(generate(n, seed=21, rate=5, incidents=[parse_incident("leak@1")]))


def replay(data: list[bytes], config: JudgmentConfig) -> PartitionState:
    state = PartitionState(CoreConfig(), judgment=config)
    for line in data:
        try:
            state.process(line)
        except RejectedEvent:
            pass
    return state


def kept(judging: JudgmentIntake) -> set:
    s = judging.sampler
    return {(w, st_, c.event_id) for w in s.weeks() for st_ in s.strata(w) for c in s.kept(w, st_)}


def test_every_unauthorized_event_is_one_incident():
    state = replay(lines(), JudgmentConfig())
    _, incidents = state.feature("judgment").take()
    assert incidents and len({i.event_id for i in incidents}) == len(incidents)
    assert all(i.unauthorized or not i.claims_present for i in incidents)


def test_the_outbox_holds_rows_until_a_checkpoint_commits_them():
    state = replay(lines(600), JudgmentConfig(budgets=Budgets(k=2, uniform_k=3)))
    box = Outbox()
    box.take(state)
    held, intake = box.held["judgment"], state.feature("judgment")
    first = dict(held.added)
    assert set(first) == kept(intake)
    state.process(lines(700)[650])  # more work before the (failed) checkpoint is retried
    box.take(state)
    assert set(held.added) | set(held.evicted) >= set(first) - set(held.evicted)
    assert set(held.added) <= kept(intake) and not set(held.evicted) & kept(intake)
    box.clear()
    assert not held.added and not held.evicted and not held.incidents


@given(cut=st.integers(0, 600))
@FAST
def test_a_partition_restored_from_its_rows_samples_like_an_uninterrupted_one(cut):
    data = lines(600)
    config = JudgmentConfig(budgets=Budgets(k=2, uniform_k=3))
    whole = replay(data, config)
    first = replay(data[:cut], config)
    box = Outbox()
    box.take(first)
    restored = PartitionState(CoreConfig(), features=[config.partition(box.held["judgment"].added.values())])
    assert restored.feature("judgment").take()[0].added == ()  # what was stored needs no write
    for line in data[cut:]:
        try:
            restored.process(line)
        except RejectedEvent:
            pass
    assert kept(restored.feature("judgment")) == kept(whole.feature("judgment"))


def test_restoring_under_a_smaller_budget_deletes_the_surplus_rows():
    data = lines(600)
    big = replay(data, JudgmentConfig(budgets=Budgets(k=5, uniform_k=8)))
    box = Outbox()
    box.take(big)
    small = JudgmentIntake(JudgmentConfig(budgets=Budgets(k=2, uniform_k=3)), box.held["judgment"].added.values())
    changes, _ = small.take()
    assert set(changes.evicted) == set(box.held["judgment"].added) - kept(small)
    assert changes.added == ()


def test_the_manifest_describes_the_sample_not_the_partitioning():
    data = lines()
    config = JudgmentConfig(budgets=Budgets(k=2, uniform_k=3), salt=SALT)
    whole = replay(data, config).feature("judgment").sampler
    parts = [replay(data[p::3], config).feature("judgment").sampler for p in range(3)]  # the same traffic in three partitions

    def rows(*samplers):
        return [c for s in samplers for w in s.weeks() for st_ in s.strata(w) for c in s.kept(w, st_)]

    week = max(whole.weeks(), key=lambda w: sum(len(whole.kept(w, s)) for s in whole.strata(w)))
    assert len(rows(*parts)) > len(rows(whole))  # each partition keeps K + 1 per stratum of its own
    config = BatchConfig(budgets={UNIFORM: 3}, default_budget=2, salt=SALT)
    one, three = build(week, rows(whole), config), build(week, rows(*parts), config)
    assert one.manifest == three.manifest and one.key == three.key and one.items == three.items
    assert all(s["events"] >= s["sampled"] for s in one.manifest["strata"].values())
