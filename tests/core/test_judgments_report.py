"""agent/core/judgments/report.py: every figure of a tiny judged batch, computed by hand.

The batch: a risk stratum `app|lexical` with items A and B, the `uniform`
stratum with C, a zero result D and a skipped item E. A and C ask the same
query q1, so their grades pool. A is double-judged, with two disagreements;
judges ticked a stale chunk the agent missed, an unauthorized one it caught,
a duplicate; C's two chunks form an evidence group. A and C report
citations, B does not; A's content is mostly over a year old, B's a month.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from agent.core.judgments import bootstrap_interval
from agent.core.judgments.judged import JudgedChunk, JudgedItem
from agent.core.judgments.labels import Label
from agent.core.judgments.report import REPORT_METRICS, Options, age_band, report
from tests.core.test_properties import FAST

L3 = math.log2(3)
BATCH = "2026-W48-abcd1234"
MANIFEST = {"batch_id": BATCH, "week": "2026-W48"}


def row(item, event, stratum, query, cutoff, weight, chunks, signals=(), query_type="lexical", ages=None, cited=None):
    rows = [{"chunk": f"{item}-{rank}", "chunk_id": chunk_id, "parent_id": "p", "source": "wiki",
             "rank": rank, "score": score} for rank, (chunk_id, score) in enumerate(chunks, 1)]
    for name, known in (("age_days", ages), ("cited", cited)):  # absent when unknown, as the batch writes them
        for chunk, value in zip(rows, known or ()):
            if value is not None:
                chunk[name] = value
    return {
        "item": item, "event_id": event, "stratum": stratum, "app": "app", "query_id": query,
        "query_type": query_type, "language": "en", "pipeline_version": "v1", "cutoff_k": cutoff,
        "weight": weight, "signals": list(signals), "chunks": rows,
    }  # fmt: skip


KEY = [
    row("A", "e1", "app|lexical", "q1", 3, 2.0, [("c1", 0.95), ("c2", 0.65), ("c3", 0.25)], ["low_top1"],
        ages=[10.0, 400.0, 500.0], cited=[True, True, False]),  # median age 400: >= 1 y
    row("B", "e2", "app|lexical", "q2", 3, 1.0, [("c4", 0.85), ("c5", 0.75), ("c6", 0.55)], ["unauthorized"],
        query_type="semantic", ages=[20.0, None, 40.0]),  # median of the known ages 30: 30-180 d; no citations
    row("C", "e3", "uniform", "q1", 2, 2.0, [("c1", 0.85), ("c7", 0.45)], cited=[False, True]),  # age unknown
    {**row(None, "e4", "uniform", "q3", 3, 2.0, []), "item": None},
    row("E", "e5", "uniform", "q4", 3, 2.0, [("c8", 0.5)]),
]


def label(chunk, judge, grade, tags=(), group=None):
    return Label(batch_id=BATCH, item=chunk.rsplit("-", 1)[0], chunk=chunk, judge=judge, grade=grade, tags=tuple(tags), evidence_group=group)


LABELS = [
    label("A-1", "j1", 3), label("A-2", "j1", 0, ["stale"]), label("A-3", "j1", 2),
    label("A-1", "j2", 3), label("A-2", "j2", 1), label("A-3", "j2", 1),
    label("B-1", "j1", 1, ["unauthorized"]), label("B-2", "j1", 3),  # B-3 skipped
    label("C-1", "j1", 2, group="g"), label("C-2", "j1", 3, ["duplicate"], "g"),
]


def exp(g):
    return 2**g - 1


# Pooled grades of q1: c1 = mean(3 (A, both judges), 2 (C)) = 2.5, c2 = 0.5, c3 = 1.5, c7 = 3: relevant c1, c7.
PER_ITEM = {
    "A": {"precision": 1 / 3, "recall": 1 / 2, "reciprocalRank": 1.0, "hitRate": 1.0,
          "nDCG": (exp(2.5) + exp(0.5) / L3 + exp(1.5) / 2) / (exp(3) + exp(2.5) / L3 + exp(1.5) / 2),
          "groupComplete": 0.0, "groupRecall": 1 / 2,  # the group {c1, c7}: A admitted c1 only
          "answerSupported": 1 / 3},  # c1 cited and relevant; c2 cited, irrelevant; c3 neither
    "B": {"precision": 1 / 2, "recall": 1.0, "reciprocalRank": 1 / 2, "hitRate": 1.0,  # B-3 dropped, unjudged
          "nDCG": (exp(1) + exp(3) / L3) / (exp(3) + exp(1) / L3),
          "groupComplete": None, "groupRecall": None,  # no group marked for q2
          "answerSupported": None},  # B reports no citations
    "C": {"precision": 1.0, "recall": 1.0, "reciprocalRank": 1.0, "hitRate": 1.0,
          "nDCG": (exp(2.5) + exp(3) / L3) / (exp(3) + exp(2.5) / L3),
          "groupComplete": 1.0, "groupRecall": 1.0,
          "answerSupported": 1 / 2},  # c7 cited and relevant; c1 relevant, uncited
}  # fmt: skip


def mean(items, weights, metric):
    pairs = [(PER_ITEM[i][metric], w) for i, w in zip(items, weights) if PER_ITEM[i][metric] is not None]
    return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None


def find(out, view, stratum):
    return next(v for v in out["views"] if v["view"] == view and v["stratum"] == stratum)


@pytest.fixture(scope="module")
def out():
    return report(MANIFEST, KEY, LABELS, Options(resamples=200))


@pytest.mark.parametrize(("view", "stratum", "items", "weights"), [
    ("traffic", "all", "AB", (2.0, 1.0)),  # the risk strata only, weighted
    ("challenge", "all", "ABC", (1, 1, 1)),
    ("traffic", "app|lexical", "AB", (2.0, 1.0)),
    ("challenge", "app|lexical", "AB", (1, 1)),
    ("traffic", "uniform", "C", (2.0,)),
    ("challenge", "uniform", "C", (1,)),
])  # fmt: skip
def test_every_metric_of_every_view_by_hand(out, view, stratum, items, weights):
    found = find(out, view, stratum)
    assert found["items"] == len(items)
    for metric in REPORT_METRICS:
        expected = mean(items, weights, metric)
        figure = found["metrics"][metric]
        if expected is None:
            assert figure is None, metric
            continue
        assert figure["estimate"] == pytest.approx(expected), metric
        assert figure["n"] == sum(PER_ITEM[i][metric] is not None for i in items)
        assert figure["low"] <= figure["estimate"] + 1e-12 and figure["estimate"] <= figure["high"] + 1e-12


def test_the_traffic_figures_by_hand(out):
    precision = find(out, "traffic", "all")["metrics"]["precision"]
    assert precision["estimate"] == pytest.approx((2 * 1 / 3 + 1 * 1 / 2) / 3)  # 7/18
    # The design's interval by hand. Weights a = (2, 1): only the first item was left to chance,
    # c = a (a - 1) = (2, 0); X = 3, residual 1/3 - 7/18 = -1/18; leverages h = (2/3, 1/3) undo a
    # shrinkage r = 1 - 2 (2/3 * 2) / 2 + 5/9 = 2/9: variance 2 (1/18)^2 / 9 / (2/9) = 1/324.
    # One term carries the variance: 1 degree of freedom (Satterthwaite); Wilson at n = (7/18)(11/18) * 324 = 77.
    r, n, q = 7 / 18, 77.0, stats.t.ppf(0.975, 1)
    centre, half = (r + q * q / (2 * n)) / (1 + q * q / n), q * math.sqrt(r * (1 - r) / n + q * q / (4 * n * n)) / (1 + q * q / n)
    assert (precision["low"], precision["high"]) == pytest.approx((centre - half, centre + half))
    # A challenge figure keeps the bootstrap: n - 1 draws of each stratum's n items, the report's seed.
    challenge = find(out, "challenge", "app|lexical")["metrics"]["precision"]
    expected = bootstrap_interval([1 / 3, 1 / 2], np.random.default_rng(0), resamples=200, strata=["app|lexical"] * 2)
    assert (challenge["low"], challenge["high"]) == pytest.approx((expected.low, expected.high))


def test_counts(out):
    assert out["counts"] == {"sampled": 5, "without_chunks": 1, "items": 4, "judged": 3, "unjudged_items": 1,
                             "chunks": 8, "unjudged_chunks": 1, "double_judged": 1}


def test_agreement_linear_kappa_by_hand(out):
    # A's pairs (j1, j2): (3, 3), (0, 1), (2, 1). Observed mean |i - j| = 2/3; expected under
    # independent margins {3, 0, 2} x {3, 1, 1} = 4/3; kappa = 1 - (2/3) / (4/3) = 0.5.
    agreement = out["agreement"]
    assert agreement["weights"] == "linear" and agreement["pairs"] == 3
    assert agreement["kappa"] == pytest.approx(0.5)
    assert agreement["exact"] == pytest.approx(1 / 3)
    assert agreement["disagreements"] == [
        {"item": "A", "chunk": "A-2", "grades": {"j1": 0, "j2": 1}, "crosses_threshold": False},
        {"item": "A", "chunk": "A-3", "grades": {"j1": 2, "j2": 1}, "crosses_threshold": True},
    ]


def test_tags_the_agent_missed(out):
    found = out["tags"]["found"]
    assert found["stale"] == {"chunks": 1, "items": 1, "missed_by_agent": 1}  # A fired no `stale`
    assert found["unauthorized"] == {"chunks": 1, "items": 1, "missed_by_agent": 0}  # B fired `unauthorized`
    assert found["duplicate"] == {"chunks": 1, "items": 1, "missed_by_agent": None}  # only judges can find it
    assert found["wrong_locale"] == {"chunks": 0, "items": 0, "missed_by_agent": None}
    assert out["tags"]["missed"] == [{"item": "A", "chunk": "A-2", "event_id": "e1", "tag": "stale"}]


def test_slices_worst_first(out):
    by_type = out["slices"]["query_type"]
    assert [(s["value"], s["items"]) for s in by_type] == [("lexical", 1), ("semantic", 1)]
    assert by_type[0]["precision"]["estimate"] == pytest.approx(1 / 3)
    assert by_type[1]["precision"]["estimate"] == pytest.approx(1 / 2)
    assert out["slices"]["app"][0]["precision"]["estimate"] == pytest.approx(7 / 18)
    assert out["slices"]["pipeline_version"][0]["value"] == "v1"
    by_age = out["slices"]["content_age"]  # A (median 400 d) is worse than B (median 30 d)
    assert [(s["value"], s["items"], s["precision"]["estimate"]) for s in by_age] == [
        (">= 1 y", 1, pytest.approx(1 / 3)), ("30-180 d", 1, pytest.approx(1 / 2))]


@pytest.mark.parametrize(("ages", "band"), [
    ([], "unknown"), ([None, None], "unknown"), ([29.9], "< 30 d"), ([30.0], "30-180 d"),
    ([10.0, 500.0], "180-365 d"),  # median 255: the oldest would say >= 1 y
    ([170.0, 181.0, None], "30-180 d"), ([364.0, 365.0, 366.0], ">= 1 y"),
])  # fmt: skip
def test_content_age_band_of_the_median_known_age(ages, band):
    key = row("X", "e1", "app|lexical", "q1", 3, 1.0, [(f"c{i}", 0.5) for i in range(len(ages))], ages=ages)
    item = JudgedItem(key, tuple(JudgedChunk(chunk=c["chunk"], chunk_id=c["chunk_id"], parent_id="p", source="wiki", rank=c["rank"],
                                             score=c["score"], grades={},
                                             tags=frozenset(), evidence_groups=frozenset(), age_days=c.get("age_days")) for c in key["chunks"]))
    assert age_band(item) == band


def test_answer_supported_precision_and_the_citation_quadrants(out):
    supported = find(out, "traffic", "all")["metrics"]["answerSupported"]  # A only: B reports no citations
    assert (supported["estimate"], supported["n"]) == (pytest.approx(1 / 3), 1)
    # judged chunks in the cutoff of A and C, relevant by the pooled grade (c1 2.5, c2 0.5, c3 1.5, c7 3):
    # A: c1 cited relevant, c2 cited irrelevant, c3 uncited irrelevant; C: c1 uncited relevant, c7 cited relevant
    assert out["citations"] == {"items": 2, "cited": {"relevant": 2, "irrelevant": 1},
                                "uncited": {"relevant": 1, "irrelevant": 1}}


def test_reliability_bins(out):
    # judged chunks (score, relevant by the item's own mean grade): A .95 yes, .65 no, .25 no;
    # B .85 no, .75 yes; C .85 yes, .45 yes
    bins = [(round(b["low"], 1), b["chunks"], b["relevance"]) for b in out["calibration"]]
    assert bins == [(0.2, 1, 0.0), (0.4, 1, 1.0), (0.6, 1, 0.0), (0.7, 1, 1.0), (0.8, 2, 0.5), (0.9, 1, 1.0)]
    assert out["calibration"][0]["centre"] == pytest.approx(0.25)


def test_policies_are_echoed(out):
    policy = out["policy"]
    assert policy["threshold"] == 2 and policy["gain"] == "exp"
    for name in ("relevance", "cutoff", "precision", "unjudged_chunks", "recall", "ndcg", "traffic", "interval", "kappa"):
        assert policy[name]
    assert (out["batch_id"], out["week"]) == (BATCH, "2026-W48")


def test_threshold_and_linear_gain():
    out = report(MANIFEST, KEY, LABELS, Options(threshold=1, gain="linear", resamples=50))
    # at grade >= 1, every pooled grade of q1 but c2 (0.5) is relevant: A has c1, c3 of 3
    challenge = find(out, "challenge", "app|lexical")["metrics"]
    assert challenge["precision"]["estimate"] == pytest.approx((2 / 3 + 2 / 2) / 2)
    ndcg_b = (1 + 3 / L3) / (3 + 1 / L3)
    ndcg_a = (2.5 + 0.5 / L3 + 1.5 / 2) / (3 + 2.5 / L3 + 1.5 / 2)
    assert challenge["nDCG"]["estimate"] == pytest.approx((ndcg_a + ndcg_b) / 2)
    assert out["policy"]["gain"] == "linear" and out["policy"]["relevance"] == "mean grade >= 1"


def test_a_batch_nobody_judged_has_counts_and_no_figures():
    out = report(MANIFEST, KEY, [], Options(resamples=10))
    assert out["counts"]["judged"] == 0 and out["counts"]["unjudged_items"] == 4
    assert all(figure is None for v in out["views"] for figure in v["metrics"].values())
    assert out["agreement"]["kappa"] is None and out["agreement"]["exact"] is None
    assert out["calibration"] == [] and out["slices"]["app"] == [] and out["tags"]["missed"] == []
    assert out["citations"]["items"] == 0 and out["slices"]["content_age"] == []


def test_without_citations_answer_supported_is_none():
    key = [{**r, "chunks": [{k: v for k, v in c.items() if k != "cited"} for c in r["chunks"]]} for r in KEY]
    out = report(MANIFEST, key, LABELS, Options(resamples=10))
    assert all(v["metrics"]["answerSupported"] is None for v in out["views"])
    assert out["citations"] == {"items": 0, "cited": {"relevant": 0, "irrelevant": 0},
                                "uncited": {"relevant": 0, "irrelevant": 0}}


def test_labels_of_another_batch_are_refused():
    with pytest.raises(ValueError, match="does not hold"):
        report(MANIFEST, KEY, [label("Z-1", "j1", 2)], Options(resamples=10))


@FAST
@given(st.lists(st.integers(0, 3), min_size=3, max_size=3), st.lists(st.booleans(), min_size=3, max_size=3),
       st.integers(1, 3))
def test_answer_supported_never_exceeds_precision(grades, cited, cutoff):
    key = [row("X", "e1", "app|lexical", "q1", cutoff, 3.0, [("c1", 0.9), ("c2", 0.5), ("c3", 0.1)], cited=cited)]
    out = report(MANIFEST, key, [label(f"X-{i}", "j1", g) for i, g in enumerate(grades, 1)], Options(resamples=10))
    metrics = find(out, "challenge", "all")["metrics"]
    assert metrics["answerSupported"]["estimate"] <= metrics["precision"]["estimate"]
    quadrants = out["citations"]
    assert quadrants["cited"]["relevant"] == round(metrics["answerSupported"]["estimate"] * min(cutoff, 3))


@FAST
@given(st.lists(st.integers(0, 3), min_size=3, max_size=3), st.integers(1, 3))
def test_every_estimate_lies_in_its_range_and_interval(grades, cutoff):
    key = [row("X", "e1", "app|lexical", "q1", cutoff, 3.0, [("c1", 0.9), ("c2", 0.5), ("c3", 0.1)])]
    labels = [label(f"X-{i}", "j1", g) for i, g in enumerate(grades, 1)]
    out = report(MANIFEST, key, labels, Options(resamples=20))
    for figure in find(out, "traffic", "all")["metrics"].values():
        if figure is not None:
            assert 0 <= figure["low"] <= figure["estimate"] <= figure["high"] <= 1 + 1e-12
