"""Score calibration: hand-computed isotonic fits, cross-validated ECE and Brier
score, and the bisect evaluation against scikit-learn's own predict."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression

from agent.core.judgments.calibration import ScoreFit, brier, ece, fit, fit_all, isotonic, out_of_fold
from agent.core.judgments.judged import judged
from agent.core.judgments.labels import Label
from tests.core.test_properties import FAST

SCORES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
RELEVANT = [0, 0, 1, 0, 1, 1]


def test_isotonic_fit_by_hand():
    # Pool adjacent violators: 0 | 1, 0 -> 0.5, 0.5 | 1; each block keeps both ends.
    x, y = isotonic([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    assert (x, y) == ((0.1, 0.2, 0.3, 0.4), (0.0, 0.5, 0.5, 1.0))
    c = fit("app", "v1", [0.1, 0.2, 0.3, 0.4], [0, 3, 1, 2])  # grades: relevant at >= 2
    assert (c.x, c.y, c.n, c.relevant) == (x, y, 4, 2)
    assert [c.probability(s) for s in (-5, 0.1, 0.15, 0.25, 0.35, 0.4, 9)] == pytest.approx([0, 0, 0.25, 0.5, 0.75, 1, 1])


def test_ties_in_score_are_averaged_and_one_threshold_is_a_constant():
    x, y = isotonic([1.0, 1.0, 2.0], [0, 1, 1])
    assert (x, y) == ((1.0, 2.0), (0.5, 1.0))
    c = fit("app", None, [3.0, 3.0, 3.0, 3.0, 3.0], [0, 2, 2, 3, 1], folds=5)
    assert c.x == (3.0,) and c.y == (0.6,) and c.probability(-1) == c.probability(7) == 0.6


def test_ece_and_brier_by_hand():
    p, r = [0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1]
    # bins [0, .1): |.05 - 0| x 1/4; [.1, .2): |.15 - .5| x 2/4; [.9, 1]: |.95 - 1| x 1/4
    assert ece(p, r) == pytest.approx(0.05 / 4 + 0.35 / 2 + 0.05 / 4)
    assert brier(p, r) == pytest.approx((0.05**2 + 0.85**2 + 0.15**2 + 0.05**2) / 4)
    assert ece([1.0, 1.0], [1, 1]) == 0.0  # a probability of exactly 1 is in the last bin


def test_cross_validation_by_hand():
    # Sorted by score, chunks go to folds 0, 1, 0, 1, ...: {.1 .3 .5} and {.2 .4 .6}.
    # Fold 0 is predicted from (.2, 0) (.4, 0) (.6, 1): .1 -> 0, .3 -> 0, .5 -> .5;
    # fold 1 from (.1, 0) (.3, 1) (.5, 1): .2 -> .5, .4 -> 1, .6 -> 1.
    held_out = out_of_fold(SCORES, RELEVANT, folds=2)
    assert held_out.tolist() == [0.0, 0.5, 0.0, 1.0, 0.5, 1.0]
    c = fit("app", "v1", SCORES, [3 * r for r in RELEVANT], folds=2)
    assert c.brier == pytest.approx((0 + 0.25 + 1 + 1 + 0.25 + 0) / 6)
    # bin 0: p 0, half relevant; bin 5: p .5, half relevant; bin 9: p 1, half relevant
    assert c.ece == pytest.approx(2 / 6 * 0.5 + 0 + 2 / 6 * 0.5)


def direct_cv(scores, relevant, folds):
    """The same cross-validation written out with scikit-learn's predict and plain loops."""
    order = sorted(range(len(scores)), key=lambda i: (scores[i], relevant[i]))
    fold = {i: position % folds for position, i in enumerate(order)}
    p = [0.0] * len(scores)
    for k in range(folds):
        train = [i for i in range(len(scores)) if fold[i] != k]
        model = IsotonicRegression(out_of_bounds="clip").fit([scores[i] for i in train], [relevant[i] for i in train])
        for i in range(len(scores)):
            if fold[i] == k:
                p[i] = float(model.predict([scores[i]])[0])
    bins = {}
    for pi, ri in zip(p, relevant):
        bins.setdefault(min(int(pi * 10), 9), []).append((pi, ri))
    error = sum(len(b) / len(p) * abs(sum(x for x, _ in b) / len(b) - sum(y for _, y in b) / len(b))
                for b in bins.values())
    return error, sum((pi - ri) ** 2 for pi, ri in zip(p, relevant)) / len(p)


@given(data=st.lists(st.tuples(st.sampled_from([0.1 * i for i in range(12)]), st.integers(0, 3)),
                     min_size=5, max_size=60),
       folds=st.integers(2, 5))
@FAST
def test_ece_and_brier_equal_a_direct_computation(data, folds):
    scores, grades = [s for s, _ in data], [g for _, g in data]
    c = fit("app", "v1", scores, grades, folds=folds)
    error, score = direct_cv(scores, [1.0 if g >= 2 else 0.0 for g in grades], folds)
    assert c.ece == pytest.approx(error, abs=1e-12) and c.brier == pytest.approx(score, abs=1e-12)
    again = fit("app", "v1", scores[::-1], grades[::-1], folds=folds)  # the folds depend on the data, not its order
    assert (again.ece, again.brier) == pytest.approx((c.ece, c.brier), abs=1e-12)


finite = st.floats(-1e6, 1e6, allow_nan=False)


@given(train=st.lists(st.tuples(finite, st.booleans()), min_size=1, max_size=80),
       queries=st.lists(st.floats(-2e6, 2e6, allow_nan=False), min_size=1, max_size=40))
@settings(max_examples=300, deadline=None)
def test_the_bisect_evaluation_is_scikit_learns_predict(train, queries):
    scores, relevant = [s for s, _ in train], [float(r) for _, r in train]
    model = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(scores, relevant)
    c = fit("app", "v1", scores, [3 * r for r in relevant], folds=2)
    queries += scores  # the thresholds themselves, where an interpolation could round differently
    assert [c.probability(q) for q in queries] == model.predict(np.asarray(queries)).tolist()


def test_a_calibration_round_trips_through_json():
    c = fit("app", None, SCORES, [3 * r for r in RELEVANT], folds=2, batches=["2026-W01-a"], fitted_at=5.0)
    back = ScoreFit.from_dict(json.loads(json.dumps(c.to_dict())))
    assert back == c and back.probability(0.45) == c.probability(0.45)
    with pytest.raises(ValueError, match="as many x as y"):
        ScoreFit.from_dict({**c.to_dict(), "y": [0.5]})


def test_fewer_chunks_than_folds_fit_without_an_error_estimate():
    c = fit("app", "v1", [0.1, 0.9], [0, 3], folds=5)
    assert c.ece is None and c.brier is None and c.probability(0.9) == 1.0


def key_row(item: str, app: str, version: str | None, scores: list[float]) -> dict:
    return {"item": item, "app": app, "pipeline_version": version,
            "chunks": [{"chunk": f"{item}-{j}", "chunk_id": f"c{j}", "parent_id": "p", "source": "s", "rank": j,
                        "score": s} for j, s in enumerate(scores, 1)]}


def test_fits_pool_batches_per_app_and_pipeline_version():
    key_a = [key_row("A-0001", "app", "v1", [0.9, 0.5]), key_row("A-0002", "app", "v2", [0.7]),
             key_row("A-0003", "bot", None, [0.3])]
    key_b = [key_row("B-0001", "app", "v1", [0.8, 0.2])]
    labels_a = [Label(batch_id="A", item="A-0001", chunk="A-0001-1", judge="j1", grade=3),
                Label(batch_id="A", item="A-0001", chunk="A-0001-1", judge="j2", grade=1),  # mean 2
                Label(batch_id="A", item="A-0001", chunk="A-0001-2", judge="j1", grade=0),
                Label(batch_id="A", item="A-0002", chunk="A-0002-1", judge="j1", grade=2),
                Label(batch_id="A", item="A-0003", chunk="A-0003-1", judge="j1", grade=1)]
    labels_b = [Label(batch_id="B", item="B-0001", chunk="B-0001-1", judge="j1", grade=2)]  # B-0001-2 not graded: left out
    fits = fit_all({"A": judged(key_a, labels_a), "B": judged(key_b, labels_b)}, folds=2, fitted_at=7.0)
    by_pair = {(c.app, c.pipeline_version): c for c in fits}
    assert sorted(by_pair, key=str) == sorted([("app", "v1"), ("app", "v2"), ("bot", None)], key=str)
    v1 = by_pair[("app", "v1")]
    assert (v1.n, v1.relevant, v1.batches, v1.fitted_at) == (3, 2, ("A", "B"), 7.0)  # double-judged counts once
    assert v1.x == (0.5, 0.8, 0.9) and v1.y == (0.0, 1.0, 1.0)
    assert (by_pair[("bot", None)].n, by_pair[("bot", None)].relevant, by_pair[("app", "v2")].batches) == (1, 0, ("A",))
