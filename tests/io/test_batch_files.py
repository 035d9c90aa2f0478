"""Batches on disk and the resolver: files confined to the export directory,
created once, text only where judges read it."""

from __future__ import annotations

import csv
import http.server
import json
import os
import stat
import sys
import threading
from contextlib import contextmanager

import pytest

from agent.core.batch import BatchConfig, build
from agent.core.sampling import UNIFORM, ResultRef
from agent.io.files import batch_files
from agent.io.http.resolver import ResolverError, Texts, resolve
from agent.io.label_studio import client as label_studio
from tests.core.test_sampler import cand

WEEK = "2026-W48"
SECRET = "the quarterly revenue of ACME was 12.4M"


def batch():
    return build(WEEK, [cand(f"e{i}", stratum=UNIFORM) for i in range(6)], BatchConfig(budgets={}, default_budget=4, salt="s"))


def texts() -> Texts:
    return Texts({"q0000000": "how do I rotate keys"}, {"c1": SECRET})


def test_a_batch_writes_its_files_and_keeps_the_key_private(tmp_path):
    b = batch()
    directory = batch_files.write(tmp_path, b, batch_files.blinded_items(b, texts()))
    assert sorted(os.listdir(directory)) == ["items.csv", "items.jsonl", "key.jsonl", "manifest.json", "regression.jsonl"]
    # The key, and the regression list with its chunks in rank order, are the team's only.
    assert {name: stat.S_IMODE(os.stat(directory / name).st_mode) for name in os.listdir(directory)} == {
        "items.csv": 0o644, "items.jsonl": 0o644, "manifest.json": 0o644, "key.jsonl": 0o600, "regression.jsonl": 0o600}
    items = [json.loads(line) for line in (directory / "items.jsonl").read_text().splitlines()]
    assert items[0]["query"]["text"] == "how do I rotate keys" and items[0]["chunks"][0]["text"] == SECRET
    rows = list(csv.DictReader((directory / "items.csv").open()))
    assert len(rows) == sum(len(i["chunks"]) for i in items) and rows[0]["chunk_text"] == SECRET
    # Resolved text is only in what judges read: never in the key, the manifest or the regression list.
    for name in ("key.jsonl", "manifest.json", "regression.jsonl"):
        assert SECRET not in (directory / name).read_text()
    assert json.loads((directory / "manifest.json").read_text()) == b.manifest


def test_what_judges_can_read_holds_no_rank_score_weight_or_stratum(tmp_path):
    ranked = [cand(f"event-{i:02d}", w=1.0 + i % 3, stratum=s) for s in ("app|lexical", UNIFORM) for i in range(12)]
    ranked = [type(c)(**{**{f: getattr(c, f) for f in c.__struct_fields__},
                         "results": tuple(ResultRef(f"chunk-{j}", "p", "s", j, 0.9 - j / 10) for j in range(1, 4))})
              for c in ranked]
    b = build(WEEK, ranked, BatchConfig(budgets={}, default_budget=4, salt="s"))
    items = batch_files.blinded_items(b, texts())
    directory = batch_files.write(tmp_path, b, items, {
        "label-studio/tasks.json": json.dumps(label_studio.tasks(items)),
        "label-studio/config.xml": label_studio.labeling_config(label_studio.TAGS)})
    readable = {str(p.relative_to(directory)): p.read_text() for p in directory.rglob("*")
                if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o044}
    assert sorted(readable) == ["items.csv", "items.jsonl", "label-studio/config.xml", "label-studio/tasks.json",
                                "manifest.json"]
    for name in ("items.csv", "items.jsonl", "label-studio/config.xml", "label-studio/tasks.json"):
        for word in ("rank", "score", "weight", "priority", "stratum", "app|", "uniform", "event", "0.8"):
            assert word not in readable[name], (name, word)
    # The manifest's figures are per stratum: it names no item, chunk or event.
    manifest = readable["manifest.json"]
    assert not any(row["item"] in manifest or row["event_id"] in manifest or row["chunks"][0]["chunk_id"] in manifest
                   for row in b.key)


def test_a_batch_is_never_overwritten(tmp_path):
    b = batch()
    batch_files.write(tmp_path, b, b.items)
    with pytest.raises(batch_files.ExportError, match="never overwritten"):
        batch_files.write(tmp_path, b, b.items)


def test_a_batch_that_is_not_recorded_leaves_nothing(tmp_path):
    """The directory is renamed into place inside the store's transaction: when
    that fails, neither the batch nor its temporary directory stays."""
    b = batch()

    class Refused(Exception):
        pass

    @contextmanager
    def recording():
        yield
        raise Refused  # the commit failed after the rename

    with pytest.raises(Refused):
        batch_files.write(tmp_path, b, b.items, recording=recording())
    assert os.listdir(tmp_path) == []
    leftover = tmp_path / f".{b.batch_id}.0badc0de.building"  # of a build that was killed half way
    leftover.mkdir()
    (leftover / "items.jsonl").write_text("half")
    directory = batch_files.write(tmp_path, b, b.items)
    assert os.listdir(tmp_path) == [b.batch_id] and (directory / "key.jsonl").exists()


def test_nothing_is_written_through_a_symlink(tmp_path):
    b = batch()
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "export"
    root.mkdir()
    (root / b.batch_id).symlink_to(outside, target_is_directory=True)
    with pytest.raises(batch_files.ExportError):
        batch_files.write(root, b, b.items)
    assert os.listdir(outside) == []


@pytest.mark.parametrize("name", ["../escape.json", "/etc/passwd", "a/b/c.txt", ".hidden", "..", "x/../../y"])
def test_names_outside_the_batch_directory_are_refused(tmp_path, name):
    b = batch()
    with pytest.raises(batch_files.ExportError):
        batch_files.write(tmp_path, b, b.items, extra={name: "x"})
    assert not (tmp_path.parent / "escape.json").exists()


def test_csv_cells_never_start_a_formula(tmp_path):
    b = batch()
    formula = Texts({}, {"c1": "=HYPERLINK(\"http://x\")"})
    directory = batch_files.write(tmp_path, b, batch_files.blinded_items(b, formula))
    cells = [row["chunk_text"] for row in csv.DictReader((directory / "items.csv").open())]
    assert cells and all(not cell.startswith("=") for cell in cells)


# --------------------------------------------------------------------------- resolvers


def test_a_file_resolver_answers_known_ids_only(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text('{"kind": "query", "id": "q1", "text": "Q"}\n{"kind": "chunk", "id": "c1", "text": "C"}\n'
                    '{"kind": "chunk", "id": "other", "text": "not asked"}\n')
    assert resolve("file", ["q1"], ["c1", "c2"], path=str(path)) == Texts({"q1": "Q"}, {"c1": "C"})


def test_a_damaged_resolver_file_names_the_line_not_the_text(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text(f'{{"kind": "chunk", "id": "c1", "text": "ok"}}\n{SECRET}\n')
    with pytest.raises(ResolverError, match="line 2") as info:
        resolve("file", [], ["c1"], path=str(path))
    assert SECRET not in str(info.value)


def test_a_command_resolver(tmp_path):
    script = tmp_path / "resolve.py"
    script.write_text("import json, sys\nask = json.load(sys.stdin)\n"
                      "print(json.dumps({'queries': {q: q.upper() for q in ask['queries']},"
                      " 'chunks': {c: 'text of ' + c for c in ask['chunks']}}))\n")
    got = resolve("command", ["q1"], ["c1"], command=[sys.executable, str(script)])
    assert got == Texts({"q1": "Q1"}, {"c1": "text of c1"})
    with pytest.raises(ResolverError, match="exited with 3"):
        resolve("command", [], [], command=[sys.executable, "-c", "raise SystemExit(3)"])


def test_an_http_resolver():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # the standard library's name
            ask = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps({"queries": {}, "chunks": {c: c * 2 for c in ask["chunks"]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/resolve"
        assert resolve("http", [], ["ab"], url=url) == Texts({}, {"ab": "abab"})
    finally:
        server.shutdown()
