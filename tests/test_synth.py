"""The synthetic traffic generator: determinism, clean traffic, incidents, invalid lines."""

from __future__ import annotations

import functools
import itertools
import statistics
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.decoder import decode
from agent.core.model import Event
from agent.core.reasons import RejectedEvent
from agent.core.rules import epoch
from agent.synth import (
    DEFAULT_START,
    INCIDENT_KINDS,
    INCIDENT_MINUTES,
    INVALID_KINDS,
    ScheduledIncident,
    generate,
    parse_incident,
)

STALE_STATUSES = {"superseded", "draft", "tombstoned"}
SEED = 11
CLEAN_SEED = 12
# ScheduledIncident streams: 1 event/s puts 600 events in the 10-minute window, enough for shares and quick to decode.
RATE = 1.0
AT = 1.0
SPAN = 12 * 60


# --- the per-event definitions, computed here from decoded events -----------------


def events_of(lines: list[bytes]) -> list[Event]:
    return [decode(line).event for line in lines]


def admitted(event: Event) -> list:
    return [r for r in event.results if (r.packed if r.packed is not None else r.rank <= event.cutoff_k)]


def unauthorized(event: Event) -> int:
    tenant, groups = event.principal.tenant, set(event.principal.groups)
    return sum(
        1
        for r in event.results
        if (r.tenant is not None and r.tenant != tenant) or (r.acl and groups.isdisjoint(r.acl))
    )


def at_risk(event: Event) -> bool:
    return not event.principal.claims_present and bool(event.results)


def is_stale(result, ts: float) -> bool:
    return (
        result.status in STALE_STATUSES
        or (result.expires_at is not None and epoch(result.expires_at) <= ts)
        or (result.effective_date is not None and epoch(result.effective_date) > ts)
    )


def stale(event: Event) -> int:
    ts = event.ts.timestamp()
    return sum(1 for r in admitted(event) if is_stale(r, ts))


def stale_conflict(event: Event) -> bool:
    ts = event.ts.timestamp()
    bad = {r.parent_id for r in admitted(event) if is_stale(r, ts)}
    good = {r.parent_id for r in admitted(event) if not is_stale(r, ts)}
    return bool(bad & good)


def filter_zero(event: Event) -> bool:
    s = event.stages
    return s is not None and (s.candidates or 0) > 0 and s.after_filter == 0


def minute(event: Event, start: datetime = DEFAULT_START) -> float:
    return (event.ts - start).total_seconds() / 60


def inside(event: Event) -> bool:
    return AT <= minute(event) < AT + INCIDENT_MINUTES


def share(events: list[Event], predicate) -> float:
    return sum(map(predicate, events)) / len(events)


def top_source(events: list[Event]) -> tuple[str, float]:
    """The source holding most admitted results over these events, and its share."""
    sources = Counter(r.source for e in events for r in admitted(e))
    name, count = sources.most_common(1)[0]
    return name, count / sum(sources.values())


def dominance(event: Event) -> float:
    parents = Counter(r.parent_id for r in admitted(event))
    return max(parents.values()) / sum(parents.values())


def new_term_rate(events: list[Event], vocabulary: set[str]) -> float:
    terms = [t for e in events for t in e.query.terms]
    return sum(t not in vocabulary for t in terms) / len(terms)


# --- fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def clean_lines() -> list[bytes]:
    return list(generate(3000, CLEAN_SEED))


@pytest.fixture(scope="module")
def clean(clean_lines) -> list[Event]:
    return events_of(clean_lines)


@functools.cache
def stream(kind: str | None) -> tuple[list[bytes], list[Event]]:
    """Lines and events of the incident test stream, one incident of `kind` at AT or none; built once."""
    if kind is None:
        lines = list(generate(SPAN, SEED, rate=RATE))
        return lines, events_of(lines)
    clean_lines, clean = stream(None)
    lines = list(generate(SPAN, SEED, rate=RATE, incidents=[ScheduledIncident(kind, AT)]))
    # Only decode what the incident changed: the rest is byte-identical (asserted below).
    return lines, [e if line == c else decode(line).event for line, c, e in zip(lines, clean_lines, clean)]


def split(kind: str) -> tuple[list[Event], list[Event]]:
    events = stream(kind)[1]
    return [e for e in events if inside(e)], [e for e in events if not inside(e)]


# --- determinism --------------------------------------------------------------------


def test_same_arguments_give_the_same_bytes():
    args = dict(events=200, seed=3, rate=5.0, incidents=[ScheduledIncident("leak", 0.2)], invalid_rate=0.05)
    first = list(generate(**args))
    assert first == list(generate(**args))
    assert len(first) == 200
    assert first != list(generate(**{**args, "seed": 4}))
    assert list(generate(50, 3)) == list(generate(50, 3, start=DEFAULT_START))


def test_lines_are_compact_utf8_json_without_newline(clean_lines):
    for line in clean_lines[:200]:
        assert isinstance(line, bytes) and not line.endswith(b"\n")
        assert line == orjson.dumps(orjson.loads(line))


def test_event_time_follows_rate_and_start():
    start = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    events = events_of(list(generate(300, 5, start=start, rate=10.0)))
    for i, event in enumerate(events):
        assert abs((event.ts - start).total_seconds() - i / 10.0) < 30
    assert events[0].ts >= start
    naive = list(generate(20, 5, start=datetime(2026, 3, 1, 10, 0), rate=10.0))
    assert naive == list(generate(20, 5, start=start, rate=10.0))


def test_an_endless_stream_is_lazy():
    lines = generate(10**9, 1, start=datetime(2026, 6, 1, tzinfo=UTC))
    assert [decode(line).event.event_id for line in itertools.islice(lines, 3)]


# --- clean traffic --------------------------------------------------------------------


def test_clean_traffic_decodes_and_never_pages(clean, clean_lines):
    assert len(clean) == 3000
    unknown = sum(decode(line).unknown_fields for line in clean_lines)
    assert 0 < unknown < 0.05 * len(clean_lines)  # a few producers add fields the agent ignores
    assert len({e.event_id for e in clean}) == len(clean)
    for event in clean:
        assert event.principal.claims_present is True
        assert unauthorized(event) == 0, event.event_id
        assert not at_risk(event)
        assert stale(event) == 0, event.event_id


def test_clean_traffic_is_internally_consistent(clean):
    for event in clean:
        assert 3 <= event.cutoff_k <= 8
        assert len(event.results) <= 20
        s = event.stages
        after_rerank = s.after_rerank if s.after_rerank is not None else len(event.results)
        assert s.candidates >= s.after_filter >= after_rerank >= s.packed == len(admitted(event))
        assert len(event.results) <= s.after_filter
        assert sum(f.removed for f in event.filters) == s.candidates - s.after_filter
        assert len({r.chunk_id for r in event.results}) == len(event.results)
        if event.feedback is not None:
            assert set(event.feedback.cited) <= {r.chunk_id for r in admitted(event)}


def test_clean_traffic_mixes_apps_tenants_sources_and_slices(clean):
    assert {e.app for e in clean} == {"hr-assistant", "support-bot", "docs-search"}
    assert len({e.principal.tenant for e in clean}) == 4
    assert any(not e.principal.groups for e in clean) and any(len(e.principal.groups) > 1 for e in clean)
    assert len({r.source for e in clean for r in admitted(e)}) >= 8 and top_source(clean)[1] < 0.35
    assert {e.query.type for e in clean} >= {
        "lexical", "paraphrase", "multi_hop", "temporal", "numeric", "no_answer", "ambiguous", "follow_up", None
    }
    languages = Counter(e.query.language for e in clean)
    assert {"en", "de", "fr", "ja"} <= set(languages) and languages["en"] / len(clean) > 0.6
    queries = Counter(e.query.id for e in clean)
    assert queries.most_common(1)[0][1] > 5 and len(queries) > 1000  # popular questions repeat, most do not
    assert all(len(t) >= 16 for e in clean for t in [e.query.id, *e.query.terms, *e.principal.groups])


def test_clean_results_vary_like_real_producers(clean, clean_lines):
    assert any(r.rerank_score is not None and r.pre_rerank_rank != r.rank for e in clean for r in e.results)
    assert any(r.packed is not None for e in clean for r in e.results)
    assert any(r.packed is False and r.rank <= e.cutoff_k for e in clean for r in e.results)
    assert any(e.results and e.results[0].rank > 1 for e in clean)
    listed = [[r["rank"] for r in orjson.loads(line)["results"]] for line in clean_lines]
    assert any(ranks != sorted(ranks) for ranks in listed)
    assert any(dominance(e) > 0.5 for e in clean if len(admitted(e)) >= 3)
    fingerprints = [[r.fingerprint for r in admitted(e)] for e in clean]
    assert any(len(set(f)) < len(f) for f in fingerprints)
    dates = [r.effective_date for e in clean for r in e.results]
    assert any(len(d) == 10 for d in dates) and any(d.endswith("Z") for d in dates)
    assert any(d[-6] in "+-" and not d.endswith("+00:00") for d in dates if len(d) > 10)
    assert any(r.expires_at for e in clean for r in admitted(e))
    statuses = Counter(r.status for e in clean for r in admitted(e))
    assert statuses["current"] > 0.8 * sum(statuses.values()) and statuses[None] and statuses["unknown"]
    below = [r for e in clean for r in e.results if r not in admitted(e)]
    assert any(r.status == "superseded" for r in below)


def test_clean_traffic_feeds_every_signal(clean):
    assert 0.01 < share(clean, lambda e: not e.results) < 0.08
    no_answer = [e for e in clean if e.query.type == "no_answer"]
    assert share(no_answer, lambda e: not e.results) > 0.15
    assert 0 < share(clean, filter_zero) < 0.01
    statuses = Counter(f.status for e in clean for f in e.filters)
    assert statuses["applied"] and statuses["skipped"] and statuses["error"]
    assert sum(f.removed for e in clean for f in e.filters) > 0
    feedback = [e.feedback for e in clean if e.feedback is not None]
    assert 0.03 < len(feedback) / len(clean) < 0.2
    assert any(f.rephrased for f in feedback) and any(f.correction for f in feedback)
    assert {-1, 1} <= {f.thumbs for f in feedback} and any(f.cited for f in feedback)
    assert all(e.latency_ms > 0 for e in clean)
    tops = {
        app: statistics.mean(e.results[0].score for e in clean if e.app == app and e.results)
        for app in ("hr-assistant", "support-bot", "docs-search")
    }
    assert 0.5 < tops["hr-assistant"] < 0.9 and tops["docs-search"] > 5  # cosine and BM25 scales
    no_answer_top = statistics.mean(e.results[0].score for e in no_answer if e.results and e.app != "docs-search")
    assert no_answer_top < tops["hr-assistant"] - 0.1


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(-(2**40), 2**40), events=st.integers(0, 30), rate=st.floats(0.01, 500))
def test_any_clean_stream_decodes_and_never_pages(seed, events, rate):
    lines = list(generate(events, seed, rate=rate))
    assert len(lines) == events
    for event in events_of(lines):
        assert unauthorized(event) == 0 and not at_risk(event) and stale(event) == 0


# --- incidents ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", INCIDENT_KINDS)
def test_incident_touches_only_some_events_inside_its_window(kind):
    clean_lines, clean = stream(None)
    changed = [line != before for line, before in zip(stream(kind)[0], clean_lines)]
    assert not any(c for c, e in zip(changed, clean) if not inside(e))
    touched = sum(c for c, e in zip(changed, clean) if inside(e)) / sum(map(inside, clean))
    assert 0.04 < touched < 0.35


def test_leak_serves_unauthorized_results_inside_the_window():
    during, outside = split("leak")
    assert sum(unauthorized(e) > 0 for e in during) > 25
    assert sum(at_risk(e) for e in during) > 3
    assert any(r.tenant not in (None, e.principal.tenant) for e in during for r in e.results)
    assert any(
        r.tenant in (None, e.principal.tenant) and r.acl and set(r.acl).isdisjoint(e.principal.groups)
        for e in during if e.principal.claims_present for r in e.results
    )
    assert not any(unauthorized(e) or at_risk(e) for e in outside)


def test_stale_admits_superseded_content_and_conflicts_inside_the_window():
    during, outside = split("stale")
    assert sum(stale(e) > 0 for e in during) > 40
    assert sum(stale_conflict(e) for e in during) > 10
    assert {r.status for e in during for r in admitted(e)} >= {"superseded"}
    assert not any(stale(e) for e in outside)


def models(events: list[Event]) -> set[str | None]:
    return {e.pipeline.embedding_model for e in events if e.pipeline}


def test_score_drift_renames_the_model_and_lowers_scores_inside_the_window():
    during, outside = split("score-drift")
    new = models(during) - models(outside)
    assert new and not (models(stream(None)[1]) & new)
    drifted = [e.results[0].score for e in during if e.pipeline.embedding_model in new and e.results]
    before = [e.results[0].score for e in outside if e.pipeline.embedding_model and e.results]
    assert len(drifted) > 30
    assert statistics.mean(drifted) < statistics.mean(before) - 0.15
    assert statistics.pstdev(drifted) < statistics.pstdev(before)


def test_source_dominance_concentrates_admitted_results_inside_the_window():
    during, outside = split("source-dominance")
    (name, top_share), (usual, usual_share) = top_source(during), top_source(outside)
    assert name != usual and top_share > usual_share + 0.05
    assert statistics.mean(dominance(e) for e in during if len(admitted(e)) >= 3) > 0.1 + statistics.mean(
        dominance(e) for e in outside if len(admitted(e)) >= 3
    )


def test_filter_outage_zeroes_results_inside_the_window():
    during, outside = split("filter-outage")
    assert share(during, filter_zero) > 0.15 and share(outside, filter_zero) < 0.02
    assert all(not e.results for e in during if filter_zero(e))
    errors = Counter(inside(e) for e in stream("filter-outage")[1] for f in e.filters if f.status == "error")
    assert errors[True] > 10 * max(1, errors[False])


def test_new_terms_surge_inside_the_window(clean):
    # A frozen baseline from another seed: the query population belongs to the deployment, not the seed.
    vocabulary = {t for e in clean for t in e.query.terms}
    during, outside = split("new-terms")
    # Zipf tails make a small baseline miss a tenth of clean terms; the surge adds a fixed share on top.
    assert new_term_rate(outside, vocabulary) < 0.2
    assert new_term_rate(during, vocabulary) > new_term_rate(outside, vocabulary) + 0.15


# --- invalid lines --------------------------------------------------------------------


def test_invalid_lines_replace_events_and_cycle_through_reasons():
    lines = list(generate(SPAN, SEED, rate=RATE, invalid_rate=0.1))
    reasons = []
    for line, clean in zip(lines, stream(None)[0]):
        if line != clean:  # every other line is its clean event, byte for byte
            with pytest.raises(RejectedEvent) as info:
                decode(line)
            reasons.append(info.value.reason)
    assert 0.065 < len(reasons) / len(lines) < 0.135
    kinds = [reason.split(":", 1)[0] for reason in reasons]
    assert kinds == [INVALID_KINDS[i % 4] for i in range(len(kinds))]
    assert {r for r in reasons if r.startswith("invalid_field")} == {
        "invalid_field:cutoff_k", "invalid_field:results[0].rank"
    }


def test_privacy_suspect_lines_name_the_hashed_field():
    details = []
    for line in generate(400, 2, invalid_rate=1.0):
        try:
            decode(line)
        except RejectedEvent as exc:
            if exc.reason == "pii_suspected":
                details.append(exc.detail)
    assert len(details) == 100
    assert set(details) == {"query.id", "principal.groups[0]"}


def test_invalid_rate_bounds():
    assert all(_rejects(line) for line in generate(50, 1, invalid_rate=1.0))
    assert not any(_rejects(line) for line in generate(50, 1, invalid_rate=0.0))


def _rejects(line: bytes) -> bool:
    try:
        decode(line)
    except RejectedEvent:
        return True
    return False


# --- arguments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [("leak@30", ScheduledIncident("leak", 30.0)), (" score-drift@1.5 ", ScheduledIncident("score-drift", 1.5)),
     ("new-terms@0", ScheduledIncident("new-terms", 0.0))],
)
def test_parse_incident(text, expected):
    assert parse_incident(text) == expected
    assert isinstance(parse_incident(text).minute, float)


@pytest.mark.parametrize(
    "text, message",
    [("leak", "expected KIND@MINUTE"), ("flood@3", "valid kinds: leak, stale, score-drift"),
     ("leak@soon", "not a number"), ("leak@-1", ">= 0"), ("leak@nan", ">= 0"), ("leak@inf", ">= 0"),
     ("@3", "unknown kind")],
)
def test_parse_incident_rejects_bad_input(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_incident(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [dict(events=-1), dict(rate=0.0), dict(rate=float("inf")), dict(invalid_rate=1.5), dict(incidents=["leak@3"])],
)
def test_generate_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        generate(**{"events": 10, "seed": 1, **kwargs})


def test_incident_rejects_unknown_kind():
    with pytest.raises(ValueError, match="valid kinds"):
        ScheduledIncident("flood", 3.0)
