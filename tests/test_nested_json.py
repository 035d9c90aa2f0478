"""JSON nested deeper than the parser follows, in any file a command reads: one
line naming the file (and the line) and exit status 2, never a RecursionError."""

from __future__ import annotations

import json

import pytest

from agent.core.judgments.untrusted import TooDeep, loads
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS_TABLES
from tests.test_cli import one_line_error, run
from tests.test_judgments_cli import copy_store, judged_jsonl, replayed_batch

DEEP = "[" * 100_000
QRELS = "q1 0 d1 2\n"
RUN = "q1 Q0 d1 1 1.0 t\n"


def test_the_error_names_the_line_where_the_nesting_gets_too_deep():
    with pytest.raises(TooDeep) as caught:
        loads('{"q": "[[[[",\n "x": {"d": 1},\n "deep": ' + DEEP + "}")
    assert caught.value.lineno == 3 and caught.value.msg == "nested more than 1000 levels deep"


def test_nesting_the_parser_follows_is_read():
    value = loads("[" * 200 + "]" * 200)
    for _ in range(199):
        (value,) = value
    assert value == []


OFFLINE = {  # command arguments, with {deep} the nested file and {qrels}, {run} good ones
    "evaluate qrels": ("evaluate", "{deep}", "{run}", "5"),
    "evaluate run": ("evaluate", "{qrels}", "{deep}", "5"),
    "compare qrels": ("compare", "{deep}", "{run}", "{run}", "5"),
    "compare baseline": ("compare", "{qrels}", "{deep}", "{run}", "5"),
    "compare candidate": ("compare", "{qrels}", "{run}", "{deep}", "5"),
    "compare gate": ("compare", "{qrels}", "{run}", "{run}", "5", "--gate", "{deep}"),
    "compare slices": ("compare", "{qrels}", "{run}", "{run}", "5", "--slices", "{deep}"),
    "compare evidence": ("compare", "{qrels}", "{run}", "{run}", "5", "--evidence", "{deep}"),
    "check-config": ("check-config", "{deep}"),
}


@pytest.mark.parametrize("args", OFFLINE.values(), ids=OFFLINE)
def test_an_offline_command_refuses_a_deeply_nested_file(tmp_path, capsys, args):
    files = {"qrels": QRELS, "run": RUN, "deep": '{"q1": ' + DEEP}  # an object: qrels and runs in JSON
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    status, _, err = run(capsys, *(a.format(**{n: str(tmp_path / n) for n in files}) for a in args))
    line = one_line_error(err)
    assert status == 2 and str(tmp_path / "deep") in line and "nested" in line, err


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return replayed_batch(tmp_path_factory.mktemp("built"))


@pytest.fixture
def batch(built, tmp_path):
    """A copy of the built batch's store; the batch's files as they were after the test."""
    config, directory = built
    kept = {path: path.read_bytes() for path in directory.rglob("*") if path.is_file()}
    copy = copy_store(config, tmp_path)
    with Store(load(copy).store.url, None, QRELS_TABLES):  # the tables the agent adds when it starts
        pass
    yield copy, directory
    for path in directory.rglob("*"):
        if path.is_file() and path not in kept:
            path.unlink()
    for path, data in kept.items():
        path.write_bytes(data)


@pytest.mark.parametrize("file", ["key.jsonl", "manifest.json", "label-studio/tasks.json"])
def test_a_deeply_nested_batch_file_is_one_line(batch, tmp_path, capsys, file):
    config, directory = batch
    labels = tmp_path / "labels.jsonl"
    labels.write_text(judged_jsonl([json.loads(line) for line in (directory / "items.jsonl").read_text().splitlines()]))
    (directory / "label-studio").mkdir(exist_ok=True)
    (directory / "label-studio" / "config.xml").write_text("<View/>")
    (directory / file).write_text('{"ok": 1}\n' + DEEP + "\n" if file.endswith("jsonl") else DEEP)
    command = {"key.jsonl": ("judgments", "import", str(labels)), "manifest.json": ("judgments", "report"),
               "label-studio/tasks.json": ("batch", "push", directory.name, "--label-studio-url", "http://127.0.0.1:9")}
    status, _, err = run(capsys, *command[file], "--config", str(config))
    line = one_line_error(err)
    assert status == 2 and str(directory / file) in line and "nested more than" in line, err
    if file == "key.jsonl":
        assert "line 2" in line


@pytest.mark.parametrize("name", ["export.json", "labels.jsonl"])
def test_a_deeply_nested_judges_file_is_refused(batch, tmp_path, capsys, name):
    config, _ = batch
    (tmp_path / name).write_text(DEEP)
    status, _, err = run(capsys, "judgments", "import", str(tmp_path / name), "--config", str(config))
    assert status == 2 and "Traceback" not in err, err
    problem, summary = err.strip().splitlines()  # each problem with its file and line, then the count
    assert problem.startswith(f"ragdrift: {tmp_path / name}: ") and "not JSON: nested more than" in problem
    assert summary == "ragdrift: error: nothing imported: 1 problem(s) in 1 file(s)"
