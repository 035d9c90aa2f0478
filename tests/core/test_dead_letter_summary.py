"""The dead-letter summary: reasons grouped with list positions folded, event ids only where safe,
and every text and count the topic can inflate bounded."""

from __future__ import annotations

import orjson

from agent.core.dead_letter_summary import SHOWN, TEXT_BOUND, TRACKED, Counts, Letter, Summary, event_id, grouped


def _letter(reason: str | None, offset: int = 0, *, partition: int = 0, event: str | None = None,
            source: tuple[str, int, int] | None = ("retrieval.v1", 0, 0)) -> Letter:
    return Letter(partition=partition, offset=offset, written=1_796_000_000.0 + offset, reason=reason, source=source, event_id=event)


def test_reasons_group_by_kind_and_path_with_positions_folded():
    assert grouped("invalid_field:results[3].score") == ("invalid_field", "results[].score")
    assert grouped("invalid_field:results[0].acl[12]") == ("invalid_field", "results[].acl[]")
    assert grouped("invalid_field:schema") == ("invalid_field", "schema")
    assert grouped("pii_suspected") == ("pii_suspected", "")
    summary = Summary()
    for n, reason in enumerate(["invalid_field:results[3].score", "invalid_field:results[0].score",
                                "invalid_field:cutoff_k", "invalid_json", "pii_suspected", "invalid_json"]):
        summary.add(_letter(reason, n))
    out = summary.to_dict()
    assert out["total"] == 6
    assert out["kinds"] == [{"kind": "invalid_field", "count": 3}, {"kind": "invalid_json", "count": 2},
                            {"kind": "pii_suspected", "count": 1}]
    assert [(r["reason"], r["path"], r["count"]) for r in out["reasons"]] == [
        ("invalid_field:results[].score", "results[].score", 2), ("invalid_json", None, 2),
        ("invalid_field:cutoff_k", "cutoff_k", 1), ("pii_suspected", None, 1)]


def test_event_ids_are_read_only_from_forwarded_payloads_of_parsed_kinds():
    payload = orjson.dumps({"event_id": "ev-1.a:b", "query": {"id": "x"}})
    assert event_id("invalid_field", payload) == "ev-1.a:b"
    assert event_id("unsupported_schema", payload) == "ev-1.a:b"
    for kind in ("pii_suspected", "invalid_json", "too_large", "anything"):
        assert event_id(kind, payload) is None
    assert event_id("invalid_field", None) is None  # withheld
    refused = ["a b", "jane@example.com", "x" * 129, "", "555-123-4567", "ev\n"]  # not the contract's form, or raw
    for text in refused:
        assert event_id("invalid_field", orjson.dumps({"event_id": text})) is None, text
    for payload in (b"{not json", b"[1, 2]", b'{"event_id": 7}', b'"ev-1"', b"\xff\xfe", b"[" * 100_000):
        assert event_id("invalid_field", payload) is None


def test_examples_are_the_first_letters_each_once_with_their_source():
    summary = Summary(examples=3)
    letters = [("a", ("src", 1, 100)), ("a", ("src", 1, 100)),  # the same letter sent again
               (None, None), (None, ("src", 1, 102)), ("b", None), ("c", ("src", 0, 5))]
    for n, (event, source) in enumerate(letters):
        summary.add(_letter("invalid_field:ts", n, event=event, source=source))
    (reason,) = summary.to_dict()["reasons"]
    assert reason["examples"] == [
        {"event_id": "a", "source": {"topic": "src", "partition": 1, "offset": 100}},
        {"event_id": None, "source": {"topic": "src", "partition": 1, "offset": 102}},
        {"event_id": "b", "source": None},
    ]
    summary = Summary(examples=0)
    summary.add(_letter("invalid_json"))
    assert summary.to_dict()["reasons"][0]["examples"] == []


def test_partitions_and_sources_give_first_and_last_offsets():
    summary = Summary()
    summary.add(_letter("invalid_json", 7, partition=1, source=("src", 2, 40)))
    summary.add(_letter("invalid_json", 3, partition=1, source=("src", 2, 12)))
    summary.add(_letter("invalid_json", 5, partition=0, source=None))
    summary.add(_letter(None, 6, partition=0, source=("other", 0, 9)))
    out = summary.to_dict()
    assert [(p["partition"], p["count"], p["first_offset"], p["last_offset"]) for p in out["partitions"]] == [
        (0, 2, 5, 6), (1, 2, 3, 7)]
    assert out["partitions"][1]["first_written"] == "2026-11-30T00:53:23.000Z"
    assert [(s["topic"], s["partition"], s["count"], s["first_offset"], s["last_offset"]) for s in out["sources"]] == [
        ("src", 2, 2, 12, 40), ("other", 0, 1, 9, 9)]
    assert out["without_source"] == 1 and out["without_reason"] == 1
    assert out["kinds"] == [{"kind": "invalid_json", "count": 3}]


def test_absurd_reasons_are_cut_shown_top_first_and_the_rest_summed():
    summary = Summary()
    summary.add(_letter("x" * 10_000))
    for n in range(SHOWN + 10):
        for _ in range(n + 1):
            summary.add(_letter(f"kind{n:03d}:a[{n}]"))
    out = summary.to_dict()
    assert all(len(r["reason"]) <= TEXT_BOUND for r in out["reasons"])
    assert len(out["reasons"]) == len(out["kinds"]) == SHOWN
    assert out["reasons"][0] == {**out["reasons"][0], "reason": f"kind{SHOWN + 9:03d}:a[]", "count": SHOWN + 10}
    assert out["other_reasons"]["distinct"] == 11  # ten small kinds and the long one
    assert out["other_reasons"]["count"] == sum(range(1, 11)) + 1
    assert sum(r["count"] for r in out["reasons"]) + out["other_reasons"]["count"] == out["total"]


def test_counts_track_a_bounded_number_of_keys():
    counts = Counts()
    for n in range(TRACKED + 5):
        counts.add(str(n))
    assert counts.add("0") and not counts.add("new")
    shown, rest, keys = counts.top(1)
    assert shown == [("0", 2)] and counts.untracked == 6
    assert rest == TRACKED - 1 + 6 and keys == TRACKED - 1


def test_a_timestamp_no_calendar_holds_is_no_time():
    summary = Summary()
    summary.add(Letter(partition=0, offset=0, written=1e20, reason="invalid_json"))
    assert summary.to_dict()["partitions"][0]["first_written"] is None
