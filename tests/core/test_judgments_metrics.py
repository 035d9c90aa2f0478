"""agent/core/judgments: the seed script's metrics and trec_eval's, by hand and against references."""

from __future__ import annotations

import importlib.util
import math
import random
from pathlib import Path

import numpy as np
import pytest

from agent.core.judgments import SEED, TREC, bootstrap_interval, evaluate, per_query, policy_of

L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)


# The seed document's script (section 5), verbatim: the `seed` policy's oracle.
_SEED_SCRIPT = Path(__file__).parents[1] / "data" / "seed" / "retrieval_metrics.py"
_spec = importlib.util.spec_from_file_location("seed_retrieval_metrics", _SEED_SCRIPT)
seed_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seed_script)
seed_per_query, seed_evaluate = seed_script.per_query, seed_script.evaluate


QRELS = {"d1": 3, "d2": 2, "d3": 1, "d4": 0, "d5": 2}
RANKED = ["d4", "d2", "d9", "d1", "d3"]


def test_seed_by_hand():
    m = per_query(QRELS, RANKED, 5, SEED)
    # relevant (>= 2): d1, d2, d5; in the top 5: d2 (rank 2), d1 (rank 4)
    assert m["precision"] == pytest.approx(2 / 5)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["reciprocalRank"] == pytest.approx(1 / 2)
    assert m["hitRate"] == 1.0
    dcg = 3 / L3 + 7 / math.log2(5) + 1 / math.log2(6)  # gains 2^g - 1 of d2, d1, d3
    ideal = 7 / L2 + 3 / L3 + 3 / L4 + 1 / math.log2(5)  # grades 3, 2, 2, 1, 0
    assert m["nDCG"] == pytest.approx(dcg / ideal)


def test_seed_short_lists_empty_and_unjudged():
    # precision over the returned count, not k
    assert per_query(QRELS, ["d1", "d4"], 5, SEED)["precision"] == pytest.approx(1 / 2)
    empty = per_query(QRELS, [], 5, SEED)
    assert empty == {"precision": 0.0, "recall": 0.0, "reciprocalRank": 0.0, "hitRate": 0.0, "nDCG": 0.0}
    # nothing relevant: recall 1; nothing graded above 0: nDCG 1
    none = per_query({"d1": 1, "d2": 0}, ["d1"], 3, SEED)
    assert none["recall"] == 1.0 and none["hitRate"] == 0.0 and none["nDCG"] == pytest.approx(1.0)
    assert per_query({"d1": 0}, ["d9"], 3, SEED)["nDCG"] == 1.0
    # the rank of the first hit is cut at k
    assert per_query(QRELS, ["d4", "d3", "d1"], 2, SEED)["reciprocalRank"] == 0.0


def test_seed_keeps_duplicates_like_the_script():
    m = per_query({"a": 2, "b": 2}, ["a", "a", "x"], 3, SEED)
    assert m["precision"] == pytest.approx(2 / 3)  # each repeat is a hit
    assert m["recall"] == pytest.approx(1 / 2)  # but recall counts a doc once
    assert m["nDCG"] == pytest.approx((3 / L2 + 3 / L3) / (3 / L2 + 3 / L3))
    with pytest.raises(ValueError, match="'a'"):
        per_query({"a": 2}, ["a", "b", "a"], 3, policy_of("seed", duplicates="reject"))


def test_the_documents_example_precision_at_five():
    # "If five chunks are retrieved and only two are relevant, precision at five is 0.4."
    m = per_query({"c1": 3, "c3": 2}, ["c1", "c2", "c3", "c4", "c5"], 5, SEED)
    assert m["precision"] == 0.4


def test_seed_evaluate_counts_qrels_queries():
    qrels = {"q1": QRELS, "q2": {"d1": 2}, "q3": {"d1": 0}}
    run = {"q1": RANKED, "q2": ["d1"], "q9": ["d1"]}  # q3 is missing, q9 has no qrels
    out = evaluate(qrels, run, 5)
    assert out == seed_evaluate(qrels, run, 5)
    assert out["queryCount"] == 3 and set(out["perQuery"]) == {"q1", "q2", "q3"}
    assert out["macro"]["precision"] == round((2 / 5 + 1 + 0) / 3, 4)
    assert out["macro"]["recall"] == round((2 / 3 + 1 + 1) / 3, 4)


def test_seed_matches_the_script_on_random_inputs():
    rnd = random.Random(7)
    for _ in range(300):
        docs = [f"d{i}" for i in range(8)]
        qrels = {f"q{q}": {d: rnd.randint(-1, 3) for d in rnd.sample(docs, rnd.randint(0, 6))} for q in range(4)}
        run = {f"q{q}": rnd.choices(docs, k=rnd.randint(0, 7)) for q in range(5)}  # duplicates included
        k = rnd.randint(1, 6)
        ours, theirs = evaluate(qrels, run, k), seed_evaluate(qrels, run, k)
        assert ours["macro"] == theirs["macro"]
        for query, row in theirs["perQuery"].items():
            assert ours["perQuery"][query] == row


def test_trec_by_hand():
    m = per_query(QRELS, RANKED, 5, TREC)
    # relevant (>= 1): d1, d2, d3, d5; in the top 5: d2, d1, d3
    assert m["precision"] == pytest.approx(3 / 5)
    assert m["recall"] == pytest.approx(3 / 4)
    assert m["reciprocalRank"] == pytest.approx(1 / 2)
    assert m["hitRate"] == 1.0
    dcg = 2 / L3 + 3 / math.log2(5) + 1 / math.log2(6)  # linear gains of d2, d1, d3
    ideal = 3 / L2 + 2 / L3 + 2 / L4 + 1 / math.log2(5)
    assert m["nDCG"] == pytest.approx(dcg / ideal)
    # P@k over k; reciprocal rank over the whole ranking; nothing relevant scores 0
    short = per_query(QRELS, ["d4", "d9", "d1"], 2, TREC)
    assert short["precision"] == 0.0 and short["reciprocalRank"] == pytest.approx(1 / 3)
    assert short["hitRate"] == 0.0
    assert per_query(QRELS, ["d1"], 4, TREC)["precision"] == pytest.approx(1 / 4)
    assert per_query({"d1": 0}, ["d1"], 3, TREC) == dict.fromkeys(
        ("precision", "recall", "reciprocalRank", "hitRate", "nDCG"), 0.0
    )


def test_trec_rejects_duplicates_and_options_override():
    with pytest.raises(ValueError, match="'d2'"):
        evaluate({"q": QRELS}, {"q": ["d2", "d1", "d2"]}, 3, "trec")
    kept = evaluate({"q": QRELS}, {"q": ["d2", "d2"]}, 2, "trec", duplicates="keep")
    assert kept["macro"]["precision"] == 1.0 and kept["macro"]["recall"] == 0.25
    strict = per_query(QRELS, RANKED, 5, policy_of("trec", threshold=2, gain="exp"))
    assert strict["precision"] == pytest.approx(2 / 5)
    assert strict["nDCG"] == pytest.approx(per_query(QRELS, RANKED, 5, policy_of("seed", threshold=2))["nDCG"])
    with pytest.raises(ValueError):
        policy_of("bm25")
    with pytest.raises(ValueError):
        per_query(QRELS, RANKED, 0, TREC)


def test_trec_evaluate_counts_queries_in_run_and_qrels():
    qrels = {"q1": QRELS, "q2": {"d1": 2}, "q3": {"d1": 1}}
    run = {"q1": RANKED, "q3": [], "q9": ["d1"]}
    out = evaluate(qrels, run, 5, "trec")
    assert set(out["perQuery"]) == {"q1", "q3"} and out["queryCount"] == 2
    assert out["macro"]["precision"] == round(3 / 5 / 2, 4)


def test_trec_agrees_with_pytrec_eval():
    import pytrec_eval  # the test extra installs it (pytrec-eval-terrier)
    rnd = random.Random(11)
    docs = [f"d{i:02d}" for i in range(15)]
    for trial in range(150):
        # grades from -1 (judged harmful: no gain) to 3; ranked lists shorter and longer than k
        qrels = {f"q{q}": {d: rnd.randint(-1, 3) for d in rnd.sample(docs, rnd.randint(1, 10))} for q in range(6)}
        run = {f"q{q}": rnd.sample(docs, rnd.randint(1, 12)) for q in range(7)}
        k, level = rnd.randint(1, 10), rnd.choice((1, 2, 3))
        names = {f"P_{k}", f"recall_{k}", "recip_rank", f"ndcg_cut_{k}"}
        scored = {q: {d: float(len(docs) - i) for i, d in enumerate(ranked)} for q, ranked in run.items()}
        ref = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=level).evaluate(scored)
        ours = evaluate(qrels, run, k, "trec", threshold=level)
        assert set(ours["perQuery"]) == set(ref), trial
        for query, row in ours["perQuery"].items():
            assert row["precision"] == pytest.approx(ref[query][f"P_{k}"]), (trial, query)
            assert row["recall"] == pytest.approx(ref[query][f"recall_{k}"]), (trial, query)
            assert row["reciprocalRank"] == pytest.approx(ref[query]["recip_rank"]), (trial, query)
            assert row["nDCG"] == pytest.approx(ref[query][f"ndcg_cut_{k}"]), (trial, query)


def test_bootstrap_interval_by_construction():
    rng = np.random.default_rng(0)
    constant = bootstrap_interval([0.5] * 10, rng)
    assert (constant.estimate, constant.low, constant.high) == (0.5, 0.5, 0.5)
    weighted = bootstrap_interval([0.0, 1.0], rng, weights=[1.0, 3.0])
    assert weighted.estimate == 0.75 and 0.0 <= weighted.low <= weighted.high <= 1.0
    same = [bootstrap_interval([1, 2, 3, 9], np.random.default_rng(5)) for _ in range(2)]
    assert same[0] == same[1]
    with pytest.raises(ValueError):
        bootstrap_interval([], rng)
    with pytest.raises(ValueError):
        bootstrap_interval([1.0, 2.0], rng, weights=[0.0, 0.0])


def test_bootstrap_coverage_on_a_known_distribution():
    rng = np.random.default_rng(2026)
    trials, covered = 400, 0
    for _ in range(trials):
        sample = rng.exponential(1.0, size=60)  # true mean 1
        interval = bootstrap_interval(sample, rng, resamples=1000)
        covered += interval.low <= 1.0 <= interval.high
    coverage = covered / trials
    print(f"bootstrap 95% coverage, exponential(1), n=60: {coverage:.3f}")
    assert 0.89 <= coverage <= 0.99
