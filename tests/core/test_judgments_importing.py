"""Judges' files to labels: each format by hand, every kind of bad row named
with its file and line, a bad file refused whole, and any labels surviving a
round trip through each format."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.judgments.importing import (
    Parsed,
    Problem,
    Refused,
    batch_of,
    checked,
    format_of,
    keys_of,
    parse,
    parse_label_studio,
)
from agent.core.judgments.labels import TAGS, Label
from tests.core.test_properties import FAST

B = "2026-W48-0f1e2d3c"
I1, I2 = f"{B}-0001", f"{B}-0002"
KEY = [
    {"item": I1, "chunks": [{"chunk": f"{I1}-1"}, {"chunk": f"{I1}-2"}]},
    {"item": I2, "chunks": [{"chunk": f"{I2}-1"}, {"chunk": f"{I2}-2"}, {"chunk": f"{I2}-3"}]},
    {"item": None, "chunks": []},  # a zero-result event: nothing to judge
]
KEYS = {B: keys_of(KEY)}


def labels(file: str, text: str, keys=KEYS) -> list[Label]:
    (found,) = checked([parse(file, text)], keys)
    return found


def refused(file: str, text: str, keys=KEYS) -> list[tuple[int, str]]:
    """(line, reason) of each problem; the file must be refused."""
    with pytest.raises(Refused) as info:
        labels(file, text, keys)
    assert all(p.file == file for p in info.value.problems)
    return [(p.line, p.reason) for p in info.value.problems]


def jsonl(*rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_keys_and_batch_of_item_ids():
    assert KEYS[B] == {I1: {f"{I1}-1", f"{I1}-2"}, I2: {f"{I2}-1", f"{I2}-2", f"{I2}-3"}}
    assert batch_of(I1) == B and batch_of("odd") == "odd"


@pytest.mark.parametrize(("name", "text", "want"), [
    ("a.jsonl", "", "jsonl"), ("a.NDJSON", "", "jsonl"), ("a.csv", "{", "csv"), ("export.json", "", "label-studio"),
    ("labels", "\ufeff  [{}]", "label-studio"), ("labels", '{"item": 1}', "jsonl"), ("labels.txt", "item,chunk", "csv"),
])
def test_format_by_extension_then_content(name, text, want):
    assert format_of(name, text) == want


# -- JSON Lines --------------------------------------------------------------


def test_jsonl_item_lines_are_the_items_file_with_the_judges_fields():
    text = jsonl(
        {"item": I1, "judges": 1, "judge": "ana", "query": {"id": "q1", "text": "how?"},
         "chunks": [{"chunk": f"{I1}-1", "chunk_id": "c9", "text": "...", "grade": 3, "tags": ["stale", "duplicate"],
                     "evidence_group": "A"},
                    {"chunk": f"{I1}-2", "grade": 0}]},
        {"item": I2, "judge": "bo", "chunks": [{"chunk": f"{I2}-1", "grade": 2, "tags": None},
                                               {"chunk": f"{I2}-2", "grade": None},  # not judged yet
                                               {"chunk": f"{I2}-3", "grade": 1, "judge": "cy"}]},
    )
    parsed = parse("judged.jsonl", text)
    assert parsed.format == "jsonl" and parsed.skipped == 1 and not parsed.problems
    assert [line for line, _ in parsed.rows] == [1, 1, 2, 2]
    assert checked([parsed], KEYS)[0] == [
        Label(batch_id=B, item=I1, chunk=f"{I1}-1", judge="ana", grade=3, tags=("duplicate", "stale"), evidence_group="A"),
        Label(batch_id=B, item=I1, chunk=f"{I1}-2", judge="ana", grade=0),
        Label(batch_id=B, item=I2, chunk=f"{I2}-1", judge="bo", grade=2),
        Label(batch_id=B, item=I2, chunk=f"{I2}-3", judge="cy", grade=1),
    ]


def test_jsonl_label_lines():
    text = "\n" + jsonl({"item": I1, "chunk": f"{I1}-2", "judge": "ana", "grade": 1, "tags": ["wrong_locale"]})
    assert labels("l.jsonl", text) == [Label(batch_id=B, item=I1, chunk=f"{I1}-2", judge="ana", grade=1, tags=("wrong_locale",))]


def test_every_bad_jsonl_row_is_named_with_its_line():
    text = jsonl(
        {"item": I1, "chunk": f"{I1}-1", "judge": "ana", "grade": 2},  # good
        {"item": I1, "chunk": f"{I1}-2", "judge": "ana", "grade": 4},
        {"item": I1, "chunk": f"{I1}-2", "judge": "bo", "grade": True},
        {"item": I1, "chunk": f"{I1}-2", "judge": "cy", "grade": "2"},
        {"item": I1, "chunk": f"{I1}-2", "judge": "dee", "grade": 1, "tags": ["stale", "offtopic"]},
        {"item": I1, "chunk": f"{I1}-2", "grade": 1},
        {"chunk": f"{I1}-2", "judge": "ana", "grade": 1},
        {"item": I1, "chunk": f"{I1}-1", "judge": "ana", "grade": 3},  # the pair of line 1 again
    ) + "{not json\n" + "[1, 2]\n" + jsonl(
        {"item": I1, "chunk": f"{I1}-9", "judge": "ana", "grade": 1},
        {"item": f"{B}-0077", "chunk": f"{B}-0077-1", "judge": "ana", "grade": 1},
        {"item": "2026-W01-00000000-0001", "chunk": "x", "judge": "ana", "grade": 1},
        {"item": I2, "judge": "ana", "chunks": [{"chunk": f"{I2}-1", "grade": 2, "evidence_group": "not a group"}]},
        {"item": I2, "judge": "ana", "chunks": [{"chunk": f"{I2}-2", "grade": None, "tags": ["stale"]}]},
        {"item": I2, "judge": "ana", "chunks": "all relevant"},
        {"item": I2, "judge": "ana", "chunks": [], "chunk": f"{I2}-1"},
        {"item": I2, "chunk": f"{I2}-3", "judge": "a\nb", "grade": 1, "tags": "stale"},
    )
    problems = refused("bad.jsonl", text)
    lines = [line for line, _ in problems]
    assert lines == sorted(lines) and set(lines) == set(range(2, 19)), problems
    reasons = dict(problems)
    assert "grade 4 is not one of 0, 1, 2, 3" in reasons[2]
    assert "grade True" in reasons[3] and "grade '2'" in reasons[4]
    assert "tags: unknown tag(s) 'offtopic'" in reasons[5]
    assert reasons[6] == "judge is missing" and reasons[7] == "item is missing"
    assert reasons[8] == f"chunk {I1}-1 is labelled twice by judge 'ana' (first in bad.jsonl, line 1)"
    assert reasons[9].startswith("not JSON") and reasons[10] == "not a JSON object"
    assert reasons[11] == f"item {I1} has no chunk {I1}-9"
    assert reasons[12] == f"item {B}-0077 is not in batch {B}"
    assert reasons[13] == "item 2026-W01-00000000-0001: batch 2026-W01-00000000 is not a known batch"
    assert reasons[14] == f"chunk {I2}-1: evidence group (a text of 11 characters): 1-16 letters, digits, _ or -"
    assert reasons[15] == f"chunk {I2}-2: tags or an evidence group without a grade"
    assert reasons[16] == "chunks is not a list of chunk objects"
    assert "not both" in reasons[17]
    assert {r for line, r in problems if line == 18} == {
        "judge (a text of 3 characters): at most 128 printable characters", "tags 'stale' are not a list of tags"}


TEXT = "The quarterly revenue of ACME Corp grew by 12.4 percent, " * 180  # a chunk's text, 10,260 characters


def assert_no_text(problems) -> None:
    """No word of TEXT in any problem, and every problem a short line."""
    for p in problems:
        line = str(p)
        assert "\n" not in line and len(line) < 200, line
        assert not {"quarterly", "revenue", "ACME", "percent"} & set(line.replace(",", " ").split()), line


def test_text_in_any_field_is_never_echoed():
    rows = [{"item": I1, "chunk": f"{I1}-1", "judge": "ana", "grade": 2, field: TEXT}
            for field in ("item", "chunk", "judge", "grade", "tags", "evidence_group")]
    rows.append({"item": I1, "judge": "ana", "chunks": [{"chunk": TEXT, "grade": 1, "tags": [TEXT, "stale"]}]})
    rows.append({"item": I1, "chunk": f"{I1}-1", "judge": "ana", "grade": 2, "tags": [TEXT]})
    with pytest.raises(Refused) as info:
        labels("t.jsonl", jsonl(*rows))
    assert [p.line for p in info.value.problems] == [1, 2, 3, 4, 5, 6, 7, 7, 8]
    assert_no_text(info.value.problems)
    assert str(info.value.problems[1]) == f"t.jsonl: line 2: chunk (a text of {len(TEXT)} characters) is not an id"
    assert str(info.value.problems[3]) == f"t.jsonl: line 4: grade (a text of {len(TEXT)} characters) is not one of 0, 1, 2, 3"


def test_a_spreadsheet_with_swapped_columns_names_the_column_not_the_text():
    swapped = HEADER.replace("chunk,chunk_id,chunk_text", "chunk_text,chunk_id,chunk")
    text = swapped + "".join(f'{I1},1,q1,,{I1}-{j},c{j},"{TEXT}",ana,2,,\n' for j in (1, 2))
    problems = refused("swapped.csv", text)
    cut = len(TEXT.strip())  # a cell is read without its blanks around
    assert problems == [(n, f"chunk (column 7) (a text of {cut} characters) is not an id") for n in (2, 3)]
    # no header at all: the first row is taken for one, and its cells are not echoed either
    problems = refused("headless.csv", f'{I1},1,q1,"{TEXT}",{I1}-1,c1,"{TEXT}",ana,2,,\n')
    assert problems == [(1, "no column item, chunk, judge, grade (the header has "
                            f"{I1}, 1, q1, (a text of {cut} characters), {I1}-1, c1, "
                            f"(a text of {cut} characters), ana, 2, '', '')")]


def test_a_label_studio_export_with_text_for_ids_echoes_none():
    export = [{"id": TEXT, "data": {"item": TEXT, "chunks": [{"chunk": TEXT}]}, "annotations": [
        {"id": TEXT, "completed_by": TEXT, "result": []},
        {"id": 1, "completed_by": 1, "result": [{"from_name": TEXT, "value": {"choices": [TEXT]}}]},
        {"id": 2, "completed_by": 2, "result": [{"from_name": "grade_0", "value": {"choices": [TEXT]}}]},
        {"id": TEXT, "completed_by": 2, "updated_at": TEXT, "result": []}]}]
    with pytest.raises(Refused) as info:
        labels("export.json", json.dumps(export))
    assert len(info.value.problems) == 6
    assert_no_text(info.value.problems)
    assert_no_text(parse("export.json", json.dumps(export)).duplicates)


def test_a_file_with_one_bad_row_is_refused_whole():
    good = [{"item": I1, "chunk": f"{I1}-{j}", "judge": "ana", "grade": 2} for j in (1, 2)]
    assert len(labels("ok.jsonl", jsonl(*good))) == 2
    with pytest.raises(Refused) as info:
        labels("one-bad.jsonl", jsonl(*good, {**good[0], "judge": "bo", "grade": 7}))
    assert [str(p) for p in info.value.problems] == ["one-bad.jsonl: line 3: grade 7 is not one of 0, 1, 2, 3"]
    assert "one-bad.jsonl: line 3" in str(info.value)


# -- CSV ---------------------------------------------------------------------

HEADER = "item,judges,query_id,query_text,chunk,chunk_id,chunk_text,judge,grade,tags,evidence_group\n"


def test_csv_is_the_items_file_with_four_columns_more():
    text = (HEADER
            + f'{I1},1,q1,how?,{I1}-1,c9,"a text\nover two lines, with a comma",ana,3,stale; duplicate,B\n'
            + f"{I1},1,q1,how?,{I1}-2,c8,,ana,,,\n"  # not judged yet
            + "\n"
            + f"{I2},2,q2,,{I2}-3,c7,'=1+1, ana ,0,,\n")
    parsed = parse("judged.csv", text)
    assert not parsed.problems and parsed.skipped == 1
    assert [line for line, _ in parsed.rows] == [2, 6]  # a row's first line
    assert checked([parsed], KEYS)[0] == [Label(batch_id=B, item=I1, chunk=f"{I1}-1", judge="ana", grade=3, tags=("duplicate", "stale"),
                                                evidence_group="B"),
                                     Label(batch_id=B, item=I2, chunk=f"{I2}-3", judge="ana", grade=0)]


def test_csv_with_only_the_required_columns_and_a_byte_order_mark():
    text = f"\ufeffchunk,grade,judge,item\r\n{I1}-2,1,bo,{I1}\r\n"
    assert labels("x.csv", text) == [Label(batch_id=B, item=I1, chunk=f"{I1}-2", judge="bo", grade=1)]


def test_bad_csv_rows_are_named_with_their_lines():
    text = (HEADER
            + f'{I1},1,q1,"two\nlines",{I1}-1,c9,,ana,3,,\n'  # good, lines 2-3
            + f"{I1},1,q1,,{I1}-2,c8,,ana,three,,\n"
            + f"{I1},1,q1,,{I1}-2,c8,,,2,,\n"
            + f"{I1},1,q1,,{I1}-2,c8,,bo,2,stale;fresh,\n"
            + f"{I1},1,q1,,{I1}-2,c8,,bo,2\n"
            + f"{I1},1,q1,,{I1}-1,c9,,ana,1,,\n")
    assert refused("bad.csv", text) == [
        (4, "grade (column 9) 'three' is not one of 0, 1, 2, 3"),
        (5, "judge (column 8) is missing"),
        (6, "tags (column 10): unknown tag(s) 'fresh' (known: " + ", ".join(TAGS) + ")"),
        (7, "9 cells, the header has 11"),
        (8, f"chunk {I1}-1 is labelled twice by judge 'ana' (first in bad.csv, line 2)"),
    ]


def test_a_csv_without_a_required_column_is_refused_at_its_header():
    assert refused("x.csv", f"item,chunk,grade\n{I1},{I1}-1,2\n") == [
        (1, "no column judge (the header has item, chunk, grade)")]


# -- Label Studio's JSON export ------------------------------------------------


def result(index: int, grade: str | None, tags=(), group: str | None = None) -> list[dict]:
    out = []
    for kind, choices in (("grade", [grade] if grade else []), ("tags", list(tags)), ("group", [group] if group else [])):
        if choices:
            out.append({"from_name": f"{kind}_{index}", "to_name": f"chunk_{index}", "type": "choices",
                        "value": {"choices": choices}})
    return out


def task(task_id: int, item: str, n: int, *annotations) -> dict:
    return {"id": task_id, "data": {"item": item, "chunks": [{"chunk": f"{item}-{j}"} for j in range(1, n + 1)]},
            "annotations": list(annotations), "predictions": []}


def annotation(ann_id: int, user, *results, cancelled: bool = False) -> dict:
    return {"id": ann_id, "completed_by": user, "was_cancelled": cancelled,
            "result": [r for rs in results for r in rs]}


EXPORT = [
    task(11, I1, 2, annotation(1, 1, result(0, "3", ["stale"], "A"), result(1, "1", group="A"))),
    task(12, I2, 3,
         annotation(2, {"id": 1, "email": "judge@example.com"}, result(0, "2"), result(1, "0"), result(2, "1")),
         annotation(3, 2, result(0, "1"), result(1, "0"), result(2, "1", ["wrong_version", "low_authority"])),
         annotation(4, 3, cancelled=True)),  # skipped by its judge
]


def test_label_studio_export():
    parsed = parse("export.json", json.dumps(EXPORT))
    assert parsed.format == "label-studio" and parsed.skipped == 1 and not parsed.problems
    assert [line for line, _ in parsed.rows] == [1, 1, 2, 2, 2, 2, 2, 2]
    (got,) = checked([parsed], KEYS)
    assert got[:2] == [Label(batch_id=B, item=I1, chunk=f"{I1}-1", judge="label-studio:1", grade=3, tags=("stale",), evidence_group="A"),
                       Label(batch_id=B, item=I1, chunk=f"{I1}-2", judge="label-studio:1", grade=1, tags=(), evidence_group="A")]
    assert [(x.chunk, x.judge, x.grade) for x in got[2:]] == [
        (f"{I2}-1", "label-studio:1", 2), (f"{I2}-2", "label-studio:1", 0), (f"{I2}-3", "label-studio:1", 1),
        (f"{I2}-1", "label-studio:2", 1), (f"{I2}-2", "label-studio:2", 0), (f"{I2}-3", "label-studio:2", 1)]
    assert got[-1].tags == ("low_authority", "wrong_version")
    assert parse_label_studio("pulled", EXPORT).rows == parsed.rows


def test_bad_label_studio_annotations_are_named_by_task():
    bad = [
        task(11, I1, 2, annotation(1, 1, result(0, "3"))),  # chunk 2 ungraded
        task(12, I2, 3, annotation(2, 1, result(0, "5"), result(1, "0"), result(5, "1"), result(2, "1", ["x"]))),
        task(13, I2, 1, annotation(3, "someone", result(0, "1"))),
        {"id": 14, "data": {"text": "not ours"}, "annotations": []},
        task(15, I1, 1, annotation(5, 1, result(0, "1"), [{"from_name": "grade_0", "value": {"choices": ["1", "2"]}}])),
        task(16, I1, 1, annotation(6, 2, [{"from_name": "comment", "value": {"text": ["hi"]}}], result(0, "2"))),
    ]
    with pytest.raises(Refused) as info:
        checked([parse("export.json", json.dumps(bad))], KEYS)
    assert [str(p) for p in info.value.problems] == [
        f"export.json: task 1: task id 11, annotation 1: chunk {I1}-2: no grade",
        "export.json: task 2: task id 12, annotation 2: result 'grade_5' is about no chunk of the task",
        f"export.json: task 2: task id 12, annotation 2: chunk {I2}-1: grade 5 is not one of 0, 1, 2, 3",
        f"export.json: task 2: task id 12, annotation 2: chunk {I2}-3: tags: unknown tag(s) 'x' (known: {', '.join(TAGS)})",
        "export.json: task 3: task id 13, annotation 3: completed_by 'someone' names no user",
        "export.json: task 4: not a task of a ragdrift batch (no data.item and data.chunks)",
        f"export.json: task 5: task id 15, annotation 5: chunk {I1}-1: one grade and at most one evidence group",
        "export.json: task 6: task id 16, annotation 6: result 'comment' is about no chunk of the task",
    ]


@pytest.mark.parametrize(("text", "reason"), [("{", "not JSON"), ('{"tasks": []}', "not a Label Studio JSON export")])
def test_a_json_file_that_is_no_export(text, reason):
    ((line, got),) = refused("export.json", text)
    assert line == 1 and got.startswith(reason)


def test_a_problem_names_file_and_line():
    assert str(Problem("a.csv", 7, "grade 9 is not one of 0, 1, 2, 3")) == "a.csv: line 7: grade 9 is not one of 0, 1, 2, 3"
    assert str(Problem("export.json", 2, "x", unit="task")) == "export.json: task 2: x"
    assert Parsed(file="a", format="csv", rows=()).batches == set()


# -- any labels, any format ------------------------------------------------------

ITEMS = [f"{B}-{n:04d}" for n in range(1, 5)]
label_strategy = st.builds(
    Label,
    batch_id=st.just(B),
    item=st.sampled_from(ITEMS),
    chunk=st.integers(1, 3),
    judge=st.sampled_from(["ana", "bo", "c@d.e", "label-studio:7"]),
    grade=st.integers(0, 3),
    tags=st.lists(st.sampled_from(TAGS), unique=True).map(lambda t: tuple(sorted(t))),
    evidence_group=st.none() | st.sampled_from(["A", "B", "C"]),
).map(lambda x: Label(batch_id=x.batch_id, item=x.item, chunk=f"{x.item}-{x.chunk}", judge=x.judge, grade=x.grade, tags=x.tags,
                      evidence_group=x.evidence_group))
ANY_KEYS = {B: {item: {f"{item}-{j}" for j in (1, 2, 3)} for item in ITEMS}}


def unique_pairs(found: list[Label]) -> list[Label]:
    return list({x.pair: x for x in found}.values())


def as_csv(found: list[Label]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["item", "chunk", "chunk_text", "judge", "grade", "tags", "evidence_group"])
    for x in found:
        writer.writerow([x.item, x.chunk, "some\ntext, \"quoted\"", x.judge, x.grade, ";".join(x.tags),
                         x.evidence_group or ""])
    return out.getvalue()


def as_label_studio(found: list[Label]) -> list[dict]:
    """One task per label, so each can have any judge (a Label Studio judge is a user id)."""
    return [task(n, x.item, 1, annotation(n, n, result(0, str(x.grade), x.tags, x.evidence_group)))
            | {"data": {"item": x.item, "chunks": [{"chunk": x.chunk}]}} for n, x in enumerate(found)]


@FAST
@given(st.lists(label_strategy, min_size=1, max_size=12).map(unique_pairs))
def test_any_labels_survive_each_format(found):
    lines = jsonl(*({"item": x.item, "chunk": x.chunk, "judge": x.judge, "grade": x.grade, "tags": list(x.tags),
                     "evidence_group": x.evidence_group} for x in found))
    assert labels("any.jsonl", lines, ANY_KEYS) == found
    assert labels("any.csv", as_csv(found), ANY_KEYS) == found
    (got,) = checked([parse_label_studio("export", as_label_studio(found))], ANY_KEYS)
    assert [(x.item, x.chunk, x.grade, x.tags, x.evidence_group) for x in got] == \
        [(x.item, x.chunk, x.grade, x.tags, x.evidence_group) for x in found]


# -- the same labels twice, and what a file may not leave ambiguous ------------------


def test_the_same_label_in_two_files_refuses_both_naming_each_place():
    a = parse("a.jsonl", jsonl({"item": I1, "chunk": f"{I1}-1", "judge": "ana ", "grade": 2},
                               {"item": I1, "chunk": f"{I1}-2", "judge": "ana", "grade": 2}))
    b = parse("b.csv", f"item,chunk,judge,grade\n{I1},{I1}-2,bo,1\n{I1},{I1}-1, ana,3\n")
    with pytest.raises(Refused) as info:
        checked([a, b], KEYS)
    assert [str(p) for p in info.value.problems] == [
        f"b.csv: line 3: chunk {I1}-1 is labelled twice by judge 'ana' (first in a.jsonl, line 1)"]


def test_a_judges_latest_label_studio_annotation_counts_and_the_others_are_reported():
    """A stray "+" makes a second annotation of the judge's: the pull takes
    the latest (updated_at, then id) and names the others, refusing nothing."""
    stray = {**annotation(7, 5, result(0, "1")), "updated_at": "2026-12-01T10:00:00.000000Z"}
    redone = {**annotation(3, {"id": 5}, result(0, "2")), "updated_at": "2026-12-01T11:00:00.000000Z"}
    export = [task(1, I1, 1, stray, annotation(4, 6, result(0, "0")), redone),
              task(2, I2, 1, annotation(5, 5, result(0, "3")), annotation(6, 5, cancelled=True))]
    parsed = parse("export.json", json.dumps(export))
    (got,) = checked([parsed], KEYS)
    assert [(x.item, x.judge, x.grade) for x in got] == [(I1, "label-studio:6", 0), (I1, "label-studio:5", 2)]
    assert parsed.skipped == 1  # the judge's latest of task 2 skips it
    assert [str(p) for p in parsed.duplicates] == [
        "export.json: task 1: task id 1: judge label-studio:5 made 2 annotations: the latest, 3, counts; set aside: 7",
        "export.json: task 2: task id 2: judge label-studio:5 made 2 annotations: the latest, 6, counts; set aside: 5"]


@pytest.mark.parametrize("line", [
    f'{{"item": "{I1}", "chunk": "{I1}-1", "judge": "ana", "grade": 1, "grade": 3}}',
    f'{{"item": "{I1}", "judge": "ana", "chunks": [{{"chunk": "{I1}-1", "grade": 1, "grade": 2}}]}}',
])
def test_a_key_repeated_in_a_jsonl_line_refuses_it(line):
    assert refused("r.jsonl", line + "\n") == [(1, "not JSON: key 'grade' appears twice in one object")]


def test_a_column_read_twice_refuses_the_csv():
    text = f"item,chunk,grade,judge,grade,notes,notes\n{I1},{I1}-1,1,ana,3,,\n"
    assert refused("twice.csv", text) == [(1, "column grade appears 2 times (columns 3, 5)")]


@pytest.mark.parametrize(("file", "text", "reason"), [
    ("f.jsonl", jsonl({"item": I1, "chunk": f"{I1}-1", "judge": "ana", "grade": 2.0}), "grade 2.0 is not one of"),
    ("f.jsonl", f'{{"item": "{I1}", "chunk": "{I1}-1", "judge": "ana", "grade": NaN}}\n', "not JSON: NaN is not"),
    ("f.jsonl", f'{{"item": "{I1}", "chunk": "{I1}-1", "judge": "ana", "grade": -Infinity}}\n', "not JSON: -Infinity"),
    ("f.jsonl", f'{{"item": "{I1}", "chunk": "{I1}-1", "judge": "ana", "grade": 1e400}}\n', "not JSON: '1e400' is too"),
    ("f.csv", f"item,chunk,judge,grade\n{I1},{I1}-1,ana,\u00b2\n", "grade (column 4) '\u00b2' is not one of"),
    ("f.csv", f"item,chunk,judge,grade\n{I1},{I1}-1,ana,{'9' * 5000}\n", "grade (column 4) (a text of 5000"),
    ("f.csv", f"item,chunk,judge,grade\n{I1},{I1}-1,ana,nan\n", "grade (column 4) 'nan' is not one of"),
    ("f.json", json.dumps([task(1, I1, 1, annotation(1, 5, result(0, "\u00b2")))]), "grade '\u00b2' is not one of"),
    ("f.json", json.dumps([task(1, I1, 1, annotation(1, 5, result(0, "2.0")))]), "grade '2.0' is not one of"),
    ("f.json", json.dumps([task(1, I1, 1, annotation(1, 5, [{"from_name": "grade_\u00b2",
                                                               "value": {"choices": ["1"]}}]))]), "about no chunk"),
    ("f.json", json.dumps([task(1, I1, 1, annotation(1, 5, [{"from_name": "grade_" + "9" * 5000,
                                                               "value": {"choices": ["1"]}}]))]), "about no chunk"),
    ("f.json", json.dumps([task(1, I1, 1) | {"annotations": 5}]), "annotations 5 is not a list"),
    ("f.json", json.dumps([task(1, I1, 1) | {"annotations": {"id": 1}}]), "annotations (an object of 1 keys) is"),
    ("f.json", json.dumps([task(1, I1, 1, annotation(1, 5) | {"result": 7})]), "result 7 is not a list"),
    ("f.json", json.dumps([task(1, I1, 1, annotation(1, 5, [{"from_name": 3, "value": 4}]))]), "result 3 is about"),
    ("f.json", json.dumps([{"id": 1, "data": {"item": I1, "chunks": [{"chunk": f"{I1}-1"}]},
                            "annotations": [{"id": 2, "completed_by": 5, "result": [
                                {"from_name": "grade_0", "value": {"choices": [[2]]}}]}]}]), "grade (a list of 1)"),
    ("f.json", '[{"id": 1, "id": 2}]', "not JSON: key 'id' appears twice"),
])  # fmt: skip
def test_wrong_numbers_and_types_are_problems_not_exceptions(file, text, reason):
    (line, got), *others = refused(file, text)  # a result about no chunk leaves that chunk without a grade too
    assert line == (2 if file.endswith(".csv") else 1) and reason in got, got
    assert [r for _, r in others] in ([], [f"task id 1, annotation 1: chunk {I1}-1: no grade"])


@pytest.mark.parametrize("file", ["e.jsonl", "e.csv", "e.json", "e"])
@pytest.mark.parametrize("text", ["", "\ufeff", " \n\r\n\t"])
def test_an_empty_file_is_refused_whatever_its_format(file, text):
    assert refused(file, text) == [(1, "the file is empty")]


WRONG = (None, True, 5, 7.5, "x", "\u00b2", [], [5], {}, {"id": 5})  # each of another type than most places hold


def paths(value, prefix=()):
    """Every place in a decoded JSON value: the path to it, as keys and indexes."""
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from paths(child, (*prefix, key))


def replaced(value, path, new):
    if not path:
        return new
    head, *rest = path
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = replaced(value[head], rest, new)
    return copy


def test_a_value_of_any_type_anywhere_in_an_export_is_a_problem_never_an_exception():
    """Every place of a good export, each replaced by each wrong value: a problem of a task, or
    still good labels (a value that is ignored there), never an exception."""
    refusals = 0
    for path in paths(EXPORT):
        for value in WRONG:
            try:
                checked([parse_label_studio("export", replaced(EXPORT, path, value))], KEYS)
            except Refused as exc:
                refusals += 1
                assert all(1 <= p.line <= len(EXPORT) and p.unit == "task" for p in exc.problems)
    assert refusals > 500
