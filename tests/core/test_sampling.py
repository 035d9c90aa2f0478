"""Judgment sampling, part 1: risk signals and weights (hand-computed), ISO weeks,
the hashed uniforms and the holdout. The sampler is in test_sampler.py, the
estimates in test_sampling_estimate.py."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given

from agent.core.decoder import decode
from agent.core.drift import Bins, Categories, Grid, ThresholdSettings
from agent.core.drift.baseline import AppBaseline, Baseline, FeatureReference
from agent.core.drift.features import QUERY_TYPE, SCORE_GAP, TOP1_SCORE
from agent.core.facts import facts_of
from agent.core.sampling import (
    CORRECTION,
    FILTER_ZERO,
    LOW_TOP1,
    NEW_TERMS,
    RARE_SLICE,
    REPHRASED,
    RERANK_DISAGREEMENT,
    SIGNALS,
    SMALL_GAP,
    STALE,
    THUMBS_DOWN,
    UNAUTHORIZED,
    ZERO_RESULT,
    RiskConfig,
    RiskReference,
    assess,
    in_holdout,
    iso_week,
    shift_week,
    uniform,
    week_bounds,
)  # fmt: skip
from agent.core.sampling.priority import _unit
from agent.core.sampling.risk import reference_from
from tests.core.test_properties import FAST, events

CONFIG = RiskConfig()


def res(rank: int, score: float, **fields) -> dict:
    return {"chunk_id": f"c{rank}", "parent_id": f"p{rank}", "source": "wiki", "rank": rank, "score": score, **fields}


def facts(results=(), *, app: str = "app", qtype: str | None = None, **extra):
    query = {"id": "q0000000", **({"type": qtype} if qtype else {})}
    doc = {
        "schema": "retrieval.v1", "event_id": "ev-1", "ts": "2026-11-25T12:00:00Z", "app": app, "query": query,
        "principal": {"tenant": "t1", "groups": []}, "cutoff_k": 3, "results": list(results), **extra,
    }  # fmt: skip
    return facts_of(decode(orjson.dumps(doc)).event)


GOOD = [res(1, 0.9), res(2, 0.8), res(3, 0.7)]


def risk(f, new_terms: int = 0, config: RiskConfig = CONFIG, reference: RiskReference | None = None):
    r = assess(f, new_terms, config, reference)
    return r.signals, r.weight


# --------------------------------------------------------------------------- risk, by hand


def test_a_quiet_event_fires_nothing_and_weighs_one():
    assert risk(facts(GOOD)) == ((), 1.0)


def test_zero_result_and_filter_caused_zero():
    assert risk(facts()) == ((ZERO_RESULT,), 3.0)  # no top-1, no gap: only zero_result
    stages = {"candidates": 5, "after_filter": 0}
    assert risk(facts(stages=stages)) == ((ZERO_RESULT, FILTER_ZERO), 4.0)


def test_low_top1_and_small_gap_use_strict_absolute_thresholds():
    assert risk(facts([res(1, 0.25), res(2, 0.24)])) == ((LOW_TOP1, SMALL_GAP), 2.5)
    assert risk(facts([res(1, 0.3), res(2, 0.2)])) == ((), 1.0)  # 0.3 is not below 0.3, gap 0.1
    assert risk(facts([res(1, 0.5)])) == ((), 1.0)  # one result: no gap
    assert risk(facts([res(1, 0.5), res(2, 0.6)])) == ((SMALL_GAP,), 1.5)  # a negative gap is small
    no_absolute = RiskConfig(top1_low=None, gap_small=None)
    assert risk(facts([res(1, 0.1), res(2, 0.1)]), config=no_absolute) == ((), 1.0)


def test_a_reference_overrides_thresholds_for_its_apps_only():
    ref = RiskReference(top1_low={"bm25": 12.0}, gap_small={"bm25": 1.5})
    bm25 = facts([res(1, 10.0), res(2, 9.0)], app="bm25")
    assert risk(bm25) == ((), 1.0)  # absolute 0.3 / 0.02 say nothing on this scale
    assert risk(bm25, reference=ref) == ((LOW_TOP1, SMALL_GAP), 2.5)
    other = facts([res(1, 0.25), res(2, 0.24)], app="dense")
    assert risk(other, reference=ref) == ((LOW_TOP1, SMALL_GAP), 2.5)  # falls back to the absolute ones


def test_rerank_disagreement_on_any_reported_shift():
    assert risk(facts([res(1, 0.9, pre_rerank_rank=4), *GOOD[1:]])) == ((RERANK_DISAGREEMENT,), 1.5)
    assert risk(facts([res(1, 0.9, pre_rerank_rank=3), *GOOD[1:]])) == ((), 1.0)  # shift 2 < 3
    # Documented choice: a result outside the admitted set counts too (pushed out of the context).
    assert risk(facts([*GOOD, res(9, 0.1, pre_rerank_rank=1)])) == ((RERANK_DISAGREEMENT,), 1.5)
    assert risk(facts(GOOD), config=RiskConfig(rerank_shift=1)) == ((), 1.0)  # no shift reported


def test_new_terms_count_comes_from_the_caller():
    assert risk(facts(GOOD), new_terms=1) == ((NEW_TERMS,), 2.0)
    assert risk(facts(GOOD), new_terms=2, config=RiskConfig(new_terms_min=3)) == ((), 1.0)


def test_feedback_signals():
    feedback = {"rephrased": True, "correction": True, "thumbs": -1}
    assert risk(facts(GOOD, feedback=feedback)) == ((REPHRASED, CORRECTION, THUMBS_DOWN), 7.0)
    for thumbs in (0, 1, None):
        assert risk(facts(GOOD, feedback={"thumbs": thumbs})) == ((), 1.0)


def test_stale_counts_admitted_results_only():
    assert risk(facts([res(1, 0.9, status="superseded"), *GOOD[1:]])) == ((STALE,), 3.0)
    assert risk(facts([*GOOD, res(4, 0.6, status="superseded")])) == ((), 1.0)  # rank 4 > cutoff 3


def test_unauthorized_result_or_missing_claims():
    assert risk(facts([res(1, 0.9, tenant="t2"), *GOOD[1:]])) == ((UNAUTHORIZED,), 5.0)
    missing = {"tenant": "t1", "groups": [], "claims_present": False}
    assert risk(facts(GOOD, principal=missing)) == ((UNAUTHORIZED,), 5.0)
    assert risk(facts(principal=missing)) == ((ZERO_RESULT,), 3.0)  # nothing served, no risk


def test_rare_slice_needs_a_reference_mix():
    ref = RiskReference(query_type_share={"lexical": 0.9, "multi_hop": 0.03, "unknown": 0.07})
    assert risk(facts(GOOD, qtype="multi_hop"), reference=ref) == ((RARE_SLICE,), 2.0)
    assert risk(facts(GOOD, qtype="lexical"), reference=ref) == ((), 1.0)
    assert risk(facts(GOOD, qtype="temporal"), reference=ref) == ((RARE_SLICE,), 2.0)  # absent: share 0
    assert risk(facts(GOOD), reference=ref) == ((), 1.0)  # missing type is "unknown", share 0.07
    assert risk(facts(GOOD, qtype="multi_hop")) == ((), 1.0)  # no reference
    assert risk(facts(GOOD, qtype="multi_hop"), reference=RiskReference()) == ((), 1.0)  # empty mix


def test_a_baseline_gives_each_app_its_low_score_thresholds_and_the_query_type_mix():
    grid = Grid(0.0, 1.0, 10)  # fine cell i in 1..10 covers [(i - 1) / 10, i / 10)
    bins = Bins(grid, (0, 4, 8), (0.15, 0.5, 0.85))  # coarse bins: below 0.3, [0.3, 0.7), from 0.7
    types = Categories(("lexical", "multi_hop"))  # then `other`

    def app(top1: tuple[int, ...], gap: tuple[int, ...] | None, mix: tuple[int, ...]) -> AppBaseline:
        numeric = {TOP1_SCORE: FeatureReference(bins, top1, {})}
        if gap is not None:
            numeric[SCORE_GAP] = FeatureReference(bins, gap, {})
        return AppBaseline(numeric, {QUERY_TYPE: FeatureReference(types, mix, {})})

    apps = {
        "hr": app((5, 40, 55), (10, 30, 60), (80, 15, 5)),  # 10 % of 100 lies in the middle bin; the first
        "legal": app((0, 5, 95), None, (50, 0, 50)),  # 10 % lies in the last bin, which has no upper edge
    }
    baseline = Baseline(name="b", version="0" * 16, days=("2026-11-30",), n_bins=3, max_categories=2, calibration=ThresholdSettings(), apps=apps)
    ref = reference_from(baseline)
    assert ref.top1_low == pytest.approx({"hr": 0.7})  # legal keeps the configured threshold (grid edges: linspace)
    assert ref.gap_small == pytest.approx({"hr": 0.3})  # reached exactly at the first bin's edge
    assert ref.query_type_share == {"lexical": 130 / 200, "multi_hop": 15 / 200}  # `other` counts, has no share
    # the signals read it per app: 0.65 is below hr's 0.7, and multi_hop is rare (7.5 % > 5 % is not)
    hr = facts([res(1, 0.65), res(2, 0.1)], app="hr", qtype="multi_hop")
    assert risk(hr, reference=ref) == ((LOW_TOP1,), 2.0)  # looked up under the event's app by default
    assert assess(hr, 0, CONFIG, ref, "other").signals == ()  # an app the baseline lacks: the absolute 0.3
    assert assess(hr, 0, CONFIG, ref, "hr").signals == (LOW_TOP1,)
    assert assess(hr, 0, RiskConfig(rare_share=0.1), ref, "hr").signals == (LOW_TOP1, RARE_SLICE)
    legal = facts([res(1, 0.65), res(2, 0.1)], app="legal", qtype="temporal")  # the absolute 0.3 stays
    assert assess(legal, 0, CONFIG, ref, "legal").signals == (RARE_SLICE,)


def test_weights_are_configuration():
    config = RiskConfig(weights={THUMBS_DOWN: 0.0, STALE: 10})
    assert risk(facts(GOOD, feedback={"thumbs": -1}), config=config) == ((THUMBS_DOWN,), 1.0)
    assert risk(facts([res(1, 0.9, status="draft"), *GOOD[1:]]), config=config) == ((STALE,), 11.0)
    for bad in ({"nonsense": 1.0}, {STALE: -1.0}, {STALE: math.inf}, {STALE: math.nan}):
        with pytest.raises(ValueError):
            RiskConfig(weights=bad)
    assert RiskReference.from_dict(orjson.loads(orjson.dumps(RiskReference({"a": 1.0}, {}, {"x": 0.5}).to_dict()))) == (
        RiskReference({"a": 1.0}, {}, {"x": 0.5})
    )


@FAST
@given(events())
def test_weight_is_one_plus_the_fired_weights_in_a_fixed_order(doc):
    f = facts_of(decode(orjson.dumps(doc)).event)
    ref = RiskReference(query_type_share={"lexical": 0.5, "paraphrase": 0.01})
    r = assess(f, len(doc["query"].get("terms", [])) % 3, CONFIG, ref)
    assert list(r.signals) == [s for s in SIGNALS if s in r.signals]
    assert r.weight == pytest.approx(1 + sum(CONFIG.weight(s) for s in r.signals))
    assert r.weight >= 1


# --------------------------------------------------------------------------- weeks


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "moment, week",
    [
        ("2026-11-25T12:00:00", "2026-W48"),
        ("2026-12-31T23:59:59", "2026-W53"),  # 2026 begins on a Thursday: 53 weeks
        ("2027-01-01T00:00:00", "2026-W53"),
        ("2027-01-04T00:00:00", "2027-W01"),
        ("2021-01-03T12:00:00", "2020-W53"),
        ("2024-12-30T00:00:00", "2025-W01"),  # a Monday of December in next year's week 1
        ("2024-12-29T23:59:59", "2024-W52"),
    ],
)
def test_iso_week_of_the_utc_date(moment, week):
    assert iso_week(at(moment)) == week
    start, end = week_bounds(week)
    assert start <= at(moment) < end and end - start == 7 * 86400
    assert iso_week(start) == iso_week(end - 1) == week != iso_week(end)
    assert datetime.fromtimestamp(start, UTC).strftime("%a %H:%M:%S") == "Mon 00:00:00"


def test_iso_week_uses_utc_not_the_offset_of_the_event():
    assert iso_week(datetime.fromisoformat("2027-01-03T23:30:00-05:00").timestamp()) == "2027-W01"


def test_shift_week_and_bad_weeks():
    assert shift_week("2026-W53", 1) == "2027-W01" and shift_week("2027-W01", -1) == "2026-W53"
    assert shift_week("2026-W48", 0) == "2026-W48" and shift_week("2026-W48", -52) == "2025-W48"
    for bad in ("2025-W53", "2026-48", "2026-W1", "2026-W00", "26-W10"):
        with pytest.raises(ValueError):
            week_bounds(bad)


# --------------------------------------------------------------------------- uniforms and holdout


def test_uniform_is_stable_and_in_the_half_open_unit_interval():
    # Pinned: a change here would give every replayed event another priority.
    assert uniform("e1", "2026-W48") == 0.35018471593006706
    assert uniform("e1", "2026-W48") != uniform("e1", "2026-W49") != uniform("e1", "2026-W48", "s")
    assert _unit(bytes(8)) == 2.0**-53 and _unit(b"\xff" * 8) == 1.0  # never 0, 1 reachable
    assert uniform("a", "2026-W48", "b:") != uniform("a", "2026-W48", "b")  # salt length-prefixed


def test_uniform_is_roughly_uniform():
    n = 10_000
    us = sorted(uniform(f"ev-{i}", "2026-W48", "ks") for i in range(n))
    assert us[0] > 0 and us[-1] <= 1
    ks = max(max((i + 1) / n - u, u - i / n) for i, u in enumerate(us))
    assert ks < 0.03  # the 0.1 % critical value is 0.0195
    assert abs(sum(us) / n - 0.5) < 0.01


def test_holdout_share_and_independence_from_sampling():
    ids = [f"query{i:06d}" for i in range(10_000)]
    held = [q for q in ids if in_holdout(q)]
    assert abs(len(held) / len(ids) - 0.10) < 0.015
    assert not any(in_holdout(q, 0.0) for q in ids[:100]) and all(in_holdout(q, 1.0) for q in ids[:100])
    assert in_holdout(ids[0], 0.3, "s") == in_holdout(ids[0], 0.3, "s")  # stable
    # Another hash domain: among held-out ids, as many have a small sampling uniform as anywhere.
    small = sum(uniform(q, "2026-W48") <= 0.1 for q in held) / len(held)
    assert abs(small - 0.10) < 0.04
    with pytest.raises(ValueError):
        in_holdout("query000", 1.5)
