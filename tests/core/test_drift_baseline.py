"""Drift baselines: freezing is deterministic (the same days give byte-identical
JSON whatever the order they come in), versioned by content, round-trips, and
refuses what it cannot use; `evaluate` reports and skips as documented; the
package's public surface is its `__all__`."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import agent.core.drift as drift
from agent.core.drift import (
    BASELINE_FORMAT,
    DEFAULT_GRIDS,
    LATENCY,
    MIX_STATS,
    NUMERIC_STATS,
    QUERY_TYPE,
    RESULT_COUNT,
    SOURCE,
    TOP1_SCORE,
    Baseline,
    Counts,
    Finding,
    Grid,
    Grids,
    ThresholdSettings,
    evaluate,
    freeze,
)


def app_day(rng, n: int = 400, shift: float = 0.0) -> Counts:
    latency = DEFAULT_GRIDS[LATENCY].histogram(rng.lognormal(-2 + shift, 0.5, n))
    sparse = {i: int(c) for i, c in enumerate(latency) if c}  # the store keeps fine counts sparse
    return Counts(
        {TOP1_SCORE: DEFAULT_GRIDS[TOP1_SCORE].histogram(rng.normal(0.6 + shift, 0.1, n)).tolist(), LATENCY: sparse},
        {SOURCE: {"wiki": int(rng.integers(100, 200)), "kb": int(rng.integers(50, 100))},
         QUERY_TYPE: {"lexical": int(rng.integers(100, 300)), "temporal": 20}},
    )  # fmt: skip


def days(seed: int = 1, d: int = 10, apps=("search", "support")) -> dict:
    rng = np.random.default_rng(seed)
    return {f"2026-03-{i + 1:02d}": {app: app_day(rng) for app in apps} for i in range(d)}


def reordered(data: dict, seed: int) -> dict:
    """The same days, every mapping rebuilt in another insertion order."""
    shuffle = random.Random(seed).sample

    def mapping(m):
        return {k: m[k] for k in shuffle(list(m), len(m))}

    out = {}
    for day in shuffle(list(data), len(data)):
        out[day] = mapping({app: Counts(mapping(c.numeric), mapping({m: mapping(v) for m, v in c.mixes.items()}))
                            for app, c in data[day].items()})  # fmt: skip
    return out


# --------------------------------------------------------------------------- freezing


def test_the_same_days_give_byte_identical_json_whatever_their_order():
    data = days()
    first = freeze(data, name="march")
    for seed in range(3):
        again = freeze(reordered(data, seed), name="march")
        assert again.to_json() == first.to_json()
    assert first.to_json() == json.dumps(json.loads(first.to_json()), sort_keys=True, separators=(",", ":")).encode()


def test_the_version_is_a_hash_of_the_content_not_the_name():
    data = days()
    a, b = freeze(data, name="a"), freeze(data, name="b")
    assert a.version == b.version and len(a.version) == 16
    fewer = freeze({d: v for d, v in data.items() if d != "2026-03-10"})
    finer = freeze(data, n_bins=20)
    reseeded = freeze(data, calibration=ThresholdSettings(seed=1))
    assert len({a.version, fewer.version, finer.version, reseeded.version}) == 4


def test_a_baseline_round_trips_and_a_tampered_one_is_refused():
    base = freeze(days())
    back = Baseline.from_dict(json.loads(base.to_json()))
    assert back == base and back.to_json() == base.to_json()
    doc = json.loads(base.to_json())
    doc["apps"]["search"]["numeric"][TOP1_SCORE]["counts"][0] += 1
    with pytest.raises(ValueError, match="does not match version"):
        Baseline.from_dict(doc)
    with pytest.raises(ValueError, match="format"):
        Baseline.from_dict({**json.loads(base.to_json()), "format": BASELINE_FORMAT + 1})


def test_what_a_baseline_holds():
    base = freeze(days(d=10))
    assert base.days == tuple(f"2026-03-{i:02d}" for i in range(1, 11))
    app = base.apps["search"]
    assert sorted(app.numeric) == [LATENCY, TOP1_SCORE] and sorted(app.mixes) == [QUERY_TYPE, SOURCE]
    ref = app.numeric[TOP1_SCORE]
    assert ref.bins.n == 10 and sum(ref.counts) == 10 * 400
    assert sorted(ref.thresholds) == sorted(NUMERIC_STATS) and sorted(app.mixes[SOURCE].thresholds) == sorted(MIX_STATS)
    assert all(t.calibrated for t in ref.thresholds.values())
    assert app.mixes[SOURCE].bins.labels == ("kb", "wiki", "other")


def test_an_app_grid_override_is_frozen_into_the_bins():
    rng = np.random.default_rng(2)
    bm25 = Grid(0, 60, 600)
    data = {f"2026-03-{i + 1:02d}": {"bm25": Counts({TOP1_SCORE: bm25.histogram(rng.gamma(9, 2, 300))})}
            for i in range(8)}  # fmt: skip
    base = freeze(data, grids=Grids(by_app={"bm25": {TOP1_SCORE: bm25}}))
    assert base.apps["bm25"].numeric[TOP1_SCORE].bins.grid == bm25
    with pytest.raises(ValueError, match="fine counts of length"):
        freeze(data)  # stored on the bm25 grid, frozen on the default one


def test_nothing_to_freeze_is_a_clear_error():
    with pytest.raises(ValueError, match="no data to freeze"):
        freeze({})
    with pytest.raises(ValueError, match="no data to freeze"):
        freeze({"2026-03-01": {"search": Counts({TOP1_SCORE: {}}, {SOURCE: {"wiki": 0}})}})
    with pytest.raises(ValueError, match="ISO date"):
        freeze({"March 1st": {"search": app_day(np.random.default_rng(0))}})
    with pytest.raises(ValueError, match="no grid"):
        freeze({"2026-03-01": {"search": Counts({"made_up": [1, 2]})}})
    with pytest.raises(ValueError, match="whole numbers"):
        freeze({"2026-03-01": {"search": Counts(mixes={SOURCE: {"wiki": 2.5}})}})


def test_days_without_a_feature_do_not_count_towards_calibration():
    data = days(d=10)
    for day in list(data)[:5]:  # latency missing on half the days: 5 days with data, 7 needed
        c = data[day]["search"]
        data[day]["search"] = Counts({TOP1_SCORE: c.numeric[TOP1_SCORE]}, c.mixes)
    app = freeze(data).apps["search"]
    assert all(t.calibrated for t in app.numeric[TOP1_SCORE].thresholds.values())
    assert not any(t.calibrated for t in app.numeric[LATENCY].thresholds.values())
    assert app.numeric[LATENCY].thresholds["ks"].reason.startswith("5 days with data")


def test_counts_round_trip_as_sparse_plain_data():
    c = app_day(np.random.default_rng(4))
    data = c.to_dict()
    assert all(isinstance(k, str) and n > 0 for k, n in data["numeric"][TOP1_SCORE].items())
    back = Counts.from_dict(json.loads(json.dumps(data)))
    assert back.to_dict() == data
    grid = DEFAULT_GRIDS[TOP1_SCORE]
    assert grid.dense(back.numeric[TOP1_SCORE]).tolist() == list(c.numeric[TOP1_SCORE])


# --------------------------------------------------------------------------- evaluating


def test_evaluate_reports_every_feature_and_statistic_sorted():
    base = freeze(days())
    findings = evaluate(base, {"search": app_day(np.random.default_rng(9))})
    keys = [(f.app, f.feature, f.stat) for f in findings]
    assert keys == sorted(keys)
    assert {(f.feature, f.stat) for f in findings} == {
        *((feat, s) for feat in (TOP1_SCORE, LATENCY) for s in NUMERIC_STATS),
        *((mix, s) for mix in (SOURCE, QUERY_TYPE) for s in MIX_STATS),
    }
    top1 = [f for f in findings if f.feature == TOP1_SCORE]
    assert all(f.n == 400 and f.calibrated and isinstance(f.value, float) for f in top1)
    shifted = evaluate(base, {"search": app_day(np.random.default_rng(9), shift=0.25)})  # 2.5 sd; latency 0.5 sd
    assert all(f.alarm for f in shifted if f.feature in (TOP1_SCORE, LATENCY))


def test_evaluate_skips_what_it_cannot_judge():
    base = freeze(days(apps=("search",)))
    rng = np.random.default_rng(3)
    assert evaluate(base, {"unknown-app": app_day(rng)}) == []
    small = evaluate(base, {"search": app_day(rng, n=20)})  # 20 values: below the 32-event rung
    assert {f.feature for f in small} == {SOURCE, QUERY_TYPE}  # the mixes still have counts enough
    partial = evaluate(base, {"search": Counts({RESULT_COUNT: [1] * DEFAULT_GRIDS[RESULT_COUNT].size,
                                                TOP1_SCORE: [0] * DEFAULT_GRIDS[TOP1_SCORE].size})})  # fmt: skip
    assert partial == []  # result_count is not in the baseline; top-1 has no events
    alarm = Finding(app="a", feature="f", stat="psi", value=1.0, threshold=0.5, alarm=True, n=100, calibrated=True)
    assert alarm.alarm and alarm.n == 100


def test_public_names_are_the_sorted_all():
    public = {name for name in dir(drift) if not name.startswith("_")}
    modules = {"baseline", "bins", "contents", "days", "features", "queries", "stats", "thresholds"}
    assert set(drift.__all__) == public - modules
    constants = [n for n in drift.__all__ if n.isupper()]
    classes = [n for n in drift.__all__ if n[0].isupper() and not n.isupper()]
    functions = [n for n in drift.__all__ if n[0].islower()]
    assert drift.__all__ == [*sorted(constants), *sorted(classes), *sorted(functions)]


# --------------------------------------------------------------------------- grids


def with_grids(c: Counts, grids: dict) -> Counts:
    return Counts(c.numeric, c.mixes, c.queries, grids=grids)


def test_a_feature_counted_on_another_grid_is_never_compared():
    base = freeze(days())
    digest = DEFAULT_GRIDS[TOP1_SCORE].digest
    assert digest == Grid(-1000, 1000, 4000, scale=0.01).digest != Grid(0, 1, 100).digest
    window = {"search": app_day(np.random.default_rng(9))}
    legacy = evaluate(base, window)  # no grids recorded (stored before they were): compared as before
    assert {f.feature for f in legacy} >= {TOP1_SCORE, LATENCY} and not drift.grid_mismatches(base, window)
    same = {"search": with_grids(window["search"], {TOP1_SCORE: digest, LATENCY: DEFAULT_GRIDS[LATENCY].digest})}
    assert evaluate(base, same) == legacy
    for other in (Grid(0, 1, 100).digest, "mixed"):
        moved = {"search": with_grids(window["search"], {TOP1_SCORE: other})}
        (found,) = drift.grid_mismatches(base, moved)
        assert (found.app, found.feature, found.counted, found.expected) == ("search", TOP1_SCORE, other, digest)
        assert evaluate(base, moved) == [f for f in legacy if f.feature != TOP1_SCORE]
    assert "counted on two grids" in str(found)


def test_freeze_refuses_days_counted_on_another_grid_than_the_configured_one():
    data = days(d=7)
    data["2026-03-03"] = {app: with_grids(c, {TOP1_SCORE: DEFAULT_GRIDS[TOP1_SCORE].digest}) for app, c in
                          data["2026-03-03"].items()}
    freeze(data)  # recorded and configured grids agree; other days recorded none
    with pytest.raises(ValueError, match=r"day 2026-03-03: app 'search', top1_score: counted on grid \w{12}, "
                                         r"the configured grid is \w{12}"):
        freeze(data, grids=Grids(by_feature={TOP1_SCORE: Grid(-1000, 1000, 2000, scale=0.01)}))


def test_findings_carry_the_window_counts_and_the_expected_false_alarm_rate():
    base = freeze(days())
    window = {"search": app_day(np.random.default_rng(9))}
    for f in evaluate(base, window):
        r = base.apps["search"].numeric.get(f.feature) or base.apps["search"].mixes[f.feature]
        assert len(f.counts) == len(r.counts) and sum(f.counts) == f.n
        assert f.rate == (base.calibration.rate if f.calibrated else None)
