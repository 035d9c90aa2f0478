"""Label Studio as the judging tool: the labeling config and task format on
their own, the client's errors against a hostile local server, and the whole
path (project, import, annotation, export) against a real Label Studio.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import threading
import traceback
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise

import pytest

from agent.io.label_studio.client import (
    EVIDENCE_GROUPS,
    GRADES,
    PROJECT_SETTINGS,
    TAGS,
    LabelStudio,
    LabelStudioError,
    labeling_config,
    tasks,
    token_from,
)
from agent.io.label_studio.guide import GRADE_MEANINGS, TAG_MEANINGS
from tests.hostile_http import HostileServer
from tests.label_studio import LabelStudioServer, installed, readme_command
from tests.services import http_get

ITEMS = [
    {"item": "2026-W48-0001", "judges": 1,
     "query": {"id": "q-7f3a", "text": "how do I rotate keys"},
     "chunks": [{"chunk": "2026-W48-0001-1", "chunk_id": "kms/rotate#3", "text": "Rotate a key with `kms rotate`."},
                {"chunk": "2026-W48-0001-2", "chunk_id": "kms/intro#1", "text": "KMS keeps keys <safe> & sound."}]},
    {"item": "2026-W48-0002", "judges": 2,
     "query": {"id": "q-19c2", "text": "vpn setup on linux"},
     "chunks": [{"chunk": "2026-W48-0002-1", "chunk_id": "vpn/linux#2", "text": "Install the client: apt install vpnc."},
                {"chunk": "2026-W48-0002-2", "chunk_id": "vpn/mac#2", "text": "On macOS open Settings."},
                {"chunk": "2026-W48-0002-3", "chunk_id": "vpn/old#9", "text": "Version 1 setup (deprecated)."}]},
    {"item": "2026-W48-0003", "judges": 1,
     "query": {"id": "q-88d0", "text": None},
     "chunks": [{"chunk": "2026-W48-0003-1", "chunk_id": "hr/leave#4", "text": None}]},
    {"item": "2026-W48-0004", "judges": 1,
     "query": {"id": "q-0b11", "text": "expense limits"},
     "chunks": [{"chunk": "2026-W48-0004-1", "chunk_id": "fin/exp#1", "text": None},
                {"chunk": "2026-W48-0004-2", "chunk_id": "fin/exp#2", "text": "Limits are set per cost centre."}]},
    {"item": "2026-W48-0005", "judges": 1,
     "query": {"id": "q-5e5e", "text": None},
     "chunks": [{"chunk": "2026-W48-0005-1", "chunk_id": "it/laptop#1", "text": None},
                {"chunk": "2026-W48-0005-2", "chunk_id": "it/laptop#2", "text": None}]},
]


def expand(config: str, n: int) -> ET.Element:
    """The config as a judge sees it for a task with ``n`` chunks (the Repeater unrolled)."""
    root = ET.fromstring(config)
    for parent in list(root.iter()):
        for i, child in enumerate(list(parent)):
            if child.tag == "Repeater":
                parent.remove(child)
                body = ET.tostring(child[0], encoding="unicode")
                for k in range(n):
                    parent.insert(i + k, ET.fromstring(body.replace(child.get("indexFlag"), str(k))))
    return root


def grade_controls(root: ET.Element) -> list[ET.Element]:
    return [c for c in root.iter("Choices") if c.get("name", "").startswith("grade_")]


# -- no server ---------------------------------------------------------------


def test_labeling_config_is_xml_with_one_grade_and_tag_set_per_chunk():
    config = labeling_config(TAGS)
    root = ET.fromstring(config)
    assert root.tag == "View"
    assert root.find("Repeater").get("on") == "$chunks"
    for n in (1, 3, 7):
        view = expand(config, n)
        grades = grade_controls(view)
        assert [g.get("name") for g in grades] == [f"grade_{k}" for k in range(n)]
        for k, g in enumerate(grades):
            assert g.get("toName") == f"chunk_{k}" and g.get("choice") == "single-radio"
            assert [c.get("alias") for c in g.iter("Choice")] == ["0", "1", "2", "3"]
            assert [c.get("value") for c in g.iter("Choice")] == [f"{v} {name}" for v, name in GRADES]
        tagsets = [c for c in view.iter("Choices") if c.get("name", "").startswith("tags_")]
        assert len(tagsets) == n and all(t.get("choice") == "multiple" for t in tagsets)
        assert all([c.get("value") for c in t.iter("Choice")] == list(TAGS) for t in tagsets)
        groups = [c for c in view.iter("Choices") if c.get("name", "").startswith("group_")]
        assert [(g.get("name"), g.get("toName"), g.get("choice")) for g in groups] == \
            [(f"group_{k}", f"chunk_{k}", "single") for k in range(n)]
        assert all([c.get("value") for c in g.iter("Choice")] == list(EVIDENCE_GROUPS) for g in groups)
        assert all(g.get("required") is None for g in groups)  # optional for the judge
        texts = {t.get("name"): t.get("value") for t in view.iter("Text")}
        assert texts == {"query": "$query", **{f"chunk_{k}": f"$chunks[{k}].text" for k in range(n)}}


def test_the_query_is_pinned_and_set_apart_and_every_row_has_a_caption():
    root = ET.fromstring(labeling_config(TAGS))
    pinned = root.find("View")  # the first thing in the view, the query inside
    assert pinned.tag == "View" and [c.get("name") for c in pinned.iter("Text")] == ["query"]
    style = dict(part.split(":", 1) for part in pinned.get("style").replace(" ", "").split(";") if part)
    assert style["position"] == "sticky" and style["top"] == "0" and "background" in style and "border" in style
    view = expand(labeling_config(TAGS), 3)
    headers = [h.get("value") for h in view.iter("Header")]
    assert headers.count("$chunks[1].title") == 1  # each chunk's number, from its task (tasks() numbers from 1)
    rows = [row for row in view.iter("View") if row.find("Choices") is not None]
    assert len(rows) == 3 * 3
    captions = [row.find("Header").get("value") for row in rows]
    assert captions == ["Grade (required)", "Tags (optional)", "Evidence group (optional)"] * 3
    for g in grade_controls(view):  # what a judge reads when a grade is missing: no control name
        assert g.get("required") == "true" and "grade_" not in g.get("requiredMessage")
        assert "Grade every chunk" in g.get("requiredMessage")


def test_every_choice_has_an_explicit_hotkey_no_keyboard_sends():
    """Label Studio gives a choice without a hotkey the next of "1234567890qwe..."
    (so key 2 picks grade 1, and the keys run out after two chunks): every
    choice gets one of ours, a blank, which no key press matches."""
    view = expand(labeling_config(TAGS), 4)
    choices = list(view.iter("Choice"))
    assert len(choices) == 4 * (len(GRADES) + len(TAGS) + len(EVIDENCE_GROUPS))
    assert all(c.get("hotkey") is not None and c.get("hotkey") and not c.get("hotkey").strip() for c in choices)


def test_labeling_config_escapes_tags_and_can_have_none():
    odd = ['a "quoted" & <tag>']
    (tagset,) = [c for c in ET.fromstring(labeling_config(odd)).iter("Choices") if c.get("name") == "tags_{{idx}}"]
    assert [c.get("value") for c in tagset.iter("Choice")] == odd
    assert not [c for c in ET.fromstring(labeling_config([])).iter("Choices") if "tags_" in c.get("name")]


def test_tasks_keep_item_and_chunk_keys_and_show_ids_for_null_text():
    before = copy.deepcopy(ITEMS)
    out = tasks(ITEMS)
    assert before == ITEMS  # the input is not changed
    assert [t["data"]["item"] for t in out] == [i["item"] for i in ITEMS]
    assert [t["meta"]["judges"] for t in out] == [1, 2, 1, 1, 1]  # out of the judges' sight
    assert all(set(t) == {"data", "meta"} and set(t["data"]) == {"item", "query", "chunks"} for t in out)
    first, third = out[0]["data"], out[2]["data"]
    assert first["query"] == "how do I rotate keys"
    assert first["chunks"][1] == {"chunk": "2026-W48-0001-2", "title": "Chunk 2", "text": "KMS keeps keys <safe> & sound."}
    assert third["query"] == "[query id] q-88d0"
    assert third["chunks"] == [{"chunk": "2026-W48-0003-1", "title": "Chunk 1", "text": "[chunk id] hr/leave#4"}]
    json.dumps(out)  # plain JSON
    for damaged in ({**ITEMS[0], "chunks": []}, {"item": "2026-W48-0001", "chunks": ITEMS[0]["chunks"]},
                    {**ITEMS[0], "query": "text"}, {**ITEMS[0], "judges": 1e400}, ["not", "an", "item"]):
        with pytest.raises(ValueError, match=r"^item 2 is not a batch item"):
            tasks([ITEMS[0], damaged])


def test_token_from_file_then_environment(tmp_path, monkeypatch):
    path = tmp_path / "token"
    path.write_text("  abc123\n")
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", "from-env")
    assert token_from(str(path)) == "abc123"
    assert token_from(None) == "from-env"
    monkeypatch.setenv("JUDGING_TOKEN", "other")
    assert token_from("", env="JUDGING_TOKEN") == "other"
    monkeypatch.delenv("LABEL_STUDIO_TOKEN")
    with pytest.raises(LabelStudioError, match="LABEL_STUDIO_TOKEN"):
        token_from(None)
    with pytest.raises(LabelStudioError, match="cannot read"):
        token_from(str(tmp_path / "missing"))


@pytest.mark.parametrize("content", ["abc123\nsecond-line-secret\n", "abc123 second-line-secret", "abc\tsecond-line-secret",
                                     "\u00e9second-line-secret", "\n \n"])
def test_a_token_is_one_line_and_an_error_never_shows_it(tmp_path, monkeypatch, content):
    path = tmp_path / "token"
    path.write_text(content)
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", content)
    for source in (str(path), None):
        with pytest.raises(LabelStudioError) as info:
            token_from(source)
        assert "second-line-secret" not in str(info.value) and "abc" not in str(info.value)
        assert (str(path) if source else "LABEL_STUDIO_TOKEN") in str(info.value)
    path.write_bytes(b"\xffsecond-line-secret")
    with pytest.raises(LabelStudioError, match="not UTF-8"):
        token_from(str(path))


class _Hostile:
    """A local server that answers every request with ``status`` and echoes
    the request's Authorization header and body: the worst case for leaks."""

    def __init__(self, status: int, pad: int = 0) -> None:
        status_code = status

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                echo = json.dumps({"detail": "x" * pad + f"bad auth {self.headers.get('Authorization')} body {body}"})
                self.send_response(status_code)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(echo.encode())

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status", [401, 500])
@pytest.mark.parametrize("token", ["0123456789abcdef0123456789abcdef01234567",
                                   "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"])
@pytest.mark.parametrize("pad", [0, 530])  # 530: a legacy token straddles where a long message is cut
def test_errors_carry_status_and_length_never_the_answer_or_the_token(status, token, pad):
    hostile = _Hostile(status, pad)
    try:
        with pytest.raises(LabelStudioError) as info:
            LabelStudio(hostile.url, token).project_tasks(1)
    finally:
        hostile.close()
    exc = info.value
    text = "".join(traceback.format_exception(exc)) + repr(exc) + repr(exc.args)
    assert exc.status == status
    assert f"HTTP {status} (an answer of " in str(exc) and "bad auth" not in str(exc) + repr(exc.args)
    assert token not in text and token[:12] not in text
    assert ("the token was refused" in str(exc)) == (status == 401)


def test_unreachable_server_is_a_clear_error():
    port = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{port.server_address[1]}"
    port.server_close()  # nothing listens there now
    with pytest.raises(LabelStudioError, match="no answer: ") as info:
        LabelStudio(url, "secret-token-value").create_project("p", "<View/>")
    assert info.value.status is None and "secret-token-value" not in str(info.value)


@pytest.mark.parametrize("away", ["host", "port"])
def test_the_token_never_follows_a_redirect_to_another_origin(away):
    token = "0123456789abcdef0123456789abcdef01234567"
    with HostileServer() as elsewhere, HostileServer("redirect") as server:
        target = f"http://localhost:{server.port}/landed" if away == "host" else f"{elsewhere.url}/landed"
        server.options["to"] = target
        with pytest.raises(LabelStudioError, match="another origin") as info:
            LabelStudio(server.url, token).project(1)
    assert target in str(info.value) and token not in str(info.value)
    assert [auth for _, path, auth in server.requests + elsewhere.requests if path == "/landed"] == []


@pytest.mark.parametrize(("behaviour", "options", "message"), [
    ("trickle", {}, "no complete answer within 1 s"),
    ("trickle_headers", {}, "no complete answer within 1 s"),
    ("cut", {}, "cut off after 10 of 1000 bytes"),
    ("cut_chunked", {}, "cut off"),
    ("nested", {"depth": 100000}, "nested too deeply"),
])
def test_a_broken_answer_is_one_error_within_the_timeout(behaviour, options, message):
    with HostileServer(behaviour, **options) as server, pytest.raises(LabelStudioError, match=message):
        LabelStudio(server.url, "secret-token-value", timeout=1).export_annotations(1)


@pytest.mark.parametrize("answer", ["{}", '{"access": "a\\nb"}', '{"access": 7}', "[]"])
def test_a_refresh_without_an_access_token_is_an_error(answer):
    with HostileServer("json", body=answer) as server, pytest.raises(LabelStudioError, match="no access token"):
        LabelStudio(server.url, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl").project(1)


def test_an_answer_above_the_bound_is_refused():
    from agent.io.label_studio.client import TooLarge

    with HostileServer("big", bytes=10_000_000) as server, pytest.raises(TooLarge, match="limit of 1000000 bytes"):
        LabelStudio(server.url, "secret-token-value", max_bytes=1_000_000).export_annotations(1)


# -- the README's command ----------------------------------------------------

# Label Studio reports errors (server and browser) to its vendor's Sentry and usage analytics to its
# vendor unless told not to; an error while a judge works can carry judged query and chunk text.
SENDS_NOTHING = {"LABEL_STUDIO_SENTRY_DSN": "", "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
                 "LABEL_STUDIO_COLLECT_ANALYTICS": "false"}


def test_the_readmes_label_studio_command_sends_its_vendor_nothing(monkeypatch):
    settings, words = readme_command()
    assert words[:2] == ["~/.cache/ragdrift/label-studio-venv/bin/label-studio", "start"]
    assert {name: settings.get(name) for name in SENDS_NOTHING} == SENDS_NOTHING
    # the tests' Label Studio runs with the README's settings, whatever the caller's environment says
    monkeypatch.setenv("LABEL_STUDIO_SENTRY_DSN", "https://key@sentry.example/1")
    test_server = LabelStudioServer(binary="label-studio")
    try:
        assert SENDS_NOTHING.items() <= test_server.env().items()
    finally:
        test_server.stop()


# -- a real Label Studio -------------------------------------------------------

server = pytest.mark.label_studio  # `-m "not label_studio"` deselects these


@server
def test_the_readmes_label_studio_command_starts_as_written(label_studio):
    """The server every test uses runs the README's command and settings, with nothing of the tests' own but the
    port, the credentials and a fresh data directory (the caller's LABEL_STUDIO_* variables are dropped): up on
    /health, the token accepted."""
    settings, words = readme_command()
    ours = {"--port": str(label_studio.port), "--username": label_studio.username,
            "--password": label_studio.password, "--user-token": label_studio.token}
    expected = [label_studio.binary, *(ours.get(before, word) for before, word in pairwise(words))]
    assert label_studio.command() == expected
    assert label_studio.env() == {**{k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "HEARTEX_"))},
                                  **settings, "LABEL_STUDIO_BASE_DATA_DIR": str(label_studio.tmpdir / "data")}
    assert b'"UP"' in http_get(label_studio.url + "/health")


# Reading Label Studio's settings runs its Sentry set-up, as its server does at start.
SENTRY_SET_UP = """
import os, sys
import label_studio
sys.path.insert(0, os.path.dirname(label_studio.__file__))
os.environ["DJANGO_SETTINGS_MODULE"] = "core.settings.label_studio"
from django.conf import settings
settings.SENTRY_DSN
import sentry_sdk
print(sentry_sdk.get_client().is_active())
"""


@server
def test_label_studios_sentry_set_up_takes_the_pinned_sentry_sdk(tmp_path):
    """A team may send Label Studio's errors to a Sentry of its own; sentry-sdk 3 refuses the set-up (TypeError)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABEL_STUDIO_")}
    env.update({"LABEL_STUDIO_BASE_DATA_DIR": str(tmp_path), "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",
                "LABEL_STUDIO_SENTRY_DSN": "http://key@127.0.0.1:9/1"})  # nothing is sent: no error happens
    done = subprocess.run([installed() / "bin" / "python", "-c", SENTRY_SET_UP], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.split()[-1:] == ["True"]


@pytest.fixture(scope="module")
def project(label_studio):
    client = label_studio.client()
    pid = client.create_project("ragdrift judging 2026-W48", labeling_config(TAGS))
    created = client.import_tasks(pid, tasks(ITEMS))
    return client, pid, created


@server
def test_project_holds_exactly_the_imported_tasks(project):
    client, pid, created = project
    assert created == len(ITEMS)
    held = client.project_tasks(pid)
    assert len(held) == len(ITEMS)
    assert sorted(t["data"]["item"] for t in held) == sorted(i["item"] for i in ITEMS)
    by_item = {t["data"]["item"]: t["data"] for t in held}
    for item in ITEMS:
        data = by_item[item["item"]]
        assert [c["chunk"] for c in data["chunks"]] == [c["chunk"] for c in item["chunks"]]
        assert set(data) == {"item", "query", "chunks"}  # what the data manager shows: no judges, no query id
    # an item for agreement goes to two judges (Label Studio's per-task overlap)
    assert {t["data"]["item"]: t["overlap"] for t in held} == {i["item"]: i["judges"] for i in ITEMS}
    assert by_item["2026-W48-0005"]["chunks"][1]["text"] == "[chunk id] it/laptop#2"


@server
def test_tasks_of_a_batch_built_before_meta_keep_their_overlap(label_studio):
    """An older batch's tasks.json has the judges in ``data``: pushed now, its double-judged task still gets two."""
    client = label_studio.client()
    pid = client.create_project("ragdrift older batch", labeling_config(TAGS))
    old = [{"data": {**t["data"], "judges": t["meta"]["judges"]}} for t in tasks(ITEMS[:2])]
    client.import_tasks(pid, old)
    assert sorted(t["overlap"] for t in client.project_tasks(pid)) == [1, 2]


@server
def test_project_tasks_pages(project):
    client, pid, _ = project
    assert sorted(t["id"] for t in client.project_tasks(pid, page_size=2)) == \
        sorted(t["id"] for t in client.project_tasks(pid))


@server
def test_stored_config_has_a_grade_per_chunk_and_the_tags(project):
    client, pid, _ = project
    stored = client.project(pid)
    assert stored["label_config"].strip() == labeling_config(TAGS).strip()
    parsed = stored["parsed_label_config"]  # the server's own reading of the config
    assert parsed["grade_{{idx}}"]["type"] == "Choices"
    assert parsed["grade_{{idx}}"]["to_name"] == ["chunk_{{idx}}"]
    assert parsed["grade_{{idx}}"]["labels"] == ["0", "1", "2", "3"]
    assert parsed["grade_{{idx}}"]["inputs"][0]["value"] == "chunks[{{idx}}].text"
    assert parsed["tags_{{idx}}"]["labels"] == list(TAGS)
    assert parsed["group_{{idx}}"]["labels"] == list(EVIDENCE_GROUPS)
    for n in (1, 3):
        assert len(grade_controls(expand(stored["label_config"], n))) == n


@server
def test_the_project_is_judged_blind_with_the_grading_guide(project):
    """Each judge's stream shows only their own annotation: no predictions,
    no history, one annotation per task unless the task asks for two; the
    grading guide is the instructions, shown before judging starts."""
    client, pid, _ = project
    stored = client.project(pid)
    assert {k: stored[k] for k in PROJECT_SETTINGS} == PROJECT_SETTINGS
    assert stored["show_instruction"] is True and stored["show_collab_predictions"] is False
    assert stored["maximum_annotations"] == 1 and stored["enable_empty_annotation"] is False
    guide = stored["expert_instruction"]
    for grade, meaning in GRADE_MEANINGS.items():
        assert f"<b>{grade} " in guide and meaning in guide
    for tag in TAGS:
        assert f"<b>{tag}</b>: {TAG_MEANINGS[tag]}" in guide
    assert "Evidence group" in guide
    (tab,) = client._call("GET", "/api/dm/views/", params={"project": pid})  # the data manager's one tab
    hidden = tab["data"]["hiddenColumns"]
    assert hidden["explore"] == hidden["labeling"] and {"tasks:data.chunks", "tasks:annotations_results"} <= set(
        hidden["explore"])


def judgments(exported: list[dict]) -> list[tuple[str, str, str, list[str], int]]:
    """(item, chunk, grade, tags, judge) from a JSON export: how grades map back."""
    out = []
    for task in exported:
        chunks = task["data"]["chunks"]
        for ann in task["annotations"]:
            if ann.get("was_cancelled"):
                continue
            by_index: dict[int, dict] = {}
            for r in ann["result"]:
                kind, _, idx = r["from_name"].partition("_")
                by_index.setdefault(int(idx), {})[kind] = r["value"]["choices"]
            for idx, got in sorted(by_index.items()):
                out.append((task["data"]["item"], chunks[idx]["chunk"], got["grade"][0],
                            got.get("tags", []), ann["completed_by"]))
    return out


@server
def test_an_annotation_comes_back_through_the_export(project):
    client, pid, _ = project
    task = next(t for t in client.project_tasks(pid) if t["data"]["item"] == "2026-W48-0002")
    result = []
    for idx, (grade, tags) in enumerate([("3", []), ("1", ["wrong_locale"]), ("0", ["stale", "wrong_version"])]):
        result.append({"from_name": f"grade_{idx}", "to_name": f"chunk_{idx}", "type": "choices",
                       "value": {"choices": [grade]}})
        if tags:
            result.append({"from_name": f"tags_{idx}", "to_name": f"chunk_{idx}", "type": "choices",
                           "value": {"choices": tags}})
    annotation_id = client.annotate(task["id"], result)

    everything = client.export_annotations(pid, all_tasks=True)
    assert sorted(t["data"]["item"] for t in everything) == sorted(i["item"] for i in ITEMS)
    exported = client.export_annotations(pid)  # only what was judged
    assert [t["id"] for t in exported] == [task["id"]]
    (ann,) = exported[0]["annotations"]
    assert ann["id"] == annotation_id and ann["result"] == result and not ann["was_cancelled"]
    judge = ann["completed_by"]
    assert judgments(exported) == [
        ("2026-W48-0002", "2026-W48-0002-1", "3", [], judge),
        ("2026-W48-0002", "2026-W48-0002-2", "1", ["wrong_locale"], judge),
        ("2026-W48-0002", "2026-W48-0002-3", "0", ["stale", "wrong_version"], judge),
    ]


@server
def test_personal_access_token_works_too(project, label_studio):
    client, pid, _ = project
    pat = client._call("POST", "/api/token/")["token"]  # what a user creates on the Account page
    assert pat.startswith("eyJ")
    assert len(LabelStudio(label_studio.url, pat).project_tasks(pid)) == len(ITEMS)


@server
def test_real_server_errors_name_status_never_the_answer(project, label_studio):
    client, pid, _ = project
    wrong = "f" * 40
    with pytest.raises(LabelStudioError) as info:
        LabelStudio(label_studio.url, wrong).project_tasks(pid)
    assert info.value.status == 401 and "the token was refused" in str(info.value) and wrong not in str(info.value)
    with pytest.raises(LabelStudioError) as info:
        client.create_project("broken", '<View><Text name="a" value="$a"/>'
                                        '<Choices name="c" toName="nowhere"><Choice value="x"/></Choices></View>')
    assert info.value.status == 400 and "HTTP 400" in str(info.value)
    assert "nowhere" not in str(info.value)  # what the server answered (here, quoting the request) is not shown
    assert label_studio.token not in str(info.value)


@server
def test_a_batch_built_with_a_label_studio_url_becomes_a_project_of_its_items(label_studio, tmp_path):
    """`ragdrift batch build --label-studio-url`: the project holds exactly the batch's items."""
    from agent.jobs import batch

    settings, queue = _batch_store(tmp_path)
    token = tmp_path / "token"
    token.write_text(label_studio.token)
    try:
        built = batch.build(settings, queue, "2026-W48", target=batch.Target(label_studio.url, str(token)))
        _holds_the_batch(label_studio, built.project, built.directory, built.items)
        assert (built.directory / "label-studio" / "tasks.json").exists()
        assert queue.batch("ragdrift", built.batch_id)["project"] == built.project
    finally:
        queue.store.close()


@server
def test_a_batch_that_label_studio_missed_is_pushed_later(label_studio, tmp_path):
    """Label Studio down while the batch is built: the batch is recorded all
    the same, and `ragdrift batch push` makes the project once it is back."""
    from agent.cli import main
    from agent.jobs import batch

    settings, queue = _batch_store(tmp_path)
    token = tmp_path / "token"
    token.write_text(label_studio.token)
    down = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    down_url = f"http://127.0.0.1:{down.server_address[1]}"
    down.server_close()  # nothing listens there now
    try:
        with pytest.raises(batch.NotPushed, match="ragdrift batch push") as info:
            batch.build(settings, queue, "2026-W48", target=batch.Target(down_url, str(token)))
        built = info.value.built
        assert queue.batch_of("ragdrift", "2026-W48")["batch_id"] == built.batch_id
        assert queue.batch("ragdrift", built.batch_id)["project"] is None
        config = tmp_path / "ragdrift.yaml"
        config.write_text(json.dumps({"store": {"url": settings.store.url},
                                      "judgment": {"export_dir": settings.judgment.export_dir}}))
        assert main(["batch", "push", built.batch_id, "--config", str(config), "--label-studio-url", label_studio.url,
                     "--label-studio-token-file", str(token)]) == 0
        project = queue.batch("ragdrift", built.batch_id)["project"]
        _holds_the_batch(label_studio, project, built.directory, built.items)
    finally:
        queue.store.close()


def _batch_store(tmp_path):
    """Settings, and a queue holding eight candidates of 2026-W48."""
    from agent.core.sampling import UNIFORM
    from agent.io.settings.agent import load
    from agent.io.store.database import Store
    from agent.io.store.queue import TABLES, Queue
    from tests.core.test_sampler import cand

    settings = load(None, {"RAGDRIFT_JUDGMENT__EXPORT_DIR": str(tmp_path / "batches"), "RAGDRIFT_JUDGMENT__SALT": "s",
                           "RAGDRIFT_STORE__URL": f"sqlite:///{tmp_path}/s.db"})
    queue = Queue(Store(settings.store.url, None, TABLES))
    rows = [cand(f"e{i}", stratum=UNIFORM, week="2026-W48") for i in range(8)]
    with queue.store.engine.begin() as conn:
        queue.writes("ragdrift", "t", 0, rows, (), ())(conn)
    return settings, queue


def _holds_the_batch(label_studio, project: int, directory, n: int) -> None:
    items = [json.loads(line) for line in (directory / "items.jsonl").read_text().splitlines()]
    client = label_studio.client()
    held = client.project_tasks(project)
    assert sorted(t["data"]["item"] for t in held) == sorted(i["item"] for i in items) and len(held) == n
    assert client.project(project)["label_config"].strip() == labeling_config(TAGS).strip()
