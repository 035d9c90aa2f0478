"""Partition state: checkpoint round trip, exactly-once restore, snapshot, vocabulary."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from hashlib import blake2b

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.config import CoreConfig
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState, sums
from agent.core.summary import summarize
from agent.core.tally import total
from agent.core.vocabulary import Vocabulary

T0 = 1710158400  # 2024-03-11T12:00:00Z
# A small filter keeps to_dict cheap; small label bounds make folding happen.
CONFIG = CoreConfig(
    windows=(("5m", 300), ("1h", 3600)),
    lateness_seconds=120,
    max_label_values=4,
    vocabulary_bits=1 << 14,
    vocabulary_hashes=5,
)


def iso(epoch: float, offset: str = "Z") -> str:
    text = datetime.fromtimestamp(epoch, UTC).isoformat()
    return text.replace("+00:00", offset) if offset == "Z" else text


def random_event(rng: random.Random, i: int, t: float) -> dict:
    """A varied event touching every family; ts jitters so some are late."""
    n = rng.choice([0, 1, 2, 3, 5, 8])
    ranks = rng.sample(range(1, 20), n)
    results = []
    for rank in ranks:
        r = {
            "chunk_id": f"c{rank}",
            "parent_id": f"p{rng.randrange(4)}",
            "source": f"src{rng.randrange(7)}",
            "rank": rank,
            "score": rng.uniform(-1, 2),
        }
        if rng.random() < 0.5:
            r["effective_date"] = rng.choice(["2024-01-01", "2024-03-11T11:00:00+05:30", "2025-01-01T00:00:00-08:00"])
        if rng.random() < 0.3:
            r["expires_at"] = rng.choice(["2024-02-01", "2030-01-01"])
        if rng.random() < 0.4:
            r["status"] = rng.choice(["current", "superseded", "draft", "tombstoned", "unknown"])
        if rng.random() < 0.3:
            r["acl"] = rng.sample(["grpaaaaa", "grpbbbbb", "grpccccc"], rng.randrange(0, 3))
        if rng.random() < 0.2:
            r["tenant"] = rng.choice(["t1", "t2"])
        if rng.random() < 0.3:
            r["fingerprint"] = rng.choice(["ab", "cd", "ef"])
        if rng.random() < 0.3:
            r["packed"] = rng.random() < 0.5
        if rng.random() < 0.3:
            r["pre_rerank_rank"] = rng.randrange(1, 30)
        results.append(r)
    doc = {
        "schema": "retrieval.v1",
        "event_id": f"s-{i}",
        "ts": iso(t),
        "app": rng.choice(["alpha", "beta", "gamma"]),
        "query": {"id": f"query{i:06d}", "terms": [f"term{rng.randrange(60):04d}" for _ in range(rng.randrange(0, 6))]},
        "principal": {"tenant": "t1", "groups": ["grpaaaaa"], "claims_present": rng.random() < 0.9},
        "cutoff_k": rng.randrange(1, 6),
        "results": results,
    }
    if rng.random() < 0.7:
        doc["query"]["type"] = rng.choice(["lexical", "paraphrase", "multi_hop", "temporal", "numeric", "ambiguous"])
    if rng.random() < 0.7:
        doc["query"]["language"] = rng.choice(["en", "de", "fr", "en-US", "ja", "pt-BR"])
    if rng.random() < 0.5:
        doc["latency_ms"] = rng.uniform(0, 3000)
    if rng.random() < 0.4:
        c = rng.randrange(0, 50)
        doc["stages"] = {"candidates": c, "after_filter": rng.randrange(0, c + 1)}
    if rng.random() < 0.4:
        doc["filters"] = [
            {"name": rng.choice(["acl", "recency", "lang", "dedupe", "geo", "tier"]),
             "status": rng.choice(["applied", "skipped", "error"]),
             "removed": rng.randrange(0, 10)}
            for _ in range(rng.randrange(1, 4))
        ]
    if rng.random() < 0.3:
        doc["feedback"] = {"rephrased": rng.random() < 0.5, "thumbs": rng.choice([-1, 0, 1])}
    if rng.random() < 0.1:
        doc["unexpected_field"] = 1  # slow path, counted as unknown
    return doc


def stream(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    t = T0
    out = []
    for i in range(n):
        t += rng.expovariate(1 / 15)
        out.append(orjson.dumps(random_event(rng, i, t - rng.uniform(0, 200))))
    return out


def feed(state: PartitionState, raws) -> PartitionState:
    for raw in raws:
        state.process(raw)
    return state


def checkpoint(state: PartitionState) -> PartitionState:
    """What the agent does at a commit: bytes out, bytes back in."""
    return PartitionState.from_dict(state.config, orjson.loads(orjson.dumps(state.to_dict())))


# --------------------------------------------------------------------------- round trip


def test_round_trip_through_orjson_bytes():
    state = feed(PartitionState(CONFIG), stream(1, 400))
    data = state.to_dict()
    assert state.totals()[("late_events",)] > 0
    assert state.windows.retired
    raw = orjson.dumps(data)
    restored = PartitionState.from_dict(CONFIG, orjson.loads(raw))
    assert restored.to_dict() == data
    assert orjson.dumps(restored.to_dict()) == raw
    assert restored.totals() == state.totals()


def test_summary_does_not_depend_on_tally_key_order():
    """A restored state holds the same totals with keys in another order: same summary.

    `summarize` adds a family's values over its labels in dict order, so equal
    tallies can give summaries that differ in the last bit (replay output then
    changes across a checkpoint restore).
    """
    state = feed(PartitionState(CONFIG), stream(1, 400))
    totals = state.totals()
    restored = checkpoint(state).totals()
    assert restored == totals
    assert summarize(restored, {}) == summarize(totals, {})
    assert summarize(dict(reversed(list(totals.items()))), {}) == summarize(totals, {})


def test_empty_state_round_trips():
    state = PartitionState(CONFIG)
    assert checkpoint(state).to_dict() == state.to_dict()
    assert state.totals() == {}


def test_unknown_state_version_is_refused():
    data = PartitionState(CONFIG).to_dict()
    data["version"] = 999
    with pytest.raises(ValueError):
        PartitionState.from_dict(CONFIG, data)


@pytest.mark.parametrize("seed", range(6))
def test_restored_state_continues_exactly_like_an_uninterrupted_one(seed):
    raws = stream(100 + seed, 300)
    uninterrupted = feed(PartitionState(CONFIG), raws)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(raws)), rng.randrange(1, 8)))
    state = PartitionState(CONFIG)
    previous = 0
    for cut in [*cuts, len(raws)]:
        feed(state, raws[previous:cut])
        state = checkpoint(state)
        previous = cut
    assert state.to_dict() == uninterrupted.to_dict()
    assert orjson.dumps(state.to_dict()) == orjson.dumps(uninterrupted.to_dict())


def test_restore_then_replay_from_checkpoint_offset_is_exactly_once():
    """Crash after a checkpoint: events processed after it are replayed, never double counted."""
    raws = stream(7, 200)
    reference = feed(PartitionState(CONFIG), raws)
    state = feed(PartitionState(CONFIG), raws[:120])
    saved = orjson.dumps(state.to_dict())  # committed with next offset 120
    feed(state, raws[120:150])  # processed, then the process dies before the next commit
    resumed = PartitionState.from_dict(CONFIG, orjson.loads(saved))
    feed(resumed, raws[120:])
    assert resumed.to_dict() == reference.to_dict()


def test_frozen_vocabulary_survives_a_checkpoint():
    state = PartitionState(CONFIG)
    state.vocabulary.add("term0000")
    state.vocabulary.frozen = True
    restored = checkpoint(state)
    assert restored.vocabulary.frozen
    assert "term0000" in restored.vocabulary


def test_a_checkpoint_after_new_terms_carries_them():
    """The encoded filter is reused between checkpoints only while no bit changes."""
    vocabulary = Vocabulary(1 << 14, 5)
    vocabulary.add("term0000")
    first = vocabulary.to_dict()
    assert vocabulary.to_dict() == first and not vocabulary.add("term0000")
    vocabulary.add("term0001")
    restored = Vocabulary.from_dict(vocabulary.to_dict())
    assert "term0001" in restored and "term0001" not in Vocabulary.from_dict(first)


# --------------------------------------------------------------------------- snapshot


def test_snapshot_over_partitions_is_the_sum():
    raws = stream(3, 300)
    rng = random.Random(3)
    parts = [PartitionState(CONFIG), PartitionState(CONFIG)]
    for raw in raws:
        parts[rng.randrange(2)].process(raw)
    now = max(p.windows.watermark for p in parts)
    snap = sums(CONFIG, parts, now)
    assert snap["totals"] == total([parts[0].totals(), parts[1].totals()])
    for name, seconds in CONFIG.windows:
        assert snap[name] == total([p.windows.window(seconds, now) for p in parts])
    processed = sum(v for k, v in snap["totals"].items() if k[0] == "retrievals")
    assert processed == len(raws)


def test_snapshot_of_ordered_partitions_matches_one_stream():
    """Without lateness or label folding, two partitions add up to the single stream."""
    config = CoreConfig(vocabulary_bits=1 << 14)
    raws = stream(4, 200)
    one = feed(PartitionState(config), raws)
    parts = [feed(PartitionState(config), raws[0::2]), feed(PartitionState(config), raws[1::2])]
    now = one.windows.watermark
    # Lateness is judged per partition, so windows and `late_events` may differ;
    # the totals hold every event either way. The learning vocabulary is per partition.
    skip = ("query_new_terms", "late_events")
    a = {k: v for k, v in sums(config, parts, now)["totals"].items() if k[0] not in skip}
    b = {k: v for k, v in sums(config, [one], now)["totals"].items() if k[0] not in skip}
    assert set(a) == set(b)
    for key in a:
        assert math.isclose(a[key], b[key], rel_tol=1e-9, abs_tol=1e-9), key


# --------------------------------------------------------------------------- vocabulary


def term_doc(i: int, terms: list[str]) -> bytes:
    return orjson.dumps(
        {
            "schema": "retrieval.v1",
            "event_id": f"v-{i}",
            "ts": iso(T0 + i),
            "app": "app",
            "query": {"id": "q0000000", "terms": terms},
            "principal": {"tenant": "t1", "groups": []},
            "cutoff_k": 1,
            "results": [],
        }
    )


def test_frozen_vocabulary_does_not_learn():
    baseline = Vocabulary(1 << 14, 5)
    for i in range(20):
        baseline.add(f"known{i:03d}")
    baseline.frozen = True
    state = PartitionState(CONFIG)
    state.vocabulary = Vocabulary.from_dict(baseline.to_dict())
    before = state.vocabulary.to_dict()["array"]
    feed(state, [term_doc(i, ["newterm1", "known000", "newterm1", "newterm2"]) for i in range(5)])
    assert state.vocabulary.to_dict()["array"] == before
    assert "newterm1" not in state.vocabulary
    t = state.totals()
    assert t[("query_terms", "app")] == 20
    assert t[("query_new_terms", "app")] == 15  # every occurrence of an unknown term, every time


def test_learning_vocabulary_learns():
    state = feed(PartitionState(CONFIG), [term_doc(i, ["newterm1", "newterm1"]) for i in range(3)])
    assert "newterm1" in state.vocabulary
    assert state.totals()[("query_new_terms", "app")] == 1


def test_frozen_vocabulary_rate_does_not_depend_on_partitioning_or_order():
    baseline = Vocabulary(1 << 14, 5)
    for i in range(0, 60, 2):
        baseline.add(f"term{i:04d}")
    baseline.frozen = True
    frozen = baseline.to_dict()
    raws = stream(11, 300)

    def run(groups):
        states = []
        for raws_of_partition in groups:
            state = PartitionState(CONFIG)
            state.vocabulary = Vocabulary.from_dict(frozen)
            states.append(feed(state, raws_of_partition))
        tally = total(s.totals() for s in states)
        return sum(v for k, v in tally.items() if k[0] == "query_new_terms"), sum(
            v for k, v in tally.items() if k[0] == "query_terms"
        )

    rng = random.Random(0)
    shuffled = raws[:]
    rng.shuffle(shuffled)
    single = run([raws])
    assert single[0] > 0
    assert run([raws[0::3], raws[1::3], raws[2::3]]) == single
    assert run([shuffled]) == single
    assert run([shuffled[:100], shuffled[100:]]) == single


def test_bloom_false_seen_rate_near_theory():
    bits, hashes, inserted = 1 << 16, 4, 10_000
    vocabulary = Vocabulary(bits, hashes)
    rng = random.Random(42)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
    terms = {"".join(rng.choices(alphabet, k=16)) for _ in range(inserted + 20_000 + 100)}
    terms = sorted(terms)
    rng.shuffle(terms)
    known, probes = terms[:inserted], terms[inserted : inserted + 20_000]
    for term in known:
        vocabulary.add(term)
    assert all(term in vocabulary for term in known)  # no false "new"
    false_seen = sum(term in vocabulary for term in probes) / len(probes)
    theory = (1 - math.exp(-hashes * inserted / bits)) ** hashes  # about 0.0436
    sigma = math.sqrt(theory * (1 - theory) / len(probes))
    assert abs(false_seen - theory) < 5 * sigma + 0.002, (false_seen, theory)


# --------------------------------------------------------------------------- accepted events must checkpoint


def _one_result_event(**result_fields) -> bytes:
    result = {"chunk_id": "c", "parent_id": "p", "source": "s", "rank": 1, "score": 0.5}
    result.update(result_fields)
    doc = {
        "schema": "retrieval.v1",
        "event_id": "x-1",
        "ts": iso(T0),
        "app": "app",
        "query": {"id": "q0000000"},
        "principal": {"tenant": "t1", "groups": []},
        "cutoff_k": 3,
        "results": [result, {"chunk_id": "d", "parent_id": "p", "source": "s", "rank": 2, "score": -1.5e308}],
    }
    return orjson.dumps(doc)


def test_extreme_finite_scores_keep_the_state_checkpointable():
    """Both scores are finite, yet top-1 minus top-2 overflows to inf; orjson writes inf as null."""
    raw = _one_result_event(score=1.5e308)
    state = PartitionState(CONFIG)
    try:
        state.process(raw)
    except RejectedEvent:
        return  # refusing such scores at the door would be a fix too
    not_finite = {k: v for k, v in state.totals().items() if not math.isfinite(v)}
    restored = checkpoint(state)
    assert restored.to_dict() == state.to_dict(), f"orjson writes these as null: {not_finite}"
    restored.process(raw)  # and the restored state keeps working
    assert all(math.isfinite(v) for v in restored.totals().values())


def test_every_accepted_event_keeps_the_state_checkpointable():
    r"""JSON escapes may spell a lone surrogate ("\ud800"), which is not UTF-8.

    Either the decoder refuses such a message, or the state that ingested it
    must still serialize (orjson, like any UTF-8 writer, refuses lone surrogates).
    """
    raw = _one_result_event().replace(b'"source":"s"', b'"source":"\\ud800"', 1)
    assert b"\\ud800" in raw
    state = PartitionState(CONFIG)
    try:
        state.process(raw)
    except RejectedEvent:
        return
    orjson.dumps(state.to_dict())


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
       st.integers(1, 1 << 32).map(lambda n: 8 * n), st.integers(0, 13))
def test_vocabulary_positions_are_double_hashing_over_one_digest(term, bits, hashes):
    """The checkpointed bit array depends on them: position i is (h1 + i * h2) % bits."""
    x = int.from_bytes(blake2b(term.encode(), digest_size=8).digest(), "little")
    h1, h2 = x & 0xFFFFFFFF, (x >> 32) | 1
    vocabulary = Vocabulary(bits, hashes, array=b"")  # positions only: no array of `bits` bits
    assert vocabulary._positions(term) == [(h1 + i * h2) % bits for i in range(hashes)]
