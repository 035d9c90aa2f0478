"""`ragdrift judgments import` end to end: a batch built by `ragdrift batch
build` from a replayed generated stream, judged in each file format, imported
into a real SQLite store as versioned qrels."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from agent import synth
from agent.cli import main
from agent.core.config import CoreConfig
from agent.core.escape import plain
from agent.core.judgments.labels import Label
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState
from agent.io.settings.agent import load
from agent.io.settings.judgment import judgment_config
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES as QUEUE
from agent.io.store.queue import Queue

WEEK = "2026-W48"


def replayed_batch(tmp_path, **judgment) -> tuple:
    """A config, and the directory of the batch `ragdrift batch build` makes
    of a generated week replayed through a partition's judging state."""
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({
        "store": {"url": f"sqlite:///{tmp_path}/state.db"},
        "judgment": {"export_dir": str(tmp_path / "batches"), "budget": 2, "uniform_budget": 4,
                     "double_judged_share": 0.5, "salt": "judgments-cli", **judgment},
    }))
    settings = load(path)
    state = PartitionState(CoreConfig(), judgment=judgment_config(settings.judgment))
    start = datetime(2026, 11, 24, tzinfo=UTC)  # a Tuesday of 2026-W48
    for line in synth.generate(600, seed=48, start=start, rate=0.01, incidents=[synth.parse_incident("stale@0.5")]):
        try:
            state.process(line)
        except RejectedEvent:
            pass
    changes, incidents = state.feature("judgment").take()
    with Store(settings.store.url, None, QUEUE) as store, store.engine.begin() as conn:
        Queue(store).writes(settings.kafka.group_id, "t", 0, changes.added, (), incidents)(conn)
    assert main(["batch", "build", "--config", str(path), "--week", WEEK]) == 0
    (directory,) = (tmp_path / "batches").iterdir()
    return path, directory


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One batch for the module; each test copies its store (never shares writes)."""
    return replayed_batch(tmp_path_factory.mktemp("built"))


def copy_store(config, tmp_path):
    """A config like `config` with a copy of its SQLite store: a test's imports stay its own."""
    doc = yaml.safe_load(config.read_text())
    db = tmp_path / "state.db"
    db.write_bytes(Path(doc["store"]["url"].removeprefix("sqlite:///")).read_bytes())
    copy = tmp_path / "ragdrift.yaml"
    copy.write_text(yaml.safe_dump({**doc, "store": {"url": f"sqlite:///{db}"}}))
    return copy


@pytest.fixture
def batch(built, tmp_path):
    path, directory = built
    items = [json.loads(line) for line in (directory / "items.jsonl").read_text().splitlines()]
    return copy_store(path, tmp_path), directory, items


def grade_of(chunk: str, judge: str) -> int:
    """A made-up but fixed judgment."""
    return sum(map(ord, chunk + judge)) % 4


def expected(items: list[dict]) -> list[Label]:
    """What judged.jsonl below holds: "ana" on every chunk, "bo" too on double-judged items."""
    batch_id = items[0]["item"].rsplit("-", 1)[0]
    return sorted((Label(batch_id=batch_id, item=i["item"], chunk=c["chunk"], judge=judge, grade=grade_of(c["chunk"], judge))
                   for i in items for judge in ("ana", "bo")[:i["judges"]] for c in i["chunks"]),
                  key=lambda x: x.pair)


def judged_jsonl(items: list[dict]) -> str:
    """items.jsonl as judges give it back: a line per item and judge, a grade per chunk."""
    return "".join(
        json.dumps({**i, "judge": judge, "chunks": [{**c, "grade": grade_of(c["chunk"], judge)} for c in i["chunks"]]})
        + "\n" for i in items for judge in ("ana", "bo")[:i["judges"]])


def judged_csv(directory, grades: dict[tuple[str, str], tuple[int, str]]) -> str:
    """items.csv with the judge's four columns: "ana" grades (and tags) the (item, chunk) rows in `grades`."""
    rows = list(csv.reader(io.StringIO((directory / "items.csv").read_text())))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*rows[0], "judge", "grade", "tags", "evidence_group"])
    for row in rows[1:]:
        grade, tags = grades.get((row[0], row[4]), ("", ""))
        writer.writerow([*row, "ana" if grade != "" else "", grade, tags, ""])
    return out.getvalue()


def latest(config, batch_id: str) -> list[Label]:
    with Store(load(config).store.url, None, QRELS) as store:
        return Qrels(store).latest(batch_id)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_judged_items_file_imports_once(batch, tmp_path, capsys):
    config, directory, items = batch
    assert len(items) >= 6 and any(i["judges"] == 2 for i in items)
    judged = tmp_path / "judged.jsonl"
    judged.write_text(judged_jsonl(items))
    want = expected(items)

    code, out, _ = run(capsys, "judgments", "import", str(judged), "--config", str(config), "--format", "json")
    assert code == 0
    found = json.loads(out)
    fits = found.pop("calibrations")
    assert found.pop("calibration_error") is None
    assert found == {"imported": True, "files": [{
        "file": str(judged), "format": "jsonl", "batches": [directory.name], "labels": len(want),
        "new": len(want), "changed": 0, "unchanged": 0, "skipped": 0, "duplicates": []}]}
    assert latest(config, directory.name) == want

    # the import refitted the score calibrations: one per app and pipeline version, on every graded chunk
    key = [json.loads(line) for line in (directory / "key.jsonl").read_text().splitlines()]
    graded: dict[tuple[str, str | None], int] = {}
    for row in key:
        if row["item"]:
            pair = (row["app"], row["pipeline_version"])
            graded[pair] = graded.get(pair, 0) + len(row["chunks"])
    assert {(f["app"], f["pipeline_version"]): f["labels"] for f in fits} == graded
    code, out, _ = run(capsys, "judgments", "calibrate", "--config", str(config), "--format", "json")
    assert code == 0 and json.loads(out)["calibrations"] == fits

    code, out, _ = run(capsys, "judgments", "import", str(judged), "--config", str(config))
    assert code == 0
    assert out == f"{judged}: {len(want)} labels of {directory.name}: nothing new (already imported)\n"
    assert latest(config, directory.name) == want


FORGED = "x\ncalibration app / v1: 999 judged chunks, cross-validated ECE 0.000\x1b[2J"  # a forged line


def test_a_fits_app_and_version_from_the_key_stay_on_their_line(tmp_path, capsys):
    """The app and pipeline version a fit names come from the batch's key.jsonl: escaped, one line a fit."""
    config, directory = replayed_batch(tmp_path)
    key = directory / "key.jsonl"
    key.write_text("".join(json.dumps({**json.loads(line), "app": FORGED, "pipeline_version": FORGED}) + "\n"
                           for line in key.read_text().splitlines()))
    items = [json.loads(line) for line in (directory / "items.jsonl").read_text().splitlines()]
    judged = tmp_path / "judged.jsonl"
    judged.write_text(judged_jsonl(items))
    for argv in (["import", str(judged)], ["calibrate"]):
        code, out, err = run(capsys, "judgments", *argv, "--config", str(config))
        fits = [line for line in out.splitlines() if line.startswith("calibration ")]
        assert code == 0 and "\x1b" not in out + err and len(fits) == 1, out
        assert fits[0].startswith(f"calibration {plain(FORGED)} / {plain(FORGED)}: ")


def test_a_judged_csv_changes_what_it_grades_anew(batch, tmp_path, capsys):
    config, directory, items = batch
    jsonl = tmp_path / "judged.jsonl"
    jsonl.write_text(judged_jsonl(items))
    assert main(["judgments", "import", str(jsonl), "--config", str(config)]) == 0
    first, second = items[0], items[1]
    grades = {(first["item"], c["chunk"]): (grade_of(c["chunk"], "ana"), "") for c in first["chunks"]}
    changed = (second["item"], second["chunks"][0]["chunk"])
    grades[changed] = ((grade_of(changed[1], "ana") + 1) % 4, "stale; duplicate")
    sheet = tmp_path / "judged.csv"
    sheet.write_text(judged_csv(directory, grades))
    skipped = sum(len(i["chunks"]) for i in items) - len(grades)
    capsys.readouterr()

    code, out, _ = run(capsys, "judgments", "import", str(sheet), "--config", str(config))
    assert code == 0
    summary, *fits = out.splitlines()
    assert summary == (f"{sheet}: {len(grades)} labels of {directory.name}: 0 new, 1 changed, {len(grades) - 1} "
                       f"unchanged; {skipped} without a grade skipped")
    assert fits and all(line.startswith("calibration ") for line in fits)  # a changed label refits
    now = {x.pair: x for x in latest(config, directory.name)}
    assert now[(directory.name, *changed, "ana")] == Label(batch_id=directory.name, item=changed[0], chunk=changed[1],
                                                           judge="ana", grade=grades[changed][0],
                                                           tags=("duplicate", "stale"))
    with Store(load(config).store.url, None, QRELS) as store:
        history = Qrels(store).history(directory.name, *changed, "ana")
    assert [(v.version, v.label.grade, v.source) for v in history] == [
        (1, grade_of(changed[1], "ana"), str(jsonl)), (2, grades[changed][0], str(sheet))]


def test_a_bad_row_refuses_the_command_and_names_file_and_line(batch, tmp_path, capsys):
    config, directory, items = batch
    good = tmp_path / "good.jsonl"
    good.write_text(judged_jsonl(items[1:]))  # the sheet below grades the first item
    first = items[0]
    grades = {(first["item"], c["chunk"]): (2, "") for c in first["chunks"]}
    bad_chunk = (first["item"], first["chunks"][-1]["chunk"])
    grades[bad_chunk] = (5, "")
    sheet = tmp_path / "bad.csv"
    sheet.write_text(judged_csv(directory, grades))
    line = 1 + next(n for n, row in enumerate(csv.reader(io.StringIO(sheet.read_text())), 0)
                    if row[0] == bad_chunk[0] and row[4] == bad_chunk[1])  # no text resolved: one line per row
    ghost = tmp_path / "ghost.jsonl"
    ghost.write_text(json.dumps({"item": "2020-W01-00000000-0001", "chunk": "2020-W01-00000000-0001-1",
                                 "judge": "ana", "grade": 1}) + "\n")

    code, out, err = run(capsys, "judgments", "import", str(good), str(sheet), str(ghost), "--config", str(config))
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"ragdrift: {sheet}: line {line}: grade (column 9) 5 is not one of 0, 1, 2, 3",
        f"ragdrift: {ghost}: line 1: item 2020-W01-00000000-0001: batch 2020-W01-00000000 is not a known batch",
        "ragdrift: error: nothing imported: 2 problem(s) in 2 file(s)",
    ]
    assert latest(config, directory.name) == []  # not even the good file

    code, out, err = run(capsys, "judgments", "import", str(sheet), "--config", str(config), "--format", "json")
    assert code == 2 and json.loads(out) == {"imported": False, "problems": [
        {"file": str(sheet), "unit": "line", "line": line, "reason": "grade (column 9) 5 is not one of 0, 1, 2, 3"}]}
    assert err == "ragdrift: error: nothing imported: 1 problem(s) in 1 file(s)\n"


def test_a_label_studio_export_file_imports_too(batch, tmp_path, capsys):
    from tests.core.test_judgments_importing import annotation, result

    config, directory, items = batch
    item = items[0]
    export = [{"id": 7, "data": {"item": item["item"], "chunks": item["chunks"]}, "annotations": [
        annotation(1, 3, *(result(i, "1", group="A") for i in range(len(item["chunks"])))),
        annotation(2, 4, cancelled=True)]}]
    path = tmp_path / "project-7-export.json"
    path.write_text(json.dumps(export))
    code, out, _ = run(capsys, "judgments", "import", str(path), "--config", str(config), "--format", "json")
    assert code == 0 and json.loads(out)["files"][0] | {"file": None} == {
        "file": None, "format": "label-studio", "batches": [directory.name], "labels": len(item["chunks"]),
        "new": len(item["chunks"]), "changed": 0, "unchanged": 0, "skipped": 1, "duplicates": []}
    assert latest(config, directory.name) == sorted(
        (Label(batch_id=directory.name, item=item["item"], chunk=c["chunk"], judge="label-studio:3", grade=1, tags=(),
               evidence_group="A") for c in item["chunks"]),
        key=lambda x: x.pair)


def test_usage_errors_are_one_line(batch, tmp_path, capsys):
    config, _, _ = batch
    code, _, err = run(capsys, "judgments", "import", str(tmp_path / "missing.jsonl"), "--config", str(config))
    assert code == 2 and err == f"ragdrift: error: cannot read {tmp_path / 'missing.jsonl'}: No such file or directory\n"
    binary = tmp_path / "labels.csv"
    binary.write_bytes(b"\xff\xfe\x00item")
    code, _, err = run(capsys, "judgments", "import", str(binary), "--config", str(config))
    assert code == 2 and err.startswith(f"ragdrift: error: cannot read {binary}: 'utf-8' codec") and err.count("\n") == 1
    with pytest.raises(SystemExit) as info:
        main(["judgments", "pull", "--project", "x", "--label-studio-url", "http://127.0.0.1:9"])
    assert info.value.code == 2 and "invalid int value" in capsys.readouterr().err
    code, _, err = run(capsys, "judgments", "pull", "--project", "1", "--label-studio-url", "http://127.0.0.1:9",
                       "--label-studio-token-file", str(tmp_path / "no-token"), "--config", str(config))
    assert code == 2 and "cannot read Label Studio token file" in err and err.count("\n") == 1


TEXT = "Refunds are issued within 30 days of purchase when the receipt is shown. " * 140  # ~10,000 characters


@pytest.mark.parametrize("form", ["csv", "jsonl"])
def test_swapped_columns_never_print_the_judged_text(batch, tmp_path, capsys, form):
    """A sheet whose chunk and chunk_text columns were swapped: every row is refused by
    file, line and column, and no word of any text reaches the output."""
    config, directory, items = batch
    if form == "csv":
        rows = list(csv.reader(io.StringIO((directory / "items.csv").read_text())))
        header = [{"chunk": "chunk_text", "chunk_text": "chunk"}.get(h, h) for h in rows[0]]
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow([*header, "judge", "grade", "tags", "evidence_group"])
        text_at = rows[0].index("chunk_text")
        for row in rows[1:]:
            writer.writerow([*row[:text_at], TEXT, *row[text_at + 1:], "ana", 2, "", ""])
        sheet = tmp_path / "swapped.csv"
        sheet.write_text(out.getvalue())
    else:
        sheet = tmp_path / "swapped.jsonl"
        sheet.write_text("".join(json.dumps({**i, "judge": "ana", "chunks": [
            {**c, "chunk": TEXT, "text": c["chunk"], "grade": 2} for c in i["chunks"]]}) + "\n" for i in items))

    code, out, err = run(capsys, "judgments", "import", str(sheet), "--config", str(config))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 + sum(len(i["chunks"]) for i in items)
    assert all(len(line) < 200 + len(str(sheet)) for line in lines), max(lines, key=len)
    assert not any(word in err for word in ("Refunds", "receipt", "purchase"))
    if form == "csv":
        assert lines[0] == f"ragdrift: {sheet}: line 2: chunk (column 7) (a text of {len(TEXT.strip())} characters) is not an id"
    else:
        assert lines[0] == f"ragdrift: {sheet}: line 1: chunk 1 of the item: chunk (a text of {len(TEXT)} characters) is not an id"
    assert latest(config, directory.name) == []


def test_a_label_given_twice_across_files_is_refused_not_versioned(batch, tmp_path, capsys):
    config, directory, items = batch
    chunk = items[0]["chunks"][0]["chunk"]
    first, second = tmp_path / "monday.jsonl", tmp_path / "tuesday.csv"
    first.write_text(json.dumps({"item": items[0]["item"], "chunk": chunk, "judge": "ana", "grade": 1}) + "\n")
    second.write_text(f"item,chunk,judge,grade\n{items[0]['item']},{chunk},ana,3\n")
    code, out, err = run(capsys, "judgments", "import", str(first), str(second), "--config", str(config))
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (f"ragdrift: {second}: line 2: chunk {chunk} is labelled twice by judge 'ana' "
                                   f"(first in {first}, line 1)")
    assert latest(config, directory.name) == []


@pytest.mark.parametrize(("name", "content", "place"), [
    ("sup.csv", lambda item, chunk: f"item,chunk,judge,grade\n{item},{chunk},ana,\u00b2\n",
     "line 2: grade (column 4) '\u00b2' is not one of 0, 1, 2, 3"),
    ("sup.json", lambda item, chunk: json.dumps([{"id": 1, "data": {"item": item, "chunks": [{"chunk": chunk}]},
                                                  "annotations": [{"id": 2, "completed_by": 3, "result": [
                                                      {"from_name": "grade_0", "value": {"choices": ["\u00b2"]}}]}]}]),
     "task 1: task id 1, annotation 2: chunk {chunk}: grade '\u00b2' is not one of 0, 1, 2, 3"),
    ("annotations.json", lambda item, chunk: json.dumps([{"id": 1, "data": {"item": item, "chunks": [{"chunk": chunk}]},
                                                          "annotations": 5}]),
     "task 1: task id 1: annotations 5 is not a list"),
    ("result.json", lambda item, chunk: json.dumps([{"id": 1, "data": {"item": item, "chunks": [{"chunk": chunk}]},
                                                     "annotations": [{"id": 2, "completed_by": 3, "result": 7}]}]),
     "task 1: task id 1, annotation 2: result 7 is not a list"),
])  # fmt: skip
def test_odd_grades_and_wrong_types_are_one_line_each_not_a_traceback(batch, tmp_path, capsys, name, content, place):
    config, _, items = batch
    item, chunk = items[0]["item"], items[0]["chunks"][0]["chunk"]
    path = tmp_path / name
    path.write_text(content(item, chunk), encoding="utf-8")
    code, out, err = run(capsys, "judgments", "import", str(path), "--config", str(config))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"ragdrift: {path}: {place.format(chunk=chunk)}",
                                "ragdrift: error: nothing imported: 1 problem(s) in 1 file(s)"]


def test_a_calibration_that_fails_leaves_the_import_committed_and_calibration_owed(batch, tmp_path, capsys):
    """A pooled batch that cannot be read (archived; on another replica's disk) fails the fit
    after the labels committed: a warning, exit 0, and the next import fits, though nothing is new."""
    config, directory, items = batch
    judged = tmp_path / "judged.jsonl"
    judged.write_text(judged_jsonl(items))
    manifest = directory / "manifest.json"
    archived = tmp_path / "manifest.json"
    manifest.rename(archived)
    try:
        code, out, err = run(capsys, "judgments", "import", str(judged), "--config", str(config))
        assert code == 0
        assert out.splitlines()[0].startswith(f"{judged}: ") and " new, 0 changed" in out
        assert len(err.splitlines()) == 1 and err.startswith(
            "ragdrift: warning: labels imported, but the calibration failed and stays owed") and str(manifest) in err
        assert latest(config, directory.name) == expected(items)

        code, out, err = run(capsys, "judgments", "import", str(judged), "--config", str(config), "--format", "json")
        assert code == 0 and json.loads(out)["calibrations"] == [] and "cannot read" in json.loads(out)["calibration_error"]
        assert err.startswith("ragdrift: warning: ")  # still owed
    finally:
        archived.rename(manifest)
    code, out, err = run(capsys, "judgments", "import", str(judged), "--config", str(config))
    assert code == 0 and err == ""
    summary, *fits = out.splitlines()
    assert summary.endswith("nothing new (already imported)")
    assert fits and all(line.startswith("calibration ") for line in fits)  # the owed fit, made now
    code, out, err = run(capsys, "judgments", "import", str(judged), "--config", str(config))
    assert code == 0 and err == "" and out == f"{summary}\n"  # paid: nothing to fit again
