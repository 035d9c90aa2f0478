"""Judges' files back to labels: JSON Lines, CSV and Label Studio's JSON export.

Pure: the text of one file in, its labels out, with every bad row found. A
file is imported whole or not at all, so a parse never stops at the first
problem: it reports them all, each with the file, the line (in a Label
Studio export: the task's position) and the reason, and `checked` refuses
the file when there is any.

    JSONL  a line per item, the batch's items.jsonl line with the judge's
           fields added: {"item", "judge", "chunks": [{"chunk", "grade",
           "tags", "evidence_group"}, ...]} (other keys, such as the text,
           are ignored); or a line per label: {"item", "chunk", "judge",
           "grade", "tags", "evidence_group"}.
    CSV    the batch's items.csv, a row per (item, chunk), with the columns
           judge, grade, tags (separated by ";") and evidence_group added;
           item, chunk, judge and grade are required columns.
    Label Studio
           the JSON export of a project made from the batch's tasks: per
           chunk i of a task, grade_i, tags_i and group_i (studio.py).

A row whose grade is empty (CSV) or null (JSONL) was not judged yet and is
skipped; a cancelled (skipped) Label Studio annotation too.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from agent.core.judgments import studio
from agent.core.judgments.labels import GRADES, TAGS, Label

FORMATS = ("jsonl", "csv", "label-studio")
_GROUP = re.compile(r"[A-Za-z0-9_-]{1,16}\Z")
_JUDGE_MAX = 128
_REQUIRED_COLUMNS = ("item", "chunk", "judge", "grade")

Keys = Mapping[str, Mapping[str, Collection[str]]]  # batch id -> item -> its chunks


@dataclass(frozen=True)
class Problem:
    file: str
    line: int  # 1-based line of a JSONL or CSV file; the task's position in a Label Studio export
    reason: str
    unit: str = "line"  # "line", or "task" in a Label Studio export

    def __str__(self) -> str:
        return f"{self.file}: {self.unit} {self.line}: {self.reason}"


class Refused(ValueError):
    """Nothing of a file is imported: it holds these problems."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__(f"{len(self.problems)} problem(s), the first: {self.problems[0]}")


@dataclass(frozen=True)
class Parsed:
    file: str
    format: str  # one of FORMATS
    rows: tuple[tuple[int, Label], ...]  # (line or task position, label)
    problems: tuple[Problem, ...] = ()
    skipped: int = 0  # rows without a grade, cancelled annotations

    @property
    def batches(self) -> set[str]:
        return {label.batch_id for _, label in self.rows}


def batch_of(item: str) -> str:
    """The batch an item id belongs to: items are "<batch id>-0001"."""
    return item.rpartition("-")[0] or item


def keys_of(key: Iterable[Mapping]) -> dict[str, frozenset[str]]:
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
    if format == "jsonl":
        return Reader(file, format).jsonl(text)
    if format == "csv":
        return Reader(file, format).csv(text)
    if format == "label-studio":
        try:
            tasks = json.loads(text)
        except ValueError as exc:
            return Parsed(file, format, (), (Problem(file, 1, f"not JSON: {exc}"),))
        return parse_label_studio(file, tasks)
    raise ValueError(f"unknown format {format!r}, expected one of {FORMATS}")


def parse_label_studio(file: str, tasks: object) -> Parsed:
    """The labels of a Label Studio JSON export, already decoded (as `pull` reads it)."""
    return studio.read(Reader(file, "label-studio"), tasks)


def checked(parsed: Parsed, keys: Keys) -> list[Label]:
    """The file's labels, or `Refused` with all its problems: its own, and
    every label of an item or chunk its batch's key does not hold (`keys`
    lacks a batch the store does not know)."""
    problems = list(parsed.problems)
    for line, label in parsed.rows:
        items = keys.get(label.batch_id)
        if items is None:
            reason = f"item {label.item}: batch {label.batch_id} is not a known batch"
        elif label.item not in items:
            reason = f"item {label.item} is not in batch {label.batch_id}"
        elif label.chunk not in items[label.item]:
            reason = f"item {label.item} has no chunk {label.chunk}"
        else:
            continue
        problems.append(Problem(parsed.file, line, reason, _unit(parsed.format)))
    if problems:
        raise Refused(sorted(problems, key=lambda p: p.line))
    return [label for _, label in parsed.rows]


def _unit(format: str) -> str:
    return "task" if format == "label-studio" else "line"


@dataclass
class Reader:
    """One file's rows as they are read: labels, problems, duplicates."""

    file: str
    format: str
    rows: list[tuple[int, Label]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: int = 0
    seen: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (item, chunk, judge) -> line

    def done(self) -> Parsed:
        return Parsed(self.file, self.format, tuple(self.rows), tuple(self.problems), self.skipped)

    def problem(self, line: int, reason: str) -> None:
        self.problems.append(Problem(self.file, line, reason, _unit(self.format)))

    def add(self, line: int, where: str, item, chunk, judge, grade, tags, group) -> None:
        """One row's label, or its problems (`where` prefixes each reason)."""
        reasons = []
        for name, value in (("item", item), ("chunk", chunk)):
            if not isinstance(value, str) or not value:
                reasons.append(f"{name} is missing")
        if grade is None:
            if tags or group:
                reasons.append("tags or an evidence group without a grade")
            else:
                self.skipped += 1
            for reason in reasons:
                self.problem(line, where + reason)
            return
        if not isinstance(judge, str) or not judge.strip():
            reasons.append("judge is missing")
        elif len(judge) > _JUDGE_MAX or not judge.isprintable():
            reasons.append(f"judge {_cut(repr(judge))}: at most {_JUDGE_MAX} printable characters")
        if isinstance(grade, bool) or grade not in GRADES:
            reasons.append(f"grade {_cut(repr(grade))} is not one of 0, 1, 2, 3")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            reasons.append(f"tags {_cut(repr(tags))} are not a list of tags")
        elif unknown := sorted(set(tags) - set(TAGS)):
            reasons.append(f"unknown tag(s) {_cut(', '.join(unknown))} (known: {', '.join(TAGS)})")
        if group is not None and not (isinstance(group, str) and _GROUP.match(group)):
            reasons.append(f"evidence group {_cut(repr(group))}: 1-16 letters, digits, _ or -")
        if not reasons:
            pair = (item, chunk, judge)
            if pair in self.seen:
                reasons.append(f"chunk {chunk} judged twice by {judge} (also {_unit(self.format)} {self.seen[pair]})")
            self.seen.setdefault(pair, line)
        if reasons:
            for reason in reasons:
                self.problem(line, where + reason)
            return
        self.rows.append((line, Label(batch_of(item), item, chunk, judge, grade, tuple(sorted(set(tags))), group)))

    # -- JSON Lines --------------------------------------------------------

    def jsonl(self, text: str) -> Parsed:
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
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

    def _item_line(self, n: int, row: dict) -> None:
        chunks = row["chunks"]
        if "chunk" in row or not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
            self.problem(n, "chunks is not a list of chunk objects" if "chunk" not in row
                         else "a line is an item (with chunks) or a label (with chunk), not both")
            return
        for c in chunks:
            where = f"chunk {c.get('chunk')}: " if c.get("chunk") else ""
            self.add(n, where, row.get("item"), c.get("chunk"), c.get("judge", row.get("judge")), c.get("grade"),
                     _list(c.get("tags")), c.get("evidence_group"))

    # -- CSV -----------------------------------------------------------------

    def csv(self, text: str) -> Parsed:
        lines = [line + "\n" for line in text.split("\n")]
        reader = csv.reader(lines)
        try:
            header = next(reader, None)
            if header is None:
                return self.done()
            header = [h.strip() for h in header]
            if missing := [c for c in _REQUIRED_COLUMNS if c not in header]:
                self.problem(1, f"no column {', '.join(missing)} (the header has {', '.join(header)})")
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
                self.add(n, "", row["item"].strip(), row["chunk"].strip(), row["judge"].strip(),
                         (int(grade) if grade.isdigit() else grade) if grade else None,
                         [t.strip() for t in row.get("tags", "").split(";") if t.strip()],
                         row.get("evidence_group", "").strip() or None)
        except csv.Error as exc:
            self.problem(reader.line_num, f"not CSV: {exc}")
        return self.done()


def _cut(shown: str, limit: int = 40) -> str:
    """A value as a problem shows it: cut, so that text in a wrong column is not echoed whole."""
    return shown if len(shown) <= limit else shown[:limit] + "..."


def _list(tags) -> object:
    """Tags as given, absent or null being none."""
    return [] if tags is None else tags
