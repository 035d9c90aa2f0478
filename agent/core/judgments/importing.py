"""Judges' files back to labels: JSON Lines, CSV and Label Studio's JSON export.

Pure: the text of one file in, its labels out, with every bad row found. A
file is imported whole or not at all, so a parse never stops at the first
problem: it reports them all, each with the file, the line (in a Label
Studio export: the task's position), the column or field, and the reason,
and `checked` refuses the files when there is any. A reason never quotes a
cell that is not an id or a short token (`untrusted.shown`): a spreadsheet
with its columns swapped must not print the judged text.

    JSONL  a line per item, the batch's items.jsonl line with the judge's
           fields added: {"item", "judge", "chunks": [{"chunk", "grade",
           "tags", "evidence_group"}, ...]} (other keys, such as the text,
           are ignored); or a line per label: {"item", "chunk", "judge",
           "grade", "tags", "evidence_group"}. A key repeated in one object,
           NaN or Infinity refuse the line.
    CSV    the batch's items.csv, a row per (item, chunk), with the columns
           judge, grade, tags (separated by ";") and evidence_group added;
           item, chunk, judge and grade are required columns, and none of
           the columns read may appear twice.
    Label Studio
           the JSON export of a project made from the batch's tasks: per
           chunk i of a task, grade_i, tags_i and group_i (studio.py).

A row whose grade is empty (CSV) or null (JSONL) was not judged yet and is
skipped; a cancelled (skipped) Label Studio annotation too. Of one judge's
several annotations of a Label Studio task only the latest counts; the
others are reported in `duplicates`. An empty file
(nothing but blanks) is refused, whatever its format.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from agent.core.judgments import studio
from agent.core.judgments.labels import GRADES, TAGS, Label
from agent.core.judgments.untrusted import chunk_place, grade_of, is_id, loads, shown

FORMATS = ("jsonl", "csv", "label-studio")
_GROUP = re.compile(r"[A-Za-z0-9_-]{1,16}\Z")
_JUDGE_MAX = 128
_REQUIRED_COLUMNS = ("item", "chunk", "judge", "grade")
_COLUMNS = (*_REQUIRED_COLUMNS, "tags", "evidence_group")

Keys = Mapping[str, Mapping[str, Collection[str]]]  # batch id -> item -> its chunks


@dataclass(frozen=True)
class Problem:
    file: str
    line: int  # 1-based line of a JSONL or CSV file; the task's position in a Label Studio export
    reason: str
    _: KW_ONLY
    unit: str = "line"  # "line", or "task" in a Label Studio export

    def __str__(self) -> str:
        return f"{self.file}: {self.unit} {self.line}: {self.reason}"


class Refused(ValueError):
    """Nothing of a file is imported: it holds these problems."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__(f"{len(self.problems)} problem(s), the first: {self.problems[0]}")


@dataclass(frozen=True, kw_only=True)
class Parsed:
    file: str
    format: str  # one of FORMATS
    rows: tuple[tuple[int, Label], ...]  # (line or task position, label)
    problems: tuple[Problem, ...] = ()
    skipped: int = 0  # rows without a grade, cancelled annotations
    duplicates: tuple[Problem, ...] = ()  # a judge's earlier annotations of a task, set aside (not refused)

    @property
    def batches(self) -> set[str]:
        return {label.batch_id for _, label in self.rows}


def batch_of(item: str) -> str:
    """The batch an item id belongs to: items are "<batch id>-0001"."""
    return item.rpartition("-")[0] or item


def keys_of(key: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[str]]:
    """A batch's key.jsonl rows as item -> its chunks (events without an item have nothing to judge)."""
    return {row["item"]: frozenset(c["chunk"] for c in row["chunks"]) for row in key if row.get("item")}


def format_of(file: str, text: str) -> str:
    """The format by the file's extension, else by its first character."""
    name = file.lower()
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    if name.endswith(".json"):
        return "label-studio"
    first = text.lstrip("\ufeff \t\r\n")[:1]
    return {"[": "label-studio", "{": "jsonl"}.get(first, "csv")


def parse(file: str, text: str, format: str | None = None) -> Parsed:
    """The labels of one file's text, and its problems."""
    format = format or format_of(file, text)
    text = text.removeprefix("\ufeff")  # a spreadsheet's byte order mark
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}, expected one of {FORMATS}")
    reader = Reader(file=file, format=format)
    if not text.strip():
        reader.problem(1, "the file is empty")
        return reader.done()
    if format == "jsonl":
        return reader.jsonl(text)
    if format == "csv":
        return reader.csv(text)
    try:
        tasks = loads(text)
    except ValueError as exc:
        reader.problem(1, f"not JSON: {exc}")
        return reader.done()
    return studio.read(reader, tasks)


def parse_label_studio(file: str, tasks: object) -> Parsed:
    """The labels of a Label Studio JSON export, already decoded (as `pull` reads it)."""
    return studio.read(Reader(file=file, format="label-studio"), tasks)


def checked(files: Sequence[Parsed], keys: Keys) -> list[list[Label]]:
    """Each file's labels, or `Refused` with every problem of every file: its
    own; every label of an item or chunk its batch's key does not hold (`keys`
    lacks a batch the store does not know); and every label given again (the
    same item, chunk and judge, in one file or two), which would otherwise be
    a second version of itself."""
    problems: list[Problem] = []
    first: dict[tuple[str, str, str, str], str] = {}  # label pair -> where it was first given
    for parsed in files:
        found = list(parsed.problems)
        unit = _unit(parsed.format)
        for line, label in parsed.rows:
            reason = _unknown(label, keys)
            if reason is None and label.pair in first:
                reason = (f"chunk {label.chunk} is labelled twice by judge {shown(label.judge)} "
                          f"(first in {first[label.pair]})")
            first.setdefault(label.pair, f"{parsed.file}, {unit} {line}")
            if reason is not None:
                found.append(Problem(parsed.file, line, reason, unit=unit))
        problems += sorted(found, key=lambda p: p.line)
    if problems:
        raise Refused(problems)
    return [[label for _, label in parsed.rows] for parsed in files]


def _unknown(label: Label, keys: Keys) -> str | None:
    """Why the batch's key refuses a label, if it does (ids are short tokens: the reader checked)."""
    items = keys.get(label.batch_id)
    if items is None:
        return f"item {label.item}: batch {label.batch_id} is not a known batch"
    if label.item not in items:
        return f"item {label.item} is not in batch {label.batch_id}"
    if label.chunk not in items[label.item]:
        return f"item {label.item} has no chunk {label.chunk}"
    return None


def _unit(format: str) -> str:
    return "task" if format == "label-studio" else "line"


@dataclass(kw_only=True)
class Reader:
    """One file's rows as they are read: labels, problems, skipped rows."""

    file: str
    format: str
    rows: list[tuple[int, Label]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: int = 0
    columns: dict[str, str] = field(default_factory=dict)  # field -> how a reason names it (CSV: with its column)
    duplicates: list[Problem] = field(default_factory=list)

    def done(self) -> Parsed:
        return Parsed(file=self.file, format=self.format, rows=tuple(self.rows), problems=tuple(self.problems), skipped=self.skipped,
                      duplicates=tuple(self.duplicates))

    def problem(self, line: int, reason: str) -> None:
        self.problems.append(Problem(self.file, line, reason, unit=_unit(self.format)))

    def duplicate(self, line: int, reason: str) -> None:
        """What was set aside, and why: reported, never refused."""
        self.duplicates.append(Problem(self.file, line, reason, unit=_unit(self.format)))

    def name(self, key: str) -> str:
        """A field as a reason names it: in a CSV file with its column."""
        return self.columns.get(key, key.replace("_", " "))

    def add(self, line: int, where: str, item: Any, chunk: Any, judge: Any, grade: Any, tags: Any, group: Any) -> None:
        """One row's label, or its problems (`where` prefixes each reason): the fields as read, of any type."""
        name = self.name
        reasons = []
        for key, value in (("item", item), ("chunk", chunk)):
            if value is None or value == "":
                reasons.append(f"{name(key)} is missing")
            elif not is_id(value):
                reasons.append(f"{name(key)} {shown(value)} is not an id")
        if grade is None:
            if tags or group:
                reasons.append("tags or an evidence group without a grade")
            else:
                self.skipped += 1
            for reason in reasons:
                self.problem(line, where + reason)
            return
        judge = judge.strip() if isinstance(judge, str) else judge
        if not isinstance(judge, str) or not judge:
            reasons.append(f"{name('judge')} is missing")
        elif len(judge) > _JUDGE_MAX or not judge.isprintable():
            reasons.append(f"{name('judge')} {shown(judge)}: at most {_JUDGE_MAX} printable characters")
        if type(grade) is not int or grade not in GRADES:  # not True, not 2.0
            reasons.append(f"{name('grade')} {shown(grade)} is not one of 0, 1, 2, 3")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            reasons.append(f"{name('tags')} {shown(tags)} are not a list of tags")
        elif unknown := sorted(set(tags) - set(TAGS)):
            reasons.append(f"{name('tags')}: unknown tag(s) {', '.join(map(shown, unknown))} "
                           f"(known: {', '.join(TAGS)})")
        if group is not None and not (isinstance(group, str) and _GROUP.match(group)):
            reasons.append(f"{name('evidence_group')} {shown(group)}: 1-16 letters, digits, _ or -")
        if reasons:
            for reason in reasons:
                self.problem(line, where + reason)
            return
        self.rows.append((line, Label(batch_id=batch_of(item), item=item, chunk=chunk, judge=judge, grade=grade, tags=tuple(sorted(set(tags))),
                                      evidence_group=group)))

    # -- JSON Lines --------------------------------------------------------

    def jsonl(self, text: str) -> Parsed:
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                row = loads(line)
            except ValueError as exc:
                self.problem(n, f"not JSON: {exc}")
                continue
            if not isinstance(row, dict):
                self.problem(n, "not a JSON object")
            elif "chunks" in row:
                self._item_line(n, row)
            else:
                self.add(n, "", row.get("item"), row.get("chunk"), row.get("judge"), row.get("grade"),
                         _list(row.get("tags")), row.get("evidence_group"))
        return self.done()

    def _item_line(self, n: int, row: dict[str, Any]) -> None:
        chunks = row["chunks"]
        if "chunk" in row or not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
            self.problem(n, "chunks is not a list of chunk objects" if "chunk" not in row
                         else "a line is an item (with chunks) or a label (with chunk), not both")
            return
        for i, c in enumerate(chunks):
            self.add(n, chunk_place(c.get("chunk"), i), row.get("item"), c.get("chunk"),
                     c.get("judge", row.get("judge")), c.get("grade"), _list(c.get("tags")), c.get("evidence_group"))

    # -- CSV -----------------------------------------------------------------

    def csv(self, text: str) -> Parsed:
        lines = [line + "\n" for line in text.split("\n")]
        reader = csv.reader(lines)
        try:
            header = [h.strip() for h in next(reader)]
            if missing := [c for c in _REQUIRED_COLUMNS if c not in header]:
                self.problem(1, f"no column {', '.join(missing)} "
                                f"(the header has {', '.join(h if is_id(h) else shown(h) for h in header)})")
                return self.done()
            for name in _COLUMNS:
                places = [str(i) for i, h in enumerate(header, 1) if h == name]
                if len(places) > 1:
                    self.problem(1, f"column {name} appears {len(places)} times (columns {', '.join(places)})")
                self.columns[name] = f"{name} (column {places[0]})" if places else name
            if self.problems:
                return self.done()
            start = reader.line_num + 1
            for cells in reader:
                n, start = start, reader.line_num + 1  # a quoted cell may span lines: its row starts here
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    self.problem(n, f"{len(cells)} cells, the header has {len(header)}")
                    continue
                row = dict(zip(header, cells))
                grade = row["grade"].strip()
                self.add(n, "", row["item"].strip(), row["chunk"].strip(), row["judge"],
                         grade_of(grade) if grade else None,
                         [t.strip() for t in row.get("tags", "").split(";") if t.strip()],
                         row.get("evidence_group", "").strip() or None)
        except csv.Error as exc:
            self.problem(reader.line_num, f"not CSV: {exc}")
        return self.done()


def _list(tags: object) -> object:
    """Tags as given, absent or null being none."""
    return [] if tags is None else tags
