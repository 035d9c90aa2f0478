"""Unit tests of the `retrieval.v1` decoder (agent.core.decoder)."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from agent.core import rules
from agent.core.decoder import DEFAULT_MAX_BYTES, Decoded, decode
from agent.core.model import Event, encode
from agent.core.privacy import privacy_violation
from agent.core.reasons import RejectedEvent
from agent.core.rules import epoch

BASE = {
    "schema": "retrieval.v1",
    "event_id": "evt-0001",
    "ts": "2026-03-02T09:15:00Z",
    "app": "support-bot",
    "query": {"id": "qH7fK2mP9xQ4"},
    "principal": {"tenant": "acme", "groups": ["gA1b2C3d4E5f"]},
    "cutoff_k": 3,
    "results": [
        {"chunk_id": "c1", "parent_id": "p1", "source": "wiki", "rank": 1, "score": 0.9},
        {"chunk_id": "c2", "parent_id": "p2", "source": "wiki", "rank": 2, "score": 0.8},
    ],
}
RAW_EMAIL = "jane.doe@example.com"


def make(**top) -> dict:
    doc = copy.deepcopy(BASE)
    doc.update(top)
    return doc


def raw(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")


def reason_of(message: bytes, **kwargs) -> str:
    with pytest.raises(RejectedEvent) as info:
        decode(message, **kwargs)
    return info.value.reason


def with_unknown(doc: dict) -> dict:
    """The same event plus one unknown field: forces the decoder's slow path."""
    return {**doc, "x_unknown": 1}


# --------------------------------------------------------------------------- acceptance


def test_decodes_a_valid_event():
    decoded = decode(raw(BASE))
    assert isinstance(decoded, Decoded) and isinstance(decoded.event, Event)
    event = decoded.event
    assert decoded.unknown_fields == 0
    assert event.schema == "retrieval.v1" and event.event_id == "evt-0001" and event.app == "support-bot"
    assert event.ts == datetime(2026, 3, 2, 9, 15, tzinfo=UTC)
    assert event.query.id == "qH7fK2mP9xQ4" and event.query.terms == []
    assert event.principal.claims_present is True
    assert event.filters == [] and event.pipeline is None and event.latency_ms is None
    assert [r.chunk_id for r in event.results] == ["c1", "c2"]


def test_fast_and_slow_paths_build_the_same_event():
    fast = decode(raw(BASE))
    slow = decode(raw(with_unknown(BASE)))
    assert (fast.unknown_fields, slow.unknown_fields) == (0, 1)
    assert encode(fast.event) == encode(slow.event)


def test_encode_round_trips():
    doc = make(results=[{**BASE["results"][0], "effective_date": "2026-01-15", "packed": False}])
    event = decode(raw(doc)).event
    again = decode(encode(event)).event
    assert encode(again) == encode(event)
    assert again.results[0].effective_date == event.results[0].effective_date


# --------------------------------------------------------------------------- each reason


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        pytest.param(b"{", "invalid_json", id="truncated"),
        pytest.param(b"", "invalid_json", id="empty"),
        pytest.param(b"\xff\xfe{}", "invalid_json", id="not-utf8"),
        pytest.param(raw(BASE) + b"{}", "invalid_json", id="trailing-data"),
        pytest.param(b"[" * 5000 + b"]" * 5000, "invalid_json", id="too-deep"),
        pytest.param(b"[]", "invalid_field:$", id="array"),
        pytest.param(b'"retrieval.v1"', "invalid_field:$", id="string"),
        pytest.param(raw(make(schema="retrieval.v2")), "unsupported_schema", id="other-schema"),
        pytest.param(raw({k: v for k, v in BASE.items() if k != "schema"}), "invalid_field:schema", id="no-schema"),
        pytest.param(raw(make(schema=1)), "invalid_field:schema", id="schema-not-str"),
        pytest.param(raw(make(query={"id": "a b c d e"})), "pii_suspected", id="pii"),
        pytest.param(raw(make(cutoff_k=0)), "invalid_field:cutoff_k", id="cutoff"),
        pytest.param(raw(make(results=[{**BASE["results"][0], "rank": 0}])), "invalid_field:results[0].rank", id="rank"),
    ],
)
def test_reasons(message, reason):
    assert reason_of(message) == reason


def test_too_large():
    assert reason_of(raw(BASE), max_bytes=10) == "too_large"


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (make(event_id="evt 1"), "invalid_field:event_id"),
        (make(ts="2026-03-02T09:15:00"), "invalid_field:ts"),
        (make(app="Support"), "invalid_field:app"),
        (make(pipeline={"version": ""}), "invalid_field:pipeline.version"),
        (make(query={"id": "short"}), "invalid_field:query.id"),
        (make(query={"id": "qH7fK2mP9xQ4", "terms": ["t" * 8] * 65}), "invalid_field:query.terms"),
        (make(query={"id": "qH7fK2mP9xQ4", "terms": ["t" * 8, "t"]}), "invalid_field:query.terms[1]"),
        (make(query={"id": "qH7fK2mP9xQ4", "type": "multi hop"}), "invalid_field:query.type"),
        (make(query={"id": "qH7fK2mP9xQ4", "language": "e"}), "invalid_field:query.language"),
        (make(principal={"tenant": "", "groups": []}), "invalid_field:principal.tenant"),
        (make(principal={"tenant": "acme", "groups": [], "claims_present": 1}), "invalid_field:principal.claims_present"),
        (make(stages={"after_filter": -1}), "invalid_field:stages.after_filter"),
        (make(filters=[{"name": "acl", "status": "done"}]), "invalid_field:filters[0].status"),
        (make(latency_ms=-1), "invalid_field:latency_ms"),
        (make(feedback={"thumbs": 5}), "invalid_field:feedback.thumbs"),
        (make(results=[BASE["results"][0], {**BASE["results"][1], "score": "high"}]), "invalid_field:results[1].score"),
        (make(results=[{**BASE["results"][0], "status": "old"}]), "invalid_field:results[0].status"),
        (make(results=[{**BASE["results"][0], "fingerprint": "zz"}]), "invalid_field:results[0].fingerprint"),
        (make(results=[{**BASE["results"][0], "acl": ["abc"]}]), "invalid_field:results[0].acl[0]"),
        (make(results=[{**BASE["results"][0], "effective_date": "2026-02-30"}]), "invalid_field:results[0].effective_date"),
        (make(results=[BASE["results"][0], {**BASE["results"][1], "expires_at": "soon"}]), "invalid_field:results[1].expires_at"),
        (make(results=[BASE["results"][0], {**BASE["results"][1], "rank": 1}]), "invalid_field:results"),
        (make(results={"0": BASE["results"][0]}), "invalid_field:results"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_invalid_field_paths(doc, reason):
    assert reason_of(raw(doc)) == reason
    assert reason_of(raw(with_unknown(doc))) == reason  # both decode paths name the same path


def _without(doc: dict, key: str) -> dict:
    return {k: v for k, v in doc.items() if k != key}


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (_without(BASE, "cutoff_k"), "invalid_field:cutoff_k"),
        (_without(BASE, "results"), "invalid_field:results"),
        (make(query={"terms": []}), "invalid_field:query.id"),
        (make(principal={"tenant": "acme"}), "invalid_field:principal.groups"),
        (make(filters=[{"name": "acl", "status": "applied"}, {"status": "skipped"}]), "invalid_field:filters[1].name"),
        (make(results=[_without(BASE["results"][0], "rank")]), "invalid_field:results[0].rank"),
        (make(results=[BASE["results"][0], _without(BASE["results"][1], "source")]), "invalid_field:results[1].source"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_missing_field_is_reported_at_its_own_path(doc, reason):
    assert reason_of(raw(doc)) == reason
    assert reason_of(raw(with_unknown(doc))) == reason  # both decode paths name the same path


def test_explicit_null_is_absent_for_optional_fields_only():
    decoded = decode(raw(make(pipeline=None, latency_ms=None, query={"id": "qH7fK2mP9xQ4", "type": None})))
    assert decoded.event.pipeline is None and decoded.event.query.type is None
    assert reason_of(raw(make(filters=None))) == "invalid_field:filters"
    assert reason_of(raw(make(feedback={"rephrased": None}))) == "invalid_field:feedback.rephrased"


def test_integers_reject_floats_and_bools():
    assert reason_of(raw(BASE).replace(b'"cutoff_k": 3', b'"cutoff_k": 3.0')) == "invalid_field:cutoff_k"
    assert reason_of(raw(make(cutoff_k=True))) == "invalid_field:cutoff_k"
    assert reason_of(raw(make(results=[{**BASE["results"][0], "score": False}]))) == "invalid_field:results[0].score"


# --------------------------------------------------------------------------- precedence


def test_too_large_comes_before_anything():
    assert reason_of(b"{not json" * 10, max_bytes=20) == "too_large"
    assert reason_of(raw(make(query={"id": RAW_EMAIL})), max_bytes=50) == "too_large"
    assert reason_of(raw(make(schema="retrieval.v9")), max_bytes=50) == "too_large"


RAW_PHONE = "+1-555-010-2030"


@pytest.mark.parametrize("secret", [RAW_EMAIL, RAW_PHONE, "555-010-2030", "(555) 010 2030", "jane doe"])
@pytest.mark.parametrize("break_it", [
    pytest.param(lambda b: b[:-1], id="truncated"),
    pytest.param(lambda b: b[:b.index(b"cutoff_k")], id="cut-after-secret"),
    pytest.param(lambda b: b.replace(b'"app"', b'"\xffapp"'), id="invalid-utf8"),
    pytest.param(lambda b: b.replace(b'{', b'{,', 1), id="syntax"),
])
def test_unparsable_privacy_suspect_is_withheld(secret, break_it):
    """A message that cannot be parsed is judged from its bytes: a suspect in
    it withholds the payload (reason pii_suspected), never invalid_json."""
    message = break_it(raw(make(query={"id": secret})))
    with pytest.raises(RejectedEvent) as info:
        decode(message)
    assert info.value.reason == "pii_suspected" and info.value.withheld
    assert secret not in str(info.value)


def test_unparsable_clean_message_is_invalid_json_and_forwarded():
    clean = raw(BASE)
    for cut in range(1, len(clean)):  # every strict prefix of a clean event
        with pytest.raises(RejectedEvent) as info:
            decode(clean[:cut])
        assert (info.value.reason, info.value.withheld) == ("invalid_json", False), clean[:cut]
    assert reason_of(b"{not json") == "invalid_json"


@pytest.mark.parametrize("message", [
    b'{"query":{"id":"jane\\u0040example.com"}',  # an escaped @
    b'{"query":{"id":jane.doe@example.com}}',  # unquoted
    b'{"principal":{"groups":["gA1b2C3d4E5f","555.010.2030"]},}',
    b'{"results":[{"acl":["all\\tstaff"]}]',  # an escaped tab
    b'{"query":{"terms":["' + b"t" * 129,  # cut off, but longer than any hash
])
def test_raw_scan_finds_suspects_in_any_spelling(message):
    assert reason_of(message) == "pii_suspected"


def test_phone_numbers_in_hashed_fields_are_suspects_plain_digits_are_not():
    for phone in ("555-010-2030", "+15550102030", "(555)010-2030", "555.010.2030"):
        assert reason_of(raw(make(query={"id": phone}))) == "pii_suspected", phone
    assert decode(raw(make(query={"id": "5550102030"}))).event.query.id == "5550102030"  # a hash, as far as we know
    assert decode(raw(make(query={"id": "a-555-010-2030"}))).event  # more than digits


def test_raw_scan_ignores_digits_outside_hashed_fields_and_cut_off_digits():
    assert reason_of(b'{"ts":"2026-03-02","latency_ms":5550102030,"x":"555-010-2030",') == "invalid_json"
    assert reason_of(b'{"query":{"id":"5550102') == "invalid_json"  # its digits may run on


def test_pii_comes_before_unsupported_schema_and_invalid_fields():
    pii = {"id": RAW_EMAIL}
    assert reason_of(raw(make(schema="retrieval.v2", query=pii))) == "pii_suspected"
    assert reason_of(raw({k: v for k, v in make(query=pii).items() if k != "schema"})) == "pii_suspected"
    assert reason_of(raw(make(cutoff_k=0, app="BAD APP", query=pii))) == "pii_suspected"
    assert reason_of(raw(make(query=pii, results=[BASE["results"][0]] * 2))) == "pii_suspected"


def test_unsupported_schema_comes_before_invalid_fields():
    assert reason_of(raw(make(schema="retrieval.v2", cutoff_k=0, results=None))) == "unsupported_schema"


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (make(query={"id": RAW_EMAIL}), "query.id"),
        (make(query={"id": "how do I reset my password"}), "query.id"),
        (make(query={"id": "q" * 129}), "query.id"),
        (make(query={"id": "qH7fK2mP9xQ4", "terms": ["t" * 8, "t" * 8, "new york"]}), "query.terms[2]"),
        (make(principal={"tenant": "acme", "groups": ["g" * 8, "all\tstaff"]}), "principal.groups[1]"),
        (make(results=[BASE["results"][0], {**BASE["results"][1], "acl": ["Finance Team"]}]), "results[1].acl[0]"),
        (make(results=[{**BASE["results"][1], "rank": 9}, {**BASE["results"][0], "acl": ["x@y.z"]}]), "results[1].acl[0]"),
    ],
)
def test_pii_reason_names_the_path_never_the_value(doc, path):
    with pytest.raises(RejectedEvent) as info:
        decode(raw(doc))
    exc = info.value
    assert exc.reason == "pii_suspected" and exc.kind == "pii_suspected"
    assert exc.detail == path  # list position, not rank
    leaked = privacy_violation(doc)
    assert leaked == path
    for text in (str(exc), repr(exc), exc.reason, exc.detail, *map(str, exc.args)):
        for value in (RAW_EMAIL, "password", "new york", "staff", "Finance", "x@y.z", "q" * 129):
            assert value not in text


def test_pii_guard_bounds():
    assert decode(raw(make(query={"id": "q" * 128}))).event.query.id == "q" * 128
    assert reason_of(raw(make(query={"id": "q" * 129}))) == "pii_suspected"
    assert reason_of(raw(make(query={"id": "q" * 7}))) == "invalid_field:query.id"
    assert reason_of(raw(make(query={"id": "jürgen.müller"}))) == "invalid_field:query.id"
    assert privacy_violation({"query": "a b"}) == "" and privacy_violation(["a b"]) == ""
    # A hashed field of the wrong type is still scanned: its raw text is withheld.
    assert privacy_violation({"query": {"id": 12345678, "terms": "a b"}}) == "query.terms"
    assert privacy_violation({"query": {"id": 12345678, "terms": [1, None, True, 2.5, {"k": 3}]}}) == ""
    # A hash-token-shaped string is not raw, whatever shape holds it.
    assert privacy_violation({"query": {"id": ["qH7fK2mP9xQ4"], "terms": {"tA1b2C3d4": ["g-_9" * 2]}}}) == ""
    assert reason_of(raw(make(query={"id": ["qH7fK2mP9xQ4"]}))) == "invalid_field:query.id"


def _result(**fields) -> dict:
    return {**BASE["results"][0], **fields}


_RAW_TEXTS = (RAW_EMAIL, "alice smith", "x" * 129)


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        pytest.param(make(principal={"tenant": "acme", "groups": RAW_EMAIL}), "principal.groups", id="groups-str"),
        pytest.param(make(query={"id": "qH7fK2mP9xQ4", "terms": "alice smith " + RAW_EMAIL}), "query.terms", id="terms-str"),
        pytest.param(make(query={"id": [RAW_EMAIL]}), "query.id[0]", id="id-list"),
        pytest.param(make(query={"id": {"v": RAW_EMAIL}}), "query.id", id="id-dict-value"),
        pytest.param(make(query={"id": "qH7fK2mP9xQ4", "terms": [[RAW_EMAIL]]}), "query.terms[0][0]", id="terms-nested"),
        pytest.param(make(query={"id": "qH7fK2mP9xQ4", "terms": ["t" * 8, [["t" * 8, "x" * 129]]]}), "query.terms[1][0][1]", id="terms-deep-long"),
        pytest.param(make(query={"id": "qH7fK2mP9xQ4", "terms": {RAW_EMAIL: 1}}), "query.terms", id="terms-dict-key"),
        pytest.param(make(principal={"tenant": "acme", "groups": [{"g": ["gA1b2C3d4E5f", "alice smith"]}]}), "principal.groups[0]", id="groups-dict"),
        pytest.param(make(results={"acl": RAW_EMAIL}), "results.acl", id="results-dict-acl-str"),
        pytest.param(make(results={"acl": [[RAW_EMAIL]]}), "results.acl[0][0]", id="results-dict-acl-nested"),
        pytest.param(make(results=[_result(acl=RAW_EMAIL)]), "results[0].acl", id="acl-str"),
        pytest.param(make(results=[_result(), _result(acl=[["aA1b2C3d4", [RAW_EMAIL]]])]), "results[1].acl[0][1][0]", id="acl-nested"),
        pytest.param(make(results=[_result(acl={"team": {"k": "Finance Team"}})]), "results[0].acl", id="acl-dict"),
        pytest.param(make(results=[_result(acl={"Finance Team": []})]), "results[0].acl", id="acl-dict-key"),
        pytest.param(make(results=[[_result(), _result(acl=[RAW_EMAIL])]]), "results[0][1].acl[0]", id="results-nested"),
        pytest.param(make(query=[{"id": RAW_EMAIL}]), "query[0].id", id="query-list"),
        pytest.param([BASE, BASE, make(query={"id": RAW_EMAIL})], "[2].query.id", id="array-of-events"),
        pytest.param([BASE, [make(principal={"tenant": "acme", "groups": [RAW_EMAIL]})]], "[1][0].principal.groups[0]", id="nested-arrays"),
        pytest.param([make(query={"id": "alice smith"}), make(query={"id": RAW_EMAIL})], "[0].query.id", id="array-first-wins"),
    ],
)
def test_pii_guard_scans_every_shape_of_a_hashed_field(doc, path):
    assert privacy_violation(copy.deepcopy(doc)) == path
    with pytest.raises(RejectedEvent) as info:
        decode(raw(doc))
    exc = info.value
    assert exc.reason == "pii_suspected" and exc.detail == path
    for text in (str(exc), repr(exc), *map(str, exc.args)):
        for value in (*_RAW_TEXTS, "alice", "Finance", "example.com"):
            assert value not in text


def test_pii_guard_ignores_raw_text_outside_hashed_fields():
    doc = make(
        x_note="alice smith " + RAW_EMAIL,
        query={"id": "qH7fK2mP9xQ4", "x_text": RAW_EMAIL},
        principal={"tenant": "acme", "groups": ["gA1b2C3d4E5f"], "x_name": "Alice Smith"},
        results=[_result(source="wiki page by " + RAW_EMAIL, x_acl=[RAW_EMAIL]), {**BASE["results"][1], "acl": ["aA1b2C3d4"]}],
        feedback={"comment": RAW_EMAIL},
    )
    assert privacy_violation(doc) == ""
    try:
        decode(raw(doc))
    except RejectedEvent as exc:
        assert exc.reason != "pii_suspected"
    decoded = decode(raw(make(results=[_result(source="wiki page by " + RAW_EMAIL)], x_note=RAW_EMAIL)))
    assert decoded.event.results[0].source.endswith(RAW_EMAIL) and decoded.unknown_fields == 1
    assert privacy_violation([doc, {"acl": RAW_EMAIL, "id": RAW_EMAIL, "terms": RAW_EMAIL}]) == ""
    assert privacy_violation({"results": [{"source": {"acl": RAW_EMAIL}}]}) == ""


def test_pii_guard_handles_the_deepest_document_the_parser_accepts():
    deep: object = ["t" * 8] * 3 + [RAW_EMAIL]
    for _ in range(900):
        deep = [deep]
    doc = make(query={"id": "qH7fK2mP9xQ4", "terms": deep})
    path = privacy_violation(doc)  # too deep to name in full: an ancestor of the finding
    assert path.startswith("query.terms[0][0]") and len(path) <= 200 and re.fullmatch(r"query\.terms(\[0\])+", path)
    with pytest.raises(RejectedEvent) as info:
        decode(raw(doc))
    assert info.value.reason == "pii_suspected" and info.value.detail == path
    clean: object = ["t" * 8] * 3
    for _ in range(900):
        clean = [{"k": clean}]
    assert privacy_violation(make(query={"id": "qH7fK2mP9xQ4", "terms": clean})) == ""


# --------------------------------------------------------------------------- max_bytes


def _padded(size: int) -> bytes:
    base = raw(make(x_pad=""))
    message = raw(make(x_pad="p" * (size - len(base))))
    assert len(message) == size
    return message


def test_max_bytes_default_is_one_mebibyte():
    assert DEFAULT_MAX_BYTES == 1 << 20
    assert decode(_padded(DEFAULT_MAX_BYTES)).unknown_fields == 1
    assert reason_of(_padded(DEFAULT_MAX_BYTES + 1)) == "too_large"


def test_max_bytes_parameter_is_inclusive():
    message = raw(BASE)
    assert decode(message, max_bytes=len(message)).event.event_id == "evt-0001"
    with pytest.raises(RejectedEvent) as info:
        decode(message, max_bytes=len(message) - 1)
    assert info.value.reason == "too_large" and str(len(message)) in info.value.detail


def test_max_bytes_counts_bytes_not_characters():
    message = raw(make(principal={"tenant": "é" * 100, "groups": []}))
    assert len(message.decode()) < len(message)
    assert reason_of(message, max_bytes=len(message.decode())) == "too_large"


# --------------------------------------------------------------------------- unknown fields


def test_unknown_fields_are_counted_at_top_level_and_nested():
    doc = make(
        x_a=1,
        x_b={"deep": {"deeper": [1, 2]}},  # one unknown field, however deep
        pipeline={"version": "v1", "x_c": None},
        query={"id": "qH7fK2mP9xQ4", "text_length": 12},
        principal={"tenant": "acme", "groups": [], "x_d": "admin"},
        stages={"candidates": 3, "x_e": 1, "x_f": 2},
        filters=[{"name": "acl", "status": "applied", "x_g": 1}, {"name": "lang", "status": "skipped", "x_h": 1}],
        results=[{**BASE["results"][0], "x_i": [1]}, {**BASE["results"][1], "x_j": 0, "x_k": 0}],
        feedback={"thumbs": 1, "x_l": True},
    )
    decoded = decode(raw(doc))
    assert decoded.unknown_fields == 13
    event = decoded.event
    assert event.stages.candidates == 3 and event.filters[1].name == "lang" and event.feedback.thumbs == 1
    assert not hasattr(event, "x_a") and not hasattr(event.results[0], "x_i")


def test_known_event_has_no_unknown_fields():
    assert decode(raw(BASE)).unknown_fields == 0


# --------------------------------------------------------------------------- ranks and dates


@pytest.mark.parametrize("extra", [{}, {"x_unknown": 1}], ids=["fast", "slow"])
def test_results_are_sorted_by_rank(extra):
    results = [
        {"chunk_id": f"c{rank}", "parent_id": "p", "source": "s", "rank": rank, "score": 1.0 / rank}
        for rank in (7, 2, 30, 3)
    ]
    event = decode(raw(make(results=results, **extra))).event
    assert [r.rank for r in event.results] == [2, 3, 7, 30]
    assert [r.chunk_id for r in event.results] == ["c2", "c3", "c7", "c30"]


def test_empty_results_are_an_event():
    assert decode(raw(make(results=[]))).event.results == []


def test_an_effective_date_without_a_time_is_midnight_utc():
    doc = make(results=[{**BASE["results"][0], "effective_date": "2026-01-15", "expires_at": "2026-12-31"}])
    result = decode(raw(doc)).event.results[0]
    assert epoch(result.effective_date) == datetime(2026, 1, 15, tzinfo=UTC).timestamp() == 1768435200.0
    assert epoch(result.expires_at) == datetime(2026, 12, 31, tzinfo=UTC).timestamp()
    assert result.effective_date == "2026-01-15"  # the text is kept as sent


def test_an_effective_date_with_an_offset():
    doc = make(results=[{**BASE["results"][0], "effective_date": "2026-01-15T10:00:00.25+05:30"}])
    result = decode(raw(doc)).event.results[0]
    utc = datetime(2026, 1, 15, 4, 30, 0, 250000, tzinfo=UTC)
    assert epoch(result.effective_date) == utc.timestamp()
    assert result.expires_at is None


def test_ts_keeps_its_offset():
    event = decode(raw(make(ts="2026-03-02T14:45:00+05:30"))).event
    assert event.ts.utcoffset() == timedelta(hours=5, minutes=30)
    assert event.ts == datetime(2026, 3, 2, 9, 15, tzinfo=UTC)


@pytest.mark.parametrize("field", ["effective_date", "expires_at"])
@pytest.mark.parametrize("text", ["2026-02-29", "2026-04-31", "2026-01-15T24:00:00Z", "2026-01-15T10:00:00+24:00", "2026-01-15 10:00:00Z"])
def test_invalid_dates_name_their_field(field, text):
    doc = make(results=[BASE["results"][0], {**BASE["results"][1], field: text}])
    assert reason_of(raw(doc)) == f"invalid_field:results[1].{field}"


def test_dates_take_lower_case_t_and_z():
    upper = decode(raw(make(results=[{**BASE["results"][0], "effective_date": "2026-01-15T10:00:00.5Z"}])))
    lower = decode(raw(make(results=[{**BASE["results"][0], "effective_date": "2026-01-15t10:00:00.5z"}])))
    assert epoch(lower.event.results[0].effective_date) == epoch(upper.event.results[0].effective_date)


# --------------------------------------------------------------------------- text and numbers


@pytest.mark.parametrize("text", ["kb\nwiki", "nul\x00", "\x1b[31m", "del\x7f", "\t"])
@pytest.mark.parametrize("field", ["source", "chunk_id", "tenant", "authority"])
def test_free_text_rejects_control_characters(field, text):
    doc = make(results=[{**BASE["results"][0], field: text}])
    assert reason_of(raw(doc)) == f"invalid_field:results[0].{field}"


@pytest.mark.parametrize("byte", [bytes([c]) for c in range(0x20)] + [b"\xed\xa0\x80", b"\xed\xbf\xbf"])
def test_the_parser_refuses_control_and_surrogate_bytes_in_strings(byte):
    """The decoder skips the free-text rule for a message with no backslash
    and no DEL byte: that holds only while raw control characters and
    surrogates stay invalid JSON."""
    message = raw(BASE).replace(b'"source": "wiki"', b'"source": "wi' + byte + b'ki"', 1)
    assert b"\\" not in message
    assert reason_of(message) == "invalid_json"


def test_the_text_rule_runs_whatever_else_the_message_escapes():
    doc = make(results=[{**BASE["results"][0], "source": "del\x7f"}, {**BASE["results"][1], "authority": "a\nb"}])
    assert reason_of(raw(doc)) == "invalid_field:results[0].source"
    assert reason_of(raw(doc).replace(b"\x7f", b"\\u007f")) == "invalid_field:results[0].source"


@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udfff", b"a\\udc00\\ud83d", b"\\ud83dx"])
@pytest.mark.parametrize("field", ["source", "x_note"])
def test_lone_surrogate_escapes_are_invalid_json(field, escape):
    """Text that cannot be UTF-8 is rejected by the parser, in a known field or not."""
    message = raw(BASE).replace(b'"source": "wiki"', b'"%s": "%s"' % (field.encode(), escape), 1)
    assert reason_of(message) == "invalid_json"
    assert reason_of(message[:-1] + b', "x_unknown": 1}') == "invalid_json"  # the slow path too


def test_surrogate_pair_escape_is_one_character():
    message = raw(BASE).replace(b'"source": "wiki"', b'"source": "\\ud83d\\udcda"', 1)
    assert decode(message).event.results[0].source == "\U0001F4DA"


def test_free_text_takes_any_character_but_controls():
    text = "Überblick 📚 \u0085 ☃"
    decoded = decode(raw(make(principal={"tenant": text, "groups": []}))).event
    assert decoded.principal.tenant == text
    assert encode(decoded)  # what is accepted can be written back as UTF-8


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [("score", 1e12, True), ("score", -1e12, True), ("score", 1.0000001e12, False), ("rerank_score", -1e13, False),
     ("rerank_score", 1.5e12, False), ("rerank_score", None, True)],
)
def test_scores_are_bounded(field, value, ok):
    message = raw(make(results=[{**BASE["results"][0], field: value}]))
    if ok:
        assert getattr(decode(message).event.results[0], field) == value
    else:
        assert reason_of(message) == f"invalid_field:results[0].{field}"


def test_latency_is_bounded():
    assert decode(raw(make(latency_ms=1e12))).event.latency_ms == 1e12
    assert reason_of(raw(make(latency_ms=1.5e12))) == "invalid_field:latency_ms"


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"1" + b"0" * 400 + b".0"])
@pytest.mark.parametrize("field", ["score", "rerank_score", "latency_ms", "x_note"])
def test_non_finite_numbers_are_invalid_json(field, number):
    """Not JSON (NaN, Infinity) or beyond a float: rejected by the parser, known field or not."""
    value = b'"%s": %s' % (field.encode(), number)
    if field == "score":
        message = raw(BASE).replace(b'"score": 0.9', value, 1)
    elif field == "rerank_score":
        message = raw(BASE).replace(b'"score": 0.9', b'"score": 0.9, ' + value, 1)
    else:
        message = raw(BASE)[:-1] + b", " + value + b"}"
    assert value in message
    assert reason_of(message) == "invalid_json"
    assert reason_of(message[:-1] + b', "x_unknown": 1}') == "invalid_json"  # the slow path too


# --------------------------------------------------------------------------- RejectedEvent


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("invalid_field:results[0].rank", "invalid_field"),
        ("invalid_field:$", "invalid_field"),
        ("invalid_field:results[0].effective_date", "invalid_field"),
        ("pii_suspected", "pii_suspected"),
        ("too_large", "too_large"),
        ("invalid_json", "invalid_json"),
        ("unsupported_schema", "unsupported_schema"),
    ],
)
def test_rejected_event_kind_drops_the_path(reason, kind):
    exc = RejectedEvent(reason, "detail")
    assert exc.kind == kind and exc.reason == reason
    assert str(exc) == f"{reason}: detail" and str(RejectedEvent(reason)) == reason
    assert isinstance(exc, ValueError)


def test_decoder_kind_of_a_field_error():
    with pytest.raises(RejectedEvent) as info:
        decode(raw(make(results=[{**BASE["results"][0], "rank": -1}])))
    assert info.value.reason == "invalid_field:results[0].rank" and info.value.kind == "invalid_field"


# --------------------------------------------------------------------------- edge cases found in review


def test_trailing_newline_in_hashed_field_is_pii():
    doc = make(query={"id": "abcdefgh\n"})
    assert reason_of(raw(with_unknown(doc))) == "pii_suspected"  # the slow path says so
    assert reason_of(raw(doc)) == "pii_suspected"  # the fast path rejects it, then the slow path says so


def test_trailing_newline_in_event_id_is_rejected():
    assert reason_of(raw(make(event_id="evt-0001\n"))) == "invalid_field:event_id"


@pytest.mark.parametrize("text", [b', "x_note": NaN}', b', "x_note": -Infinity}'])
def test_non_json_constants_are_invalid_json(text):
    assert reason_of(raw(BASE)[:-1] + text) == "invalid_json"


@pytest.mark.parametrize(
    "message",
    [
        json.dumps(BASE).encode("utf-16"),
        json.dumps(BASE).encode("utf-32"),
        json.dumps(BASE).encode("utf-8-sig"),
        raw(BASE)[:-1] + b', "x_note": "\xed\xa0\x80"}',  # an encoded surrogate is not UTF-8
    ],
    ids=["utf-16", "utf-32", "bom", "cesu-surrogate"],
)
def test_messages_must_be_utf8(message):
    assert reason_of(message) == "invalid_json"


def test_trailing_newline_in_free_text_is_rejected():
    assert reason_of(raw(make(results=[{**BASE["results"][0], "source": "wiki\n"}]))) == "invalid_field:results[0].source"


def test_offset_minutes_over_59_are_rejected():
    doc = make(results=[{**BASE["results"][0], "effective_date": "2026-01-15T10:00:00+05:60"}])
    assert reason_of(raw(doc)) == "invalid_field:results[0].effective_date"


def test_a_known_string_is_judged_as_when_new():
    """The memos of recurring strings change no verdict: a token that passed
    once passes again, one that failed fails again, and neither a failing
    string nor a bad date is kept in memory (it may be personal data)."""
    phone = "555-123-4567"
    good = make(query={"id": "q0000001", "terms": ["term0001", "term0002"]})
    bad = make(query={"id": "q0000001", "terms": ["term0001", phone]})
    for _ in range(2):
        assert isinstance(decode(raw(good)), Decoded)
        assert reason_of(raw(bad)) == "pii_suspected"
    assert phone not in rules._HASH and "term0001" in rules._HASH
    for _ in range(2):
        assert reason_of(raw(make(results=[{**BASE["results"][0], "effective_date": "2026-02-30"}]))) \
            == "invalid_field:results[0].effective_date"
    assert "2026-02-30" not in rules.epoch.__self__


def test_a_memo_is_bounded_and_keeps_only_what_passes():
    memo = rules.Memo(lambda text: text.startswith("ok"))
    for i in range(rules.KNOWN_STRINGS + 10):
        assert memo[f"ok{i}"] and not memo[f"no{i}"]
    assert 0 < len(memo) <= rules.KNOWN_STRINGS and not any(key.startswith("no") for key in memo)
    long = "ok" + "x" * rules.KNOWN_CHARS
    assert memo[long] and long not in memo  # judged, not kept: memory is bounded in bytes too
