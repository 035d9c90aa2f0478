"""The JSON run with facts: what makes a result unauthorized or stale, and what stays a plain run."""

from __future__ import annotations

import json
import random

import pytest

from agent.core.judgments.formats import FormatError
from agent.core.judgments.runs import Run, Served, parse_any_run, read_run


def facts_run(queries: dict, **top) -> str:
    return json.dumps({"format": "ragdrift.run.v1", **top, "queries": queries})


def test_facts_are_read_and_unknown_stays_unknown():
    run = parse_any_run(facts_run({"q1": {
        "results": ["d1", {"doc": "d2", "authorized": False}, {"doc": "d3", "stale": True},
                    {"doc": "d4", "acl": ["hr"]}, {"doc": "d5", "acl": ["eng", "ops"]}, {"doc": "d6", "acl": []}],
        "principal_groups": ["eng"], "latency_ms": 12}}, config="c1", corpus="k1"), reject_duplicates=True)
    assert run.ranking == {"q1": ["d1", "d2", "d3", "d4", "d5", "d6"]}
    # an acl sharing no group with the principal's is unauthorized, the agent's rule; an empty acl says nothing
    assert run.served["q1"] == [Served("d1"), Served("d2", True), Served("d3", None, True), Served("d4", True),
                                Served("d5", False), Served("d6")]
    assert (run.latency_ms, run.config, run.corpus) == ({"q1": 12.0}, "c1", "k1")


def test_plain_runs_pass_through():
    assert parse_any_run('{"q1": ["d1"], "format": ["d2"]}', True) == Run(ranking={"q1": ["d1"], "format": ["d2"]})
    assert parse_any_run("q1 Q0 d1 1 0.5 t\n", True) == Run(ranking={"q1": ["d1"]})
    with pytest.raises(FormatError, match="line 2: not JSON"):
        parse_any_run('{"format": "ragdrift.run.v1",\n', True)


@pytest.mark.parametrize(("queries", "message"), [
    ({"q": ["d"]}, "query 'q': expected {results: [...]}, got (a list of 1)"),
    ({"q": {"results": "d"}}, "query 'q': results must be a list"),
    ({"q": {"results": [], "latency_ms": -1}}, "query 'q': latency_ms must be a number >= 0, got -1"),
    ({"q": {"results": [], "principal_groups": "eng"}}, "query 'q': principal_groups must be a list of texts"),
    ({"q": {"results": [{"doc": "d"}, "d"]}}, "query 'q': duplicate doc id 'd'"),
    ({"q": {"results": [{"doc": 3}]}}, "query 'q', result 1: doc must be a text, got 3"),
    ({"q": {"results": [{"doc": "d", "stale": 1}]}}, "query 'q', result 1: stale must be true or false, got 1"),
    ({"q": {"results": [{"doc": "d", "acl": "hr"}]}}, "query 'q', result 1: acl must be a list of texts"),
    ({"q": {"result": []}}, "query 'q': unknown key 'result'"),
])
def test_a_bad_facts_run_names_the_query_and_result(queries, message):
    with pytest.raises(FormatError) as found:
        parse_any_run(facts_run(queries), reject_duplicates=True)
    assert str(found.value).startswith(message)


def test_a_trec_run_read_line_by_line_keeps_only_the_judged_queries():
    lines = ["\n", "q1 Q0 d1 1 0.5 t\n", "q2 Q0 d9 1 0.5 t\n", "q1 Q0 d2 2 0.7 t\n", "q2 Q0 d9 2 0.1 t\n"]
    run = read_run(iter(lines), reject_duplicates=True, judged={"q1"})
    assert run == Run(ranking={"q1": ["d2", "d1"]}, unjudged=frozenset({"q2"}))  # q2 read past: its repeated d9 unseen
    with pytest.raises(FormatError, match="line 4: duplicate doc id 'd1' for query 'q1' \\(first on line 2\\)"):
        read_run(iter([*lines[:3], "q1 Q0 d1 2 0.7 t\n", "q1 Q0 d3 x\n"]), reject_duplicates=True, judged={"q1"})


def test_a_json_run_read_line_by_line_is_read_whole():
    text = facts_run({"q1": {"results": ["d1", {"doc": "d2", "stale": True}]}})
    assert read_run(iter(text.splitlines(keepends=True)), True, {"q1"}) == parse_any_run(text, True)


def test_a_json_run_read_query_by_query_keeps_the_judged_queries_and_the_facts_the_gates_read():
    from agent.core.compare.queries import flagged

    queries = {"q1": {"results": ["d1", {"doc": "d2", "stale": True}], "latency_ms": 3},
               "q2": {"results": ["d1", {"doc": "d2", "authorized": False}, {"doc": "d3", "stale": False}]},
               "q3": {"results": ["d4"], "latency_ms": 5}}
    whole = parse_any_run(facts_run(queries), True)
    for text in (facts_run(queries), json.dumps({"queries": queries, "format": "ragdrift.run.v1"}, indent=1)):
        run = read_run(iter(text.splitlines(keepends=True)), True, {"q1"})
        assert run.ranking == {"q1": ["d1", "d2"]} and run.unjudged == {"q2", "q3"} and run.latency_ms == {"q1": 3.0}
        # q2, not judged, keeps its facts and the ids of the results flagged; q3 states none
        assert run.served == {"q1": whole.served["q1"],
                              "q2": [Served("", None), Served("d2", True), Served("", None, False)]}
        for fact in ("unauthorized", "stale"):
            assert flagged(run, 2, fact) == {q: docs for q, docs in flagged(whole, 2, fact).items() if q != "q3"}
    plain = '{"q1": ["d1", "a\\nb"],\n "q2": ["d9", "d9"]}'
    assert read_run(iter([plain]), False, {"q1"}) == Run(ranking={"q1": ["d1", "a\nb"]}, unjudged=frozenset({"q2"}))


def test_a_json_run_read_query_by_query_fails_as_it_would_read_whole():
    """A JSON error anywhere comes before a problem of a query, as when the run was read whole,
    with the same message at the same line; then a facts run's problems in their order."""
    from agent.core.judgments.untrusted import loads

    base = facts_run({"q1": {"results": ["d1", {"doc": "d2", "stale": True}], "latency_ms": 3.5},
                      "q2": {"results": [], "principal_groups": ["eng"]}}, config="c").replace(", ", ",\n ")
    rng = random.Random(7)
    tokens = [*'{}[]:,"\\ t1.-\n', "NaN", "1e999", '"q1"', '"doc": 1', '"results": 2', '"format": 3']
    checked = 0
    for _ in range(3000):
        text = list(base)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(len(text))
            text[at:at + rng.randrange(2)] = rng.choice(tokens)
        text = "".join(text)
        if not text.lstrip().startswith("{"):
            continue  # a TREC run
        try:
            loads(text)
            continue
        except json.JSONDecodeError as exc:
            expected = f"line {exc.lineno}: not JSON: {exc.msg}"
        except ValueError as exc:
            expected = str(exc)
        with pytest.raises(FormatError) as found:
            read_run(iter(text.splitlines(keepends=True)), True, {"q1"})
        assert str(found.value) == expected, text
        checked += 1
    assert checked > 1000
    late = '{"format": "ragdrift.run.v1", "queries": {"q": {"results": 1}},\n "config": NaN}'
    with pytest.raises(FormatError, match=r"^NaN is not a finite number$"):
        read_run(iter([late]), True, {"q"})
    first = '{"queries": {"q": {"results": 1}}, "config": 2, "format": "ragdrift.run.v1", "x": 1}'
    with pytest.raises(FormatError, match=r"^the run: unknown key 'x'"):
        read_run(iter([first]), True, {"q"})
