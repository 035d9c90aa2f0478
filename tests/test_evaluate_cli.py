"""`ragdrift evaluate`: by hand, the seed document's own script reproduced byte for byte, trec_eval
(pytrec_eval) agreeing through the CLI, and one line naming file and line for every bad input."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import one_line_error, run

SEED_SCRIPT = Path(__file__).parent / "data" / "seed" / "retrieval_metrics.py"
QRELS = {"q1": {"d1": 3, "d2": 2, "d3": 1, "d4": 0, "d5": 2}, "q2": {"d1": 2}}
L3, L5, L6 = math.log2(3), math.log2(5), math.log2(6)


def write(path: Path, data) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def evaluate(capsys, *args) -> dict:
    status, out, err = run(capsys, "evaluate", *args, "--format", "json")
    assert status == 0, err
    return json.loads(out)


def test_seed_policy_by_hand(tmp_path, capsys):
    qrels = write(tmp_path / "qrels.json", QRELS)
    ranked = write(tmp_path / "run.json", {"q1": ["d4", "d2", "d9", "d1", "d3"], "q2": ["x"]})
    out = evaluate(capsys, qrels, ranked, "5")
    q1 = out["perQuery"]["q1"]
    # relevant (>= 2): d1, d2, d5; in the top 5: d2 (rank 2), d1 (rank 4); gains 2^g - 1
    assert q1["precision"] == pytest.approx(2 / 5) and q1["recall"] == pytest.approx(2 / 3)
    assert q1["reciprocalRank"] == 0.5 and q1["hitRate"] == 1.0
    assert q1["nDCG"] == pytest.approx((3 / L3 + 7 / L5 + 1 / L6) / (7 + 3 / L3 + 3 / 2 + 1 / L5))
    assert out["perQuery"]["q2"] == {"precision": 0.0, "recall": 0.0, "reciprocalRank": 0.0, "hitRate": 0.0, "nDCG": 0.0}
    assert out["k"] == 5 and out["queryCount"] == 2
    assert out["macro"] == {"precision": 0.2, "recall": round(1 / 3, 4), "reciprocalRank": 0.25, "hitRate": 0.5,
                            "nDCG": round(q1["nDCG"] / 2, 4)}


def test_trec_policy_by_hand_from_trec_files(tmp_path, capsys):
    qrels = write(tmp_path / "qrels.txt", "".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items()))
    # the rank column is ignored; d1 and d3 tie at 0.5, and trec_eval puts the larger docno first: d3, d1
    lines = [("d4", 0.9), ("d1", 0.5), ("d2", 0.8), ("d9", 0.7), ("d3", 0.5)]
    ranked = write(tmp_path / "run.txt", "".join(f"q1 Q0 {d} 1 {s} tag\n" for d, s in lines))
    out = evaluate(capsys, qrels, ranked, "5", "--policy", "trec")
    assert out["queryCount"] == 1  # q2 is not in the run
    q1 = out["perQuery"]["q1"]
    # order d4 d2 d9 d3 d1; relevant (>= 1): d1, d2, d3, d5; P@5 over 5; linear gains 0 2 0 1 3
    assert q1["precision"] == pytest.approx(3 / 5) and q1["recall"] == pytest.approx(3 / 4)
    assert q1["reciprocalRank"] == 0.5 and q1["hitRate"] == 1.0
    assert q1["nDCG"] == pytest.approx((2 / L3 + 1 / L5 + 3 / L6) / (3 + 2 / L3 + 2 / 2 + 1 / L5))


def test_options_override_the_policy(tmp_path, capsys):
    qrels = write(tmp_path / "qrels.json", QRELS)
    ranked = write(tmp_path / "run.json", {"q1": ["d3", "d1"], "q2": ["d1"]})
    out = evaluate(capsys, qrels, ranked, "2", "--relevance-threshold", "1", "--gain", "linear")
    assert out["perQuery"]["q1"]["precision"] == 1.0  # d3 (grade 1) counts at threshold 1
    assert out["perQuery"]["q1"]["nDCG"] == pytest.approx((1 + 3 / L3) / (3 + 2 / L3))
    status, table, _ = run(capsys, "evaluate", qrels, ranked, "2", "--policy", "trec")
    assert status == 0 and "relevant at grade >= 1" in table and "precision over the k count" in table


def test_the_seed_script_reproduced_byte_for_byte(tmp_path, capsys):
    """Random qrels and runs, duplicates and missing queries included: the same stdout as the document's script."""
    rnd = random.Random(5)
    docs = [f"d{i}" for i in range(8)]
    for trial in range(20):
        qrels = {f"q{q}": {d: rnd.randint(0, 3) for d in rnd.sample(docs, rnd.randint(0, 6))} for q in range(4)}
        ranked = {f"q{q}": rnd.choices(docs, k=rnd.randint(0, 7)) for q in range(5)}
        k = str(rnd.randint(1, 6))
        files = write(tmp_path / "qrels.json", qrels), write(tmp_path / "run.json", ranked)
        script = subprocess.run([sys.executable, str(SEED_SCRIPT), *files, k], capture_output=True, text=True, check=True)
        status, out, err = run(capsys, "evaluate", *files, k, "--duplicates", "keep", "--format", "json")
        assert status == 0, err
        assert out == script.stdout, trial


def test_trec_agrees_with_pytrec_eval_through_the_cli(tmp_path, capsys):
    import pytrec_eval

    rnd = random.Random(13)
    docs = [f"d{i:02d}" for i in range(12)]
    for trial in range(30):
        qrels = {f"q{q}": {d: rnd.randint(0, 3) for d in rnd.sample(docs, rnd.randint(1, 8))} for q in range(5)}
        # scores from a few values: ties, ordered by docno as trec_eval does
        scored = {f"q{q}": {d: float(rnd.randint(0, 4)) for d in rnd.sample(docs, rnd.randint(1, 10))} for q in range(6)}
        k, level = rnd.randint(1, 8), rnd.choice((1, 2))
        qrels_file = write(tmp_path / "qrels.txt", "".join(f"{q} 0 {d} {g}\n" for q, ds in qrels.items() for d, g in ds.items()))
        run_file = write(tmp_path / "run.txt", "".join(f"{q} Q0 {d} {i} {s} t\n" for q, ds in scored.items()
                                                      for i, (d, s) in enumerate(ds.items(), 1)))
        out = evaluate(capsys, qrels_file, run_file, str(k), "--policy", "trec", "--relevance-threshold", str(level))
        names = {f"P_{k}", f"recall_{k}", "recip_rank", f"ndcg_cut_{k}"}
        ref = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=level).evaluate(scored)
        assert set(out["perQuery"]) == set(ref), trial
        for query, row in out["perQuery"].items():
            expected = (ref[query][f"P_{k}"], ref[query][f"recall_{k}"], ref[query]["recip_rank"], ref[query][f"ndcg_cut_{k}"])
            assert (row["precision"], row["recall"], row["reciprocalRank"], row["nDCG"]) == pytest.approx(expected), (trial, query)


def test_duplicates_are_refused_by_name_or_kept(tmp_path, capsys):
    qrels = write(tmp_path / "qrels.json", QRELS)
    lines = write(tmp_path / "run.txt", "q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8 t\nq1 Q0 d1 3 0.7 t\n")
    status, _, err = run(capsys, "evaluate", qrels, lines, "3")
    assert status == 2
    assert one_line_error(err).endswith(f"{lines}: line 3: duplicate doc id 'd1' for query 'q1' (first on line 1)")
    listed = write(tmp_path / "run.json", {"q1": ["d2", "d1", "d2"]})
    status, _, err = run(capsys, "evaluate", qrels, listed, "3")
    assert status == 2 and one_line_error(err).endswith(f"{listed}: query 'q1': duplicate doc id 'd2'")
    kept = evaluate(capsys, qrels, lines, "3", "--duplicates", "keep")
    assert kept["perQuery"]["q1"]["precision"] == 1.0  # d1, d2, d1: each repeat counts again


@pytest.mark.parametrize(("which", "text", "message"), [
    ("qrels", "q1 0 d1 2\nq1 0 d2\n", "line 2: expected 4 fields (qid iter docno rel), got 3"),
    ("qrels", "q1 0 d1 2\n\nq1 0 d2 high\n", "line 3: relevance 'high' is not an integer"),
    ("qrels", "q1 0 d1 2\nq1 0 d1 3\n", "line 2: doc 'd1' of query 'q1' is judged twice"),
    ("qrels", '{"q1": {"d1": 2,\n "d2": 3,,}}', "line 2: not JSON: Expecting property name enclosed in double quotes"),
    ("qrels", '{"q1": {"d1": "2"}}', "query 'q1': grade of 'd1' is not a finite number: '2'"),
    ("qrels", '{"q1": {"d1": NaN}}', "NaN is not a finite number"),
    ("qrels", '{"q1": {"d1": 1e999}}', "'1e999' is too large: not a finite number"),
    ("qrels", "q1 0 d1 \u0663\n", "line 1: relevance '\u0663' is not an integer"),
    ("run", "q1 Q0 d1 1 \u0663 t\n", "line 1: score '\u0663' is not a finite number"),
    ("run", "q1 Q0 d1 1 -inf t\n", "line 1: score '-inf' is not a finite number"),
    ("qrels", '{"q1": {"d1": 2, "d1": 3}}', "key 'd1' appears twice in one object"),
    ("qrels", "\n\n", "empty: no qrels or run lines"),
    ("run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n", "line 2: score 'high' is not a finite number"),
    ("run", "q1 Q0 d1 1 0.5\n", "line 1: expected 6 fields (qid Q0 docno rank score tag), got 5"),
    ("run", '{"q1": "d1"}', "query 'q1': a run maps each query to a list of doc ids"),
    ("qrels", "q1 0 d1 2\nq1 0 d2 1024\n", "line 2: relevance 1024 is not from -100 to 100"),
    ("qrels", "q1 0 d1 -101\n", "line 1: relevance -101 is not from -100 to 100"),
    ("qrels", '{"q1": {"d1": 1023}}', "query 'q1': grade of 'd1' is not from -100 to 100: 1023"),
    ("qrels", '{"q1": {"d1": 100.5}}', "query 'q1': grade of 'd1' is not from -100 to 100: 100.5"),
])  # fmt: skip
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, capsys, which, text, message):
    files = {"qrels": write(tmp_path / "qrels.txt", "q1 0 d1 2\n"), "run": write(tmp_path / "run.txt", "q1 Q0 d1 1 1 t\n")}
    files[which] = write(tmp_path / f"bad-{which}", text)
    status, out, err = run(capsys, "evaluate", files["qrels"], files["run"], "3")
    assert status == 2 and out == ""
    assert one_line_error(err) == f"ragdrift: error: {files[which]}: {message}"


@pytest.mark.parametrize("args", [["qrels", "run", "0"], ["missing.json", "run", "3"], ["qrels", "run", "three"],
                                  ["qrels", "run", "3", "--relevance-threshold", "nan"],
                                  ["qrels", "run", "3", "--relevance-threshold=-inf"]])
def test_usage_errors(tmp_path, capsys, args):
    names = {"qrels": write(tmp_path / "q.txt", "q1 0 d1 2\n"), "run": write(tmp_path / "r.txt", "q1 Q0 d1 1 1 t\n")}
    status, _, err = run(capsys, "evaluate", *(names.get(a, a) for a in args))
    assert status == 2
    assert len(err.strip().splitlines()) == 1 and ("K" in err or "missing.json" in err or "finite" in err), err


@pytest.mark.parametrize("form", ["trec", "json"])
def test_a_byte_order_mark_is_not_part_of_the_first_query(tmp_path, capsys, form):
    """Saved by a spreadsheet or Notepad, both files start with U+FEFF; the first query must still be q1."""
    if form == "trec":
        qrels = write(tmp_path / "qrels.txt", "\ufeffq1 0 d1 2\nq2 0 d1 2\n")
        ranked = write(tmp_path / "run.txt", "\ufeffq1 Q0 d1 1 0.9 t\nq2 Q0 d1 1 0.9 t\n")
    else:
        qrels = write(tmp_path / "qrels.json", "\ufeff" + json.dumps({"q1": {"d1": 2}, "q2": {"d1": 2}}))
        ranked = write(tmp_path / "run.json", "\ufeff" + json.dumps({"q1": ["d1"], "q2": ["d1"]}))
    for policy in ("seed", "trec"):
        out = evaluate(capsys, qrels, ranked, "1", "--policy", policy)
        assert set(out["perQuery"]) == {"q1", "q2"} and out["macro"]["precision"] == 1.0, out


def test_grades_at_the_bound_are_scored_and_the_json_is_strict(tmp_path, capsys):
    """Grades of -100 and 100, the bound: finite figures, and JSON that a strict reader takes."""
    qrels = write(tmp_path / "qrels.txt", "q1 0 d1 100\nq1 0 d2 100\nq1 0 d3 -100\n")
    ranked = write(tmp_path / "run.txt", "q1 Q0 d1 1 3 t\nq1 Q0 d3 2 2 t\nq1 Q0 d2 3 1 t\n")
    status, out, err = run(capsys, "evaluate", qrels, ranked, "3", "--format", "json")
    assert status == 0, err

    def refuse(name: str):
        raise AssertionError(f"{name} in the output")

    found = json.loads(out, parse_constant=refuse)
    # gains 2^100 - 1 at ranks 1 and 3, about -1 at rank 2; ideal 2^100 - 1 at ranks 1 and 2
    assert found["perQuery"]["q1"]["nDCG"] == pytest.approx((1 + 1 / 2) / (1 + 1 / L3))


def test_json_output_refuses_what_json_cannot_hold():
    from agent.cli.common import UsageError, json_text

    assert json_text({"nDCG": 0.5}, indent=2) == '{\n  "nDCG": 0.5\n}'
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(UsageError, match="not finite"):
            json_text({"perQuery": {"q1": {"nDCG": value}}})
