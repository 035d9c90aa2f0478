"""`ragdrift compare`: the release gate on runs and qrels built from the live gate's canary traffic (a leak, a
slice that regresses under a better macro figure, stale conflicts, an equivalent change), the two halves' verdicts
on it alike, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import gate_traffic as traffic
from tests import test_live_gate_cli as live_gate
from tests.test_cli import one_line_error, run

K = str(traffic.K)


def write(path: Path, data) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {"qrels": write(tmp_path / "qrels.json", traffic.qrels()), "a": write(tmp_path / "a.json", traffic.run()),
            "slices": write(tmp_path / "slices.json", traffic.labels()),
            "evidence": write(tmp_path / "evidence.json", traffic.evidence())}


def candidate(tmp_path: Path, canary: str) -> str:
    return write(tmp_path / "b.json", traffic.run(canary, traffic.CANDIDATE))


def compare(capsys, files, candidate: str, *extra: str) -> tuple[int, dict]:
    status, out, err = run(capsys, "compare", files["qrels"], files["a"], candidate, K, "--slices", files["slices"],
                           "--evidence", files["evidence"], *extra, "--format", "json")
    assert status in (0, 1), err
    return status, json.loads(out)


def gate_of(report: dict, name: str) -> dict:
    return next(row for row in report["hardGates"] if row["gate"] == name)


def test_a_canary_that_leaks_fails(tmp_path, capsys, files):
    status, report = compare(capsys, files, candidate(tmp_path, "leak"))
    assert (status, report["verdict"]) == (1, "fail")
    leaks = gate_of(report, "unauthorized")
    assert leaks["outcome"] == "fail" and leaks["baseline"] == 0 and leaks["candidate"] == leaks["new"] > 0
    assert any(reason.startswith("unauthorized: ") for reason in report["reasons"])
    assert report["versions"]["b"]["config"] == traffic.CANDIDATE and report["versions"]["qrels"]["sha256"]


def test_a_regression_in_one_slice_fails_by_name_while_the_macro_figure_improves(tmp_path, capsys, files):
    status, report = compare(capsys, files, candidate(tmp_path, "slice"))
    macro = {row["metric"]: row for row in report["metrics"]}
    assert macro["nDCG"]["delta"] > 0 and macro["nDCG"]["low"] > 0 and macro["precision"]["outcome"] == "pass"
    assert (status, report["verdict"]) == (1, "fail")
    failed = {(row["dimension"], row["label"]) for row in report["slices"] if row["outcome"] == "fail"}
    assert ("app", traffic.SLICE) in failed
    assert all(label == traffic.SLICE for dim, label in failed if dim == "app")
    assert all(reason.startswith("slice ") for reason in report["reasons"])
    assert any(reason.startswith(f"slice app={traffic.SLICE}: nDCG fell by") for reason in report["reasons"])
    assert all(loss["labels"]["app"] == traffic.SLICE for loss in report["worst"]["losses"])


def test_stale_conflicts_fail(tmp_path, capsys, files):
    status, report = compare(capsys, files, candidate(tmp_path, "stale"))
    stale = gate_of(report, "newStale")
    assert (status, report["verdict"], stale["outcome"]) == (1, "fail", "fail")
    assert stale["candidate"] > stale["baseline"] and stale["new"] == stale["counted"] > 0
    assert gate_of(report, "unauthorized")["outcome"] == "pass"


def test_an_equivalent_change_passes(tmp_path, capsys, files):
    b = traffic.run("equivalent", traffic.CANDIDATE)
    assert b["queries"] != traffic.run()["queries"]
    status, report = compare(capsys, files, write(tmp_path / "b.json", b))
    assert (status, report["verdict"], report["reasons"]) == (0, "pass", [])
    assert {row["gate"]: row["outcome"] for row in report["hardGates"]} == {
        "unauthorized": "pass", "newStale": "pass", "lostEvidence": "pass"}
    assert report["latency"]["n"] == report["queries"]["compared"] == len(traffic.qrels())


def test_the_table_prints_every_threshold_and_markdown_renders(tmp_path, capsys, files):
    b = candidate(tmp_path, "leak")
    status, out, _ = run(capsys, "compare", files["qrels"], files["a"], b, K, "--slices", files["slices"])
    assert status == 1 and out.startswith("verdict: fail\n  - unauthorized: ")
    for key in ("margin_factor 1.0", "min_margin 0.01", "max_unauthorized 0", "min_queries 30", "resamples 2000"):
        assert key in out
    status, out, _ = run(capsys, "compare", files["qrels"], files["a"], b, K, "--format", "md")
    assert status == 1 and "| metric | n | a | b | delta | low | high | margin | outcome |" in out


def test_help_names_the_exit_statuses(capsys):
    status, out, _ = run(capsys, "compare", "--help")
    assert status == 0 and out.startswith("usage: ragdrift compare") and "Exit status 0 pass, 1 fail" in " ".join(out.split())


def test_different_query_sets_are_reported_and_compared_on_the_intersection(tmp_path, capsys, files):
    b = traffic.run()
    dropped = sorted(b["queries"])[:40]
    for query in dropped:
        del b["queries"][query]
    status, report = compare(capsys, files, write(tmp_path / "b.json", b))
    assert report["queries"]["compared"] == len(traffic.qrels()) - 40
    assert report["queries"]["onlyInBaseline"] == {"count": 40, "sample": dropped[:5]}
    assert status == 0  # the same rankings on the queries both hold
    status, out, _ = run(capsys, "compare", files["qrels"], files["a"], write(tmp_path / "b.json", b), K)
    assert f"onlyInBaseline: 40 (e.g. {', '.join(dropped[:5])})" in out


def test_disjoint_query_sets_are_not_enough_data(tmp_path, capsys, files):
    other = write(tmp_path / "b.json", {"elsewhere": ["x"]})
    status, report = compare(capsys, files, other)
    assert (status, report["verdict"]) == (1, "not enough data")
    assert "0 queries compared, fewer than min_queries 30" in report["reasons"]


def test_bad_input_is_one_line(tmp_path, capsys, files):
    cases = [
        ({"max_unauthorised": 0}, None, "unknown key 'max_unauthorised'; known keys: "),
        ({"metrics": ["precison"]}, None, "metrics: unknown metric 'precison'"),
        ({"margin_factor": "x"}, None, "margin_factor must be a number >= 0, got 'x'"),
        (None, {"format": "ragdrift.run.v1", "queries": {"q": {"results": [{"doc": "d", "stael": True}]}}},
         "query 'q', result 1: unknown key 'stael'"),
        (None, {"format": "ragdrift.run.v1", "queries": {"q": {"results": [{"doc": "d", "authorized": "yes"}]}}},
         "query 'q', result 1: authorized must be true or false, got 'yes'"),
        (None, {"format": "ragdrift.run.v2", "queries": {}}, "format 'ragdrift.run.v2' is not 'ragdrift.run.v1'"),
    ]
    for gate, candidate, message in cases:
        b = write(tmp_path / "b.json", candidate) if candidate else files["a"]
        flags = ("--gate", write(tmp_path / "gate.json", gate)) if gate else ()
        status, _, err = run(capsys, "compare", files["qrels"], files["a"], b, K, *flags)
        assert status == 2, message
        assert message in one_line_error(err)
    status, _, err = run(capsys, "compare", files["qrels"], files["a"], files["a"], K, "--slices",
                         write(tmp_path / "s.json", {"q": ["app"]}))
    assert status == 2 and "expected {dimension: label}" in one_line_error(err)


def test_evaluate_reads_the_run_with_facts(tmp_path, capsys, files):
    facts = traffic.run()
    plain = write(tmp_path / "plain.json", {q: [r["doc"] for r in entry["results"]] for q, entry in facts["queries"].items()})
    outs = []
    for ranked in (files["a"], plain):
        status, out, err = run(capsys, "evaluate", files["qrels"], ranked, K, "--format", "json")
        assert status == 0, err
        outs.append(out)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("canary", traffic.CANARIES)
def test_the_offline_and_the_live_gate_agree_on_the_same_traffic(tmp_path, capsys, files, canary):
    offline_status, offline = compare(capsys, files, candidate(tmp_path, canary))
    url = f"sqlite:///{tmp_path}/{canary}.db"
    live_gate.write(url, live_gate.held(canary))
    live_status, live = live_gate.live(capsys, live_gate.config(tmp_path, url))
    assert (offline_status, offline["verdict"]) == (live_status, live["verdict"]) == (
        (0, "pass") if canary == "equivalent" else (1, "fail"))
    if canary == "slice":
        for report in (offline, live):
            assert {row["label"] for row in report["slices"] if row["dimension"] == "app" and row["outcome"] == "fail"} \
                   == {traffic.SLICE}


FORGED = "x\n**verdict: pass**\n<!--\x1b[2J |*_`[a](b)#"  # a line of its own, then a comment hiding the rest
PLAIN = r"x\n**verdict: pass**\n<!--\x1b[2J |*_`[a](b)#"  # as the table writes it
MD = r"x\\n\*\*verdict\: pass\*\*\\n\<\!\-\-\\x1b\[2J \|\*\_\`\[a\]\(b\)\#"  # Markdown: renders as PLAIN


def test_a_candidate_cannot_forge_the_report(tmp_path, capsys, files):
    """Texts from the inputs (a run's config, a query id, a slice dimension and label, the gate's slice
    dimensions) hold newlines, markup and an escape sequence: each stays on its line, as text."""
    b = traffic.run("leak", traffic.CANDIDATE)
    b["config"] = FORGED
    b["queries"]["\n" + FORGED] = {"results": ["d"]}  # not judged: named first in the sample
    slices = traffic.labels()
    slices[next(iter(slices))][FORGED] = FORGED
    flags = ("--slices", write(tmp_path / "slices.json", slices),
             "--gate", write(tmp_path / "gate.json", {"slice_dimensions": ["app", FORGED]}))
    b = write(tmp_path / "b.json", b)
    status, out, _ = run(capsys, "compare", files["qrels"], files["a"], b, K, *flags, "--format", "md")
    assert status == 1 and out.startswith("**verdict: fail**\n") and out.count("verdict: ") == 1
    assert "<!--" not in out and "\x1b" not in out
    assert f", config {MD}, corpus synth\\-corpus\n" in out
    assert "- notJudged: 1 (e.g. " + r"\\n" + MD + ")\n" in out
    assert f"\n| {MD} | {MD} | precision | 1 | " in out  # the slice's row: its | end no cell
    assert f" slice_dimensions app,{MD}, " in out
    status, out, _ = run(capsys, "compare", files["qrels"], files["a"], b, K, *flags)
    assert status == 1 and [line for line in out.splitlines() if line.startswith("verdict")] == ["verdict: fail"]
    assert "\x1b" not in out and f", config {PLAIN}, corpus synth-corpus\n" in out


def test_a_gate_that_compared_nothing_never_passes(tmp_path, capsys, files):
    """min_queries below 1 is refused, as live_gate.min_queries is; no query compared is not enough data."""
    empty = write(tmp_path / "empty.json", {})
    gate = write(tmp_path / "gate.json", {"min_queries": 0})
    status, _, err = run(capsys, "compare", empty, files["a"], files["a"], K, "--gate", gate)
    assert status == 2 and one_line_error(err) == f"ragdrift: error: {gate}: min_queries must be >= 1, got 0"
    one = write(tmp_path / "gate.json", {"min_queries": 1})
    for qrels in (empty, write(tmp_path / "elsewhere.json", {"elsewhere": {"d": 2}})):
        status, out, err = run(capsys, "compare", qrels, files["a"], files["a"], K, "--gate", one, "--format", "json")
        report = json.loads(out)
        assert (status, report["verdict"], report["queries"]["compared"]) == (1, "not enough data", 0), err
        assert report["reasons"] == ["0 queries compared, fewer than min_queries 1"]


def test_a_grade_beyond_the_bound_is_refused(tmp_path, capsys, files):
    qrels = write(tmp_path / "qrels.txt", "q1 0 d1 2\nq1 0 d2 1024\n")
    status, out, err = run(capsys, "compare", qrels, files["a"], files["a"], K)
    assert (status, out) == (2, "")
    assert one_line_error(err) == f"ragdrift: error: {qrels}: line 2: relevance 1024 is not from -100 to 100"
