"""Hand-computed cases for every per-event definition (docs/metrics.md).

Every event goes the real way: dict -> JSON bytes -> `agent.core.decoder.decode`
-> `PartitionState`, and the numbers are read from the tally keys and from
`summarize(state.totals(), {})`.
"""

from __future__ import annotations

import orjson
import pytest

from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.reasons import RejectedEvent
from agent.core.rules import epoch
from agent.core.state import PartitionState
from agent.core.summary import summarize
from agent.core.tally import Buckets, Histogram

TS = "2024-03-11T12:00:00Z"  # 1710158400
APP = "app"


# --------------------------------------------------------------------------- builders


def res(rank: int, score: float = 0.5, **fields) -> dict:
    """One result; chunk/parent/source default from the rank."""
    doc = {"chunk_id": f"c{rank}", "parent_id": f"p{rank}", "source": "wiki", "rank": rank, "score": score}
    doc.update(fields)
    return doc


_counter = iter(range(10**9))


def ev(results=(), *, ts: str = TS, app: str = APP, cutoff_k: int = 3, tenant: str = "t1", groups=(), **extra) -> dict:
    """One retrieval.v1 event as a dict; `extra` sets or overrides top-level fields."""
    doc = {
        "schema": "retrieval.v1",
        "event_id": f"ev-{next(_counter)}",
        "ts": ts,
        "app": app,
        "query": {"id": "q0000000"},
        "principal": {"tenant": tenant, "groups": list(groups)},
        "cutoff_k": cutoff_k,
        "results": list(results),
    }
    doc.update(extra)
    return doc


def run(*docs: dict, config: CoreConfig | None = None) -> PartitionState:
    state = PartitionState(config or CoreConfig())
    for doc in docs:
        state.process(orjson.dumps(doc))
    return state


def totals(*docs: dict, config: CoreConfig | None = None) -> dict:
    return run(*docs, config=config).totals()


def summary(*docs: dict, config: CoreConfig | None = None) -> dict:
    return summarize(totals(*docs, config=config), {})


def family(tally: dict, name: str) -> dict:
    """Every key of one family, without the name."""
    return {k[1:]: v for k, v in tally.items() if k[0] == name}


def hist(tally: dict, name: str, label: str = APP) -> tuple[dict, float, float]:
    """(non-cumulative buckets by `le`, sum, count) of one histogram series."""
    buckets = {k[2]: v for k, v in tally.items() if k[0] == name + "_bucket" and k[1] == label}
    return buckets, tally.get((name + "_sum", label), 0), tally.get((name + "_count", label), 0)


# --------------------------------------------------------------------------- zero results


def test_zero_result_and_volume():
    t = totals(ev([]), ev([res(1), res(2)]), ev([res(1)]), ev([]))
    assert t[("retrievals", APP)] == 4
    assert t[("results", APP)] == 3
    assert t[("zero_result_retrievals", APP)] == 2
    buckets, total, count = hist(t, "results_per_retrieval")
    assert buckets == {"0.0": 2, "1.0": 1, "2.0": 1}
    assert (total, count) == (3, 4)
    s = summarize(t, {})
    assert s["events"]["processed"] == 4
    assert s["zero_result_rate"] == 0.5


def test_filter_caused_zero():
    docs = [
        ev([], stages={"candidates": 5, "after_filter": 0}),  # yes
        ev([], stages={"candidates": 5, "after_filter": 0, "after_rerank": 0, "packed": 0}),  # yes
        ev([], stages={"candidates": 0, "after_filter": 0}),  # no: nothing to filter
        ev([], stages={"candidates": 5, "after_filter": 2}),  # no: filters left some
        ev([], stages={"candidates": 5}),  # no: after_filter unknown
        ev([], stages={"after_filter": 0}),  # no: candidates unknown
        ev([]),  # no: no stages
        ev([res(1)], stages={"candidates": 5, "after_filter": 1}),  # no
    ]
    t = totals(*docs)
    assert t[("filter_zero_retrievals", APP)] == 2
    assert t[("zero_result_retrievals", APP)] == 7
    s = summarize(t, {})
    assert s["filter_zero_rate"] == 2 / 8
    assert s["zero_result_rate"] == 7 / 8


def test_zero_only_input_has_no_scores():
    s = summary(ev([]), ev([]))
    assert s["mean_top1_score"] is None
    assert s["mean_admitted_score"] is None
    assert s["mean_score_gap"] is None
    assert s["mean_parent_diversity"] is None
    assert s["admitted_results"] == 0


# --------------------------------------------------------------------------- scores


def test_top1_gap_and_admitted_mean_use_rank_not_position():
    # Ranks start at 3 and are listed out of order; cutoff 5 admits ranks 3 and 5.
    doc = ev([res(7, 0.25), res(3, 0.875), res(5, 0.625)], cutoff_k=5)
    t = totals(doc)
    buckets, total, count = hist(t, "top1_score")
    assert (total, count) == (0.875, 1)
    assert buckets == {"0.9": 1}
    buckets, total, count = hist(t, "score_gap")
    assert (total, count) == (0.875 - 0.625, 1)
    assert buckets == {"0.5": 1}
    buckets, total, count = hist(t, "admitted_score")
    assert (total, count) == ((0.875 + 0.625) / 2, 1)
    assert buckets == {"0.8": 1}
    s = summarize(t, {})
    assert s["mean_top1_score"] == 0.875
    assert s["mean_score_gap"] == 0.25
    assert s["mean_admitted_score"] == 0.75


def test_scores_over_several_events():
    docs = [
        ev([res(1, 0.5), res(2, 0.25), res(3, 0.125), res(4, 1.0)], cutoff_k=2),  # top1 .5, gap .25, A mean .375
        ev([res(2, 0.75)], cutoff_k=1),  # top1 .75, no gap, A empty (rank 2 > 1)
        ev([res(1, 0.25), res(2, 0.5)], cutoff_k=3),  # top1 .25, gap -.25, A mean .375
        ev([]),
    ]
    t = totals(*docs)
    assert hist(t, "top1_score")[1:] == (1.5, 3)
    assert hist(t, "score_gap")[1:] == (0.0, 2)
    assert hist(t, "score_gap")[0] == {"0.5": 1, "0.01": 1}  # a negative gap goes in the lowest bucket
    assert hist(t, "admitted_score")[1:] == (0.75, 2)
    s = summarize(t, {})
    assert s["mean_top1_score"] == 0.5
    assert s["mean_score_gap"] == 0.0
    assert s["mean_admitted_score"] == 0.375


def test_admitted_set_default_and_packed_override():
    # cutoff 2: default A = ranks 1, 2; rank 2 packed=false leaves, rank 4 packed=true joins,
    # rank 3 packed=null keeps the default (out), rank 1 packed=true stays in.
    doc = ev(
        [
            res(1, 0.5, source="s1", packed=True),
            res(2, 0.25, source="s2", packed=False),
            res(3, 0.125, source="s3"),
            res(4, 1.0, source="s4", packed=True),
        ],
        cutoff_k=2,
    )
    t = totals(doc)
    assert family(t, "admitted_results") == {(APP, "s1"): 1, (APP, "s4"): 1}
    assert hist(t, "admitted_score")[1:] == (0.75, 1)
    s = summarize(t, {})
    assert s["admitted_results"] == 2
    assert s["mean_admitted_score"] == 0.75


def test_packed_false_everywhere_means_empty_admitted_set():
    t = totals(ev([res(1, packed=False), res(2, packed=False)], cutoff_k=5))
    assert family(t, "admitted_results") == {}
    assert hist(t, "admitted_score")[2] == 0
    assert hist(t, "top1_score")[2] == 1  # top-1 is over all results, not A
    assert hist(t, "parent_diversity_ratio")[2] == 0


# --------------------------------------------------------------------------- content age

DAY = 86400.0


def ages(t) -> tuple[dict, float, float]:
    return hist(t, "content_age_days")


def test_content_age_days_float_dates_and_offsets():
    # ts = 2024-03-11T12:00Z
    doc = ev(
        [
            res(1, effective_date="2024-03-01"),  # midnight UTC: 10.5 days
            res(2, effective_date="2024-03-11T06:00:00+05:30"),  # 00:30Z: 11.5 h
            res(3, effective_date="2024-03-10T20:00:00-08:00"),  # 04:00Z next day: 8 h
            res(4, effective_date="2024-03-11T12:00:00Z"),  # == ts: age 0
            res(5, effective_date="2020-01-01"),  # not admitted: no age
        ],
        cutoff_k=4,
    )
    t = totals(doc)
    buckets, total, count = ages(t)
    assert count == 4
    assert total == pytest.approx(10.5 + 11.5 / 24 + 8 / 24, rel=1e-12)
    assert buckets == {"30.0": 1, "1.0": 3}
    assert t.get(("not_yet_effective_results", APP), 0) == 0
    assert summarize(t, {})["mean_content_age_days"] == pytest.approx((10.5 + 19.5 / 24) / 4, rel=1e-12)


def test_content_age_event_ts_with_offset_and_date_only_effective():
    # ts 2024-03-10T20:00-08:00 is 2024-03-11T04:00Z; the date 2024-03-11 is 00:00Z: 4 hours old.
    t = totals(ev([res(1, effective_date="2024-03-11")], ts="2024-03-10T20:00:00-08:00"))
    _, total, count = ages(t)
    assert count == 1
    assert total == pytest.approx(4 / 24, rel=1e-12)
    # ts 2024-03-11T02:00+05:30 is 2024-03-10T20:30Z: the date 2024-03-11 (00:00Z) is after it.
    t = totals(ev([res(1, effective_date="2024-03-11")], ts="2024-03-11T02:00:00+05:30"))
    assert ages(t)[2] == 0
    assert t[("not_yet_effective_results", APP)] == 1
    assert t[("stale_results", APP)] == 1


def test_content_age_fractional_seconds():
    t = totals(ev([res(1, effective_date="2024-03-11T11:59:59.5Z")]))
    assert ages(t)[1] == pytest.approx(0.5 / DAY, rel=1e-9)


def test_not_yet_effective_has_no_age():
    doc = ev(
        [
            res(1, effective_date="2024-03-12"),  # after ts
            res(2, effective_date="2024-03-11T12:00:01Z"),  # one second after ts
            res(3, effective_date="2024-03-11T17:29:59+05:30"),  # 11:59:59Z: 1 s old
            res(4, effective_date="2024-03-13", packed=False),  # not admitted: not counted
        ],
        cutoff_k=4,
    )
    t = totals(doc)
    assert t[("not_yet_effective_results", APP)] == 2
    _, total, count = ages(t)
    assert count == 1
    assert total == pytest.approx(1 / DAY, rel=1e-9)
    assert summarize(t, {})["not_yet_effective_results"] == 2


def test_lowercase_t_and_z_in_effective_date_are_rfc3339():
    # RFC 3339 section 5.6 allows "t" and "z"; event.py's own date pattern accepts them.
    doc = ev([res(1, effective_date="2024-03-01t00:00:00z", expires_at="2024-03-20t00:00:00z")])
    try:
        decoded = decode(orjson.dumps(doc))
    except RejectedEvent as exc:  # pragma: no cover - this is the failure being reported
        pytest.fail(f"lowercase RFC 3339 date rejected: {exc.reason}")
    assert epoch(decoded.event.results[0].effective_date) == 1709251200.0
    t = totals(doc)
    assert ages(t)[1:] == (10.5, 1)


# --------------------------------------------------------------------------- sources


def test_source_hhi_and_top_share_over_events():
    docs = [
        ev([res(1, source="wiki"), res(2, source="wiki"), res(3, source="kb"), res(4, source="news")]),  # rank 4 out
        ev([res(1, source="kb"), res(2, source="news")]),
        ev([res(1, source="wiki"), res(2, source="blog", packed=False)]),
        ev([]),
    ]
    t = totals(*docs)
    assert family(t, "admitted_results") == {(APP, "wiki"): 3, (APP, "kb"): 2, (APP, "news"): 1}
    s = summarize(t, {})
    # shares 1/2, 1/3, 1/6: HHI = 1/4 + 1/9 + 1/36 = 7/18
    assert s["source_hhi"] == pytest.approx(7 / 18, rel=1e-12)
    assert s["top_source_share"] == pytest.approx(1 / 2, rel=1e-12)
    assert s["admitted_results"] == 6


def test_source_concentration_adds_across_apps():
    docs = [ev([res(1, source="a")], app="x"), ev([res(1, source="a"), res(2, source="b")], app="y")]
    s = summary(*docs)
    # a: 2, b: 1 -> shares 2/3, 1/3 -> HHI 5/9
    assert s["source_hhi"] == pytest.approx(5 / 9, rel=1e-12)
    assert s["top_source_share"] == pytest.approx(2 / 3, rel=1e-12)


def test_single_source_is_fully_concentrated():
    s = summary(ev([res(1), res(2), res(3)]))
    assert s["source_hhi"] == 1.0
    assert s["top_source_share"] == 1.0


def test_source_concentration_undefined_without_admitted_results():
    # Shares of zero admitted results are 0/0: summarize promises None when undefined.
    s = summary(ev([]), ev([res(1, packed=False)]))
    assert s["admitted_results"] == 0
    assert s["source_hhi"] is None
    assert s["top_source_share"] is None


def test_parent_diversity_and_duplicate_dominance():
    doc = ev(
        [
            res(1, parent_id="P"),
            res(2, parent_id="P"),
            res(3, parent_id="Q"),
            res(4, parent_id="P"),
            res(5, parent_id="R"),  # not admitted
            res(6, parent_id="S"),  # not admitted
        ],
        cutoff_k=4,
    )
    t = totals(doc)
    buckets, total, count = hist(t, "parent_diversity_ratio")
    assert (total, count) == (2 / 4, 1)
    assert buckets == {"0.5": 1}
    buckets, total, count = hist(t, "duplicate_dominance_ratio")
    assert (total, count) == (3 / 4, 1)
    assert buckets == {"0.8": 1}


def test_parent_diversity_mean_over_events():
    docs = [
        ev([res(1, parent_id="P"), res(2, parent_id="Q")]),  # 1.0, dominance 0.5
        ev([res(1, parent_id="P"), res(2, parent_id="P"), res(3, parent_id="P")]),  # 1/3, dominance 1.0
        ev([]),  # no A: no observation
    ]
    t = totals(*docs)
    assert hist(t, "parent_diversity_ratio")[1:] == (pytest.approx(4 / 3, rel=1e-12), 2)
    assert hist(t, "parent_diversity_ratio")[0] == {"1.0": 1, "0.4": 1}
    assert hist(t, "duplicate_dominance_ratio")[1:] == (1.5, 2)
    assert hist(t, "duplicate_dominance_ratio")[0] == {"0.5": 1, "1.0": 1}
    assert summarize(t, {})["mean_parent_diversity"] == pytest.approx(2 / 3, rel=1e-12)


def test_duplicate_fingerprints():
    doc = ev(
        [
            res(4, fingerprint="ab"),  # listed first, but rank 4 repeats rank 1: duplicate
            res(1, fingerprint="ab"),
            res(2, fingerprint="cd"),
            res(3, fingerprint="ab"),  # duplicate of rank 1
            res(5, fingerprint="ef"),  # unique
            res(6, fingerprint="cd"),  # duplicate, but not admitted: does not count
            res(7),  # no fingerprint
        ],
        cutoff_k=5,
    )
    t = totals(doc)
    assert t[("duplicate_fingerprint_results", APP)] == 2
    assert summarize(t, {})["duplicate_fingerprint_results"] == 2


def test_duplicate_fingerprint_needs_a_better_ranked_admitted_twin():
    doc = ev(
        [
            res(1, fingerprint="aa", packed=False),  # better ranked, but not in A
            res(2, fingerprint="aa"),  # first "aa" inside A: not a duplicate
            res(3),
            res(4),
        ],
        cutoff_k=3,
    )
    t = totals(doc)
    assert t.get(("duplicate_fingerprint_results", APP), 0) == 0


def test_duplicate_fingerprint_hex_is_case_insensitive():
    # Assumption: a hex fingerprint names the same bytes in either case.
    t = totals(ev([res(1, fingerprint="ABCDEF"), res(2, fingerprint="abcdef")]))
    assert t[("duplicate_fingerprint_results", APP)] == 1


# --------------------------------------------------------------------------- filters


def test_filter_outcomes():
    docs = [
        ev(
            [],
            filters=[
                {"name": "acl", "status": "applied", "removed": 3},
                {"name": "recency", "status": "skipped"},
                {"name": "dedupe", "status": "error"},
            ],
        ),
        ev(
            [res(1)],
            filters=[
                {"name": "acl", "status": "applied", "removed": 2},
                {"name": "recency", "status": "applied", "removed": 5},
            ],
        ),
        ev([res(1)]),
    ]
    t = totals(*docs)
    assert family(t, "filter_outcomes") == {
        ("acl", "applied"): 2,
        ("recency", "skipped"): 1,
        ("recency", "applied"): 1,
        ("dedupe", "error"): 1,
    }
    assert family(t, "filter_removed_chunks") == {("acl",): 5, ("recency",): 5, ("dedupe",): 0}
    assert summarize(t, {})["filters"] == {
        "acl": {"applied": 2, "skipped": 0, "error": 0, "removed": 5},
        "dedupe": {"applied": 0, "skipped": 0, "error": 1, "removed": 0},
        "recency": {"applied": 1, "skipped": 1, "error": 0, "removed": 5},
    }


# --------------------------------------------------------------------------- query mix


def q(qtype=None, language=None, terms=None) -> dict:
    query = {"id": "q0000000"}
    if qtype is not None:
        query["type"] = qtype
    if language is not None:
        query["language"] = language
    if terms is not None:
        query["terms"] = terms
    return query


def test_query_mix_shares_with_unknown():
    docs = [
        ev([], query=q("lexical", "en")),
        ev([], query=q("lexical", "de")),
        ev([], query=q(None, "en")),
        ev([], query=q("multi_hop")),
    ]
    t = totals(*docs)
    assert family(t, "query_type_retrievals") == {(APP, "lexical"): 2, (APP, "unknown"): 1, (APP, "multi_hop"): 1}
    s = summarize(t, {})
    assert s["query_type_share"] == {"lexical": 0.5, "multi_hop": 0.25, "unknown": 0.25}
    # Assumption: a missing language is "unknown", like a missing type.
    assert s["language_share"] == {"de": 0.25, "en": 0.5, "unknown": 0.25}


def test_language_tags_compare_case_insensitively():
    # Assumption: BCP 47 tags are case-insensitive, so en-US and en-us are one language.
    s = summary(ev([], query=q(language="en-US")), ev([], query=q(language="en-us")))
    assert s["language_share"] == {"en-us": 1.0}


T = [f"term{i:04d}" for i in range(10)]


def test_new_term_rate_within_and_across_events():
    docs = [
        ev([], query=q(terms=[T[0], T[1], T[0]])),  # new, new, seen (same event, earlier occurrence)
        ev([], query=q(terms=[T[1], T[2]])),  # seen, new
        ev([], query=q()),  # no terms: no occurrences
        ev([], query=q(terms=[T[2], T[2], T[3], T[0]])),  # seen, seen, new, seen
    ]
    t = totals(*docs)
    assert t[("query_terms", APP)] == 9
    assert t[("query_new_terms", APP)] == 4
    assert summarize(t, {})["new_term_rate"] == pytest.approx(4 / 9, rel=1e-12)


def test_new_term_rate_undefined_without_terms():
    assert summary(ev([]))["new_term_rate"] is None


# --------------------------------------------------------------------------- access


def test_unauthorized_results():
    doc = ev(
        [
            res(1, tenant="t1", acl=["grp00002", "grp00009"]),  # same tenant, shares g2: fine
            res(2, tenant="t2"),  # other tenant
            res(3, acl=["grp00003"]),  # acl disjoint from groups
            res(4, acl=[]),  # empty acl: open to the tenant
            res(5, tenant="t2", acl=["grp00003"]),  # both reasons: one result
            res(6, acl=["grp00007"]),  # not admitted (rank > cutoff): still counts
            res(7),  # nothing set: fine
        ],
        cutoff_k=5,
        tenant="t1",
        groups=["grp00001", "grp00002"],
    )
    t = totals(doc, ev([res(1, tenant="t1", acl=["grp00001"])], tenant="t1", groups=["grp00001"]))
    assert t[("unauthorized_results", APP)] == 4
    assert t[("unauthorized_retrievals", APP)] == 1
    s = summarize(t, {})
    assert (s["unauthorized_results"], s["unauthorized_events"]) == (4, 1)


def test_unauthorized_with_empty_groups():
    docs = [
        ev([res(1, acl=["grp00001"])], groups=[]),  # any non-empty acl is disjoint from no groups
        ev([res(1, acl=[])], groups=[]),  # open
        ev([res(1)], groups=[]),
    ]
    t = totals(*docs)
    assert t[("unauthorized_results", APP)] == 1
    assert t[("unauthorized_retrievals", APP)] == 1


def test_unauthorized_risk():
    docs = [
        ev([res(1)], principal={"tenant": "t1", "groups": [], "claims_present": False}),  # risk
        ev([res(1), res(2)], principal={"tenant": "t1", "groups": [], "claims_present": False}),  # risk
        ev([], principal={"tenant": "t1", "groups": [], "claims_present": False}),  # nothing served
        ev([res(1)], principal={"tenant": "t1", "groups": [], "claims_present": True}),
        ev([res(1)]),  # default true
    ]
    t = totals(*docs)
    assert t[("unauthorized_risk_retrievals", APP)] == 2
    assert t.get(("unauthorized_results", APP), 0) == 0
    assert summarize(t, {})["unauthorized_risk_events"] == 2


# --------------------------------------------------------------------------- freshness


def test_stale_results():
    doc = ev(
        [
            res(1, status="current"),
            res(2, status="superseded"),  # stale
            res(3, status="draft"),  # stale
            res(4, status="tombstoned"),  # stale
            res(5, status="unknown"),
            res(6, expires_at=TS),  # expires_at == ts: stale
            res(7, expires_at="2024-03-11T12:00:01Z"),  # still valid
            res(8, effective_date="2024-03-11T12:00:01Z"),  # not yet effective: stale
            res(9, expires_at="2024-03-11T17:00:00+05:30"),  # 11:30Z: stale
            res(10, expires_at="2024-03-11"),  # midnight UTC: stale
            res(11),
            res(12, status="superseded"),  # not admitted
            res(13, expires_at="2020-01-01"),  # not admitted
        ],
        cutoff_k=11,
    )
    t = totals(doc)
    assert t[("stale_results", APP)] == 7
    assert t[("not_yet_effective_results", APP)] == 1
    assert t.get(("stale_conflict_retrievals", APP), 0) == 0  # every parent differs
    assert summarize(t, {})["stale_results"] == 7


def test_stale_admitted_by_packed_only():
    doc = ev([res(1, status="draft", packed=False), res(5, status="draft", packed=True)], cutoff_k=2)
    assert totals(doc)[("stale_results", APP)] == 1


def test_stale_conflict():
    docs = [
        ev([res(1, parent_id="P", status="current"), res(2, parent_id="P", status="superseded")]),  # conflict
        ev([res(1, parent_id="P"), res(2, parent_id="P", expires_at="2024-01-01")]),  # conflict (expired)
        ev([res(1, parent_id="P"), res(2, parent_id="Q", status="superseded")]),  # different parents
        ev([res(1, parent_id="P", status="draft"), res(5, parent_id="P")], cutoff_k=3),  # fresh one not in A
        ev([res(1, parent_id="P", status="draft"), res(2, parent_id="P", status="tombstoned")]),  # all stale
    ]
    t = totals(*docs)
    assert t[("stale_conflict_retrievals", APP)] == 2
    assert t[("stale_results", APP)] == 6
    assert summarize(t, {})["stale_conflict_events"] == 2


# --------------------------------------------------------------------------- latency, rerank, feedback


def test_latency_histogram():
    docs = [
        ev([], latency_ms=10),  # 0.01 s: exactly the first bound
        ev([], latency_ms=10.5),  # 0.0105 s -> 0.025
        ev([], latency_ms=0),
        ev([], latency_ms=250),  # 0.25 s exactly
        ev([], latency_ms=12000),  # beyond the last bound
        ev([]),  # no latency: no observation
    ]
    t = totals(*docs)
    buckets, total, count = hist(t, "retrieval_latency_seconds")
    assert buckets == {"0.01": 2, "0.025": 1, "0.25": 1, "+Inf": 1}
    assert count == 5
    assert total == pytest.approx(0.01 + 0.0105 + 0.25 + 12.0, rel=1e-12)


def test_rerank_rank_shift():
    doc = ev(
        [
            res(1, pre_rerank_rank=4),  # 3
            res(2, pre_rerank_rank=2),  # 0
            res(3, pre_rerank_rank=1),  # 2, not admitted: every result counts
            res(4),  # no pre-rerank rank
            res(5, pre_rerank_rank=40),  # 35
        ],
        cutoff_k=2,
    )
    buckets, total, count = hist(totals(doc), "rerank_rank_shift")
    assert buckets == {"3.0": 1, "0.0": 1, "2.0": 1, "50.0": 1}
    assert (total, count) == (40, 4)


def test_feedback_signals():
    docs = [
        ev([res(1)], feedback={"rephrased": True, "thumbs": -1}),
        ev([res(1)], feedback={"correction": True, "thumbs": 1}),
        ev([res(1)], feedback={"thumbs": 0, "cited": ["c1"]}),
        ev([res(1)], feedback={"rephrased": True, "correction": True}),
        ev([res(1)]),
    ]
    assert family(totals(*docs), "feedback") == {
        (APP, "rephrased"): 2,
        (APP, "correction"): 2,
        (APP, "thumbs_down"): 1,
        (APP, "thumbs_up"): 1,
    }


# --------------------------------------------------------------------------- histogram buckets


def test_bucket_placement_and_le_labels():
    b = Buckets((0.5, 1, 2.5))
    assert b.labels == ("0.5", "1.0", "2.5", "+Inf")
    tally: dict = {}
    bins = Histogram("h", ("app",), "test", buckets="score").keys(("x",), b)
    values = (-3.0, 0.5, 0.5000001, 1.0, 1, 2.5, 2.5000001, 1e9)
    for value in values:
        bins.record(tally, value)
    assert family(tally, "h_bucket") == {("x", "0.5"): 2, ("x", "1.0"): 3, ("x", "2.5"): 1, ("x", "+Inf"): 2}
    assert tally[("h_count", "x")] == 8
    assert tally[("h_sum", "x")] == pytest.approx(-3 + 0.5 + 0.5000001 + 1 + 1 + 2.5 + 2.5000001 + 1e9)
    at_once: dict = {}
    bins.record_all(at_once, list(values))
    assert at_once.keys() == tally.keys() and all(at_once[k] == pytest.approx(tally[k]) for k in tally)


def test_bucket_bounds_must_increase():
    with pytest.raises(ValueError):
        Buckets((1.0, 0.5))
    with pytest.raises(ValueError):
        Buckets((1.0, 1.0))


def test_default_score_buckets_place_bounds_exactly():
    docs = [ev([res(1, s)]) for s in (0.0, 0.1, 0.3, 0.7, 1.0, 0.30000001, 1.5, -2.0)]
    buckets, _, count = hist(totals(*docs), "top1_score")
    assert count == 8
    assert buckets == {"0.0": 2, "0.1": 1, "0.3": 1, "0.4": 1, "0.7": 1, "1.0": 1, "+Inf": 1}


def test_configured_buckets_override_defaults():
    config = CoreConfig(buckets={"gap": (0.25, 0.5)})
    t = totals(ev([res(1, 1.0), res(2, 0.75)]), ev([res(1, 1.0), res(2, 0.0)]), config=config)
    assert hist(t, "score_gap")[0] == {"0.25": 1, "+Inf": 1}


def test_score_buckets_per_app():
    config = CoreConfig(score_buckets_by_app={"bm25": (1, 5, 10, 20)})
    docs = [
        ev([res(1, 7.5), res(2, 5.0)], app="bm25"),  # top1 7.5 -> 10.0; A mean 6.25 -> 10.0
        ev([res(1, 25.0)], app="bm25"),  # -> +Inf
        ev([res(1, 0.75)], app="dense"),  # default buckets -> 0.8
    ]
    t = totals(*docs, config=config)
    assert hist(t, "top1_score", "bm25")[0] == {"10.0": 1, "+Inf": 1}
    assert hist(t, "admitted_score", "bm25")[0] == {"10.0": 1, "+Inf": 1}
    assert hist(t, "top1_score", "dense")[0] == {"0.8": 1}
    assert hist(t, "admitted_score", "dense")[0] == {"0.8": 1}
    # the gap uses the shared gap buckets whatever the app
    assert hist(t, "score_gap", "bm25")[0] == {"+Inf": 1}


def test_every_histogram_is_consistent():
    """For each histogram series, the buckets add up to the count."""
    docs = [
        ev(
            [res(1, 0.9, effective_date="2024-01-01", pre_rerank_rank=2), res(2, 0.4, parent_id="p1")],
            latency_ms=42,
        ),
        ev([res(3, 0.2, pre_rerank_rank=1, effective_date="2023-01-01")], cutoff_k=5, latency_ms=900),
        ev([]),
    ]
    t = totals(*docs)
    counts = {k: v for k, v in t.items() if k[0].endswith("_count")}
    assert counts
    for key, count in counts.items():
        name = key[0][: -len("_count")]
        in_buckets = sum(v for k, v in t.items() if k[0] == name + "_bucket" and k[1:-1] == key[1:])
        assert in_buckets == count, name
