"""Label Studio as the judging tool: labeling config, task import format, REST client.

A judge sees the query (pinned above the chunks) and each retrieved chunk,
numbered, grades every chunk 0-3, may tag it and may put it in an evidence
group (chunks in one group together form a complete answer). Every choice
has an explicit, unreachable hotkey: Label Studio's own would number the
choices from the first (key 2 picking grade 1) and run out after two chunks.
The project is made so that a judge sees no one else's annotation in the
labeling stream (PROJECT_SETTINGS); docs/judgments.md says what the
open-source edition cannot enforce. Names in annotation results map back to
the blinded item: ``grade_<i>`` / ``tags_<i>`` / ``group_<i>`` are about
``task["data"]["chunks"][i]``, whose ``chunk`` key is the blinded chunk key;
``task["data"]["item"]`` is the item (agent/core/judgments/importing.py
reads them back).

Authentication: a legacy token (40 hex characters) is sent as
``Authorization: Token <token>``. A personal access token (a JWT refresh
token, ``eyJ...``) is exchanged at ``/api/token/refresh/`` for a short-lived
access token, sent as ``Authorization: Bearer <access>`` and renewed once on
a 401. Tokens never appear in an error message, and never go to another
origin: every call is one bounded request of agent/io/http/fetch.py (a total
deadline, an answer size bound, redirects only within the configured origin).
An error never quotes what the server answered (an answer may hold task
data, or what a hostile server makes of it): it names the request, the HTTP
status and the answer's length, and an answer of the wrong shape is an
"unexpected answer" from the server, named without its credentials.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from agent.core.judgments.labels import TAGS  # the tags of the labeling config, re-exported
from agent.core.judgments.untrusted import TooDeep, loads
from agent.io.http.fetch import AnswerTooLarge, Deadline, FetchError, fetch
from agent.io.label_studio.guide import EVIDENCE_GROUPS, GRADES, instructions
from agent.io.secrets import SecretError, one_line, redact_url, scrub

MAX_ANSWER_BYTES = 100_000_000  # the default bound of one answer, an export above all
QUERY_STYLE = ("position: sticky; top: 0; z-index: 10; background: #eef3fb; border: 2px solid #4a78c2;"
               " border-radius: 6px; padding: 4px 12px 8px; margin-bottom: 12px")
CHUNK_STYLE = "border-top: 1px solid #bbb; padding-top: 4px; margin-top: 12px"
ROW_STYLE = "display: flex; align-items: baseline; gap: 12px; flex-wrap: wrap"
CAPTION_STYLE = "margin: 4px 0; min-width: 11em"
NO_HOTKEY = " "  # a key no keyboard sends: an explicit hotkey stops Label Studio assigning its own
HIDE_HOTKEY_HINTS = ".lsf-choice .lsf-hint { display: none; }"  # the hint would show the blank key as "[ ]"
GRADE_REQUIRED = ("Grade every chunk (0 irrelevant to 3 highly relevant) before you submit:"
                  " at least one chunk has no grade yet.")
PROJECT_SETTINGS = {
    "show_instruction": True,  # the grading guide before a judge starts
    "show_annotation_history": False,
    "show_collab_predictions": False,  # no prediction is ever shown as a judge's starting point
    "reveal_preannotations_interactively": False,
    "maximum_annotations": 1,  # one judge per task; a double-judged task gets overlap 2 of its own
    "show_overlap_first": False,
    "show_skip_button": True,  # a judge who cannot judge a task skips it; the pull counts it skipped
    "enable_empty_annotation": False,
    "sampling": "Sequential sampling",
    "skip_queue": "REQUEUE_FOR_OTHERS",
}

# The data manager's tab: no chunk JSON (the labeling view shows the chunks), and nothing
# of another judge's annotations (their results, ids, authors). A default a judge can undo.
HIDDEN_COLUMNS = ("tasks:data.chunks", "tasks:annotations_results", "tasks:annotations_ids", "tasks:annotators",
                  "tasks:updated_by", "tasks:predictions_results")


class LabelStudioError(RuntimeError):
    """A failed call: ``status`` is the HTTP status (None when no answer came)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TooLarge(LabelStudioError):
    """An answer above the client's ``max_bytes``."""


def labeling_config(tags: Sequence[str]) -> str:
    """The XML config: the query pinned on top, then per numbered chunk its
    text, a required 0-3 grade, the tags and an evidence group, each captioned."""
    view = ET.Element("View")
    ET.SubElement(view, "Style").text = HIDE_HOTKEY_HINTS
    pinned = ET.SubElement(view, "View", style=QUERY_STYLE)
    ET.SubElement(pinned, "Header", value="Query", size="5", style="margin: 2px 0")
    ET.SubElement(pinned, "Text", name="query", value="$query")
    rep = ET.SubElement(view, "Repeater", on="$chunks", indexFlag="{{idx}}")
    box = ET.SubElement(rep, "View", style=CHUNK_STYLE)
    ET.SubElement(box, "Header", value="$chunks[{{idx}}].title", size="4")
    ET.SubElement(box, "Text", name="chunk_{{idx}}", value="$chunks[{{idx}}].text")
    grade = _row(box, "Grade (required)", name="grade_{{idx}}", choice="single-radio",
                 required="true", requiredMessage=GRADE_REQUIRED)
    for value, name in GRADES:  # the result holds the alias: "0".."3"
        ET.SubElement(grade, "Choice", value=f"{value} {name}", alias=value, hotkey=NO_HOTKEY)
    if tags:
        tagset = _row(box, "Tags (optional)", name="tags_{{idx}}", choice="multiple")
        for tag in tags:
            ET.SubElement(tagset, "Choice", value=str(tag), hotkey=NO_HOTKEY)
    group = _row(box, "Evidence group (optional)", name="group_{{idx}}", choice="single")
    for value in EVIDENCE_GROUPS:
        ET.SubElement(group, "Choice", value=value, hotkey=NO_HOTKEY)
    ET.indent(view)
    return ET.tostring(view, encoding="unicode")


def _row(box: ET.Element, caption: str, **choices: str) -> ET.Element:
    """A captioned row of one chunk's choices."""
    row = ET.SubElement(box, "View", style=ROW_STYLE)
    ET.SubElement(row, "Header", value=caption, size="5", style=CAPTION_STYLE)
    return ET.SubElement(row, "Choices", {"toName": "chunk_{{idx}}", "showInline": "true", **choices})


def tasks(items: Iterable[dict]) -> list[dict]:
    """Blinded items to Label Studio's import format, one task per item.

    ``data`` holds only what the judge reads (the item id, which the pull
    maps annotations back by, the query, and per chunk its blinded key, its
    number and its text, or its id when the text is null); how many judges
    an item gets is the task's ``meta``, out of the judges' sight. Items are
    read back from a batch's file: ``ValueError`` names the first (by its
    place) that is not a batch item.
    """
    out = []
    for n, it in enumerate(items, 1):
        try:
            out.append(_task(it))
        except (KeyError, TypeError, AttributeError, ValueError, OverflowError):
            raise ValueError(f"item {n} is not a batch item (an item id, a query and at least one chunk)") from None
    return out


def _task(it: dict) -> dict:
    query = it["query"]
    chunks = [{"chunk": c["chunk"], "title": f"Chunk {n}",
               "text": c["text"] if c.get("text") is not None else f"[chunk id] {c['chunk_id']}"}
              for n, c in enumerate(it["chunks"], 1)]
    if not chunks:
        raise ValueError("no chunks")
    return {"data": {
        "item": it["item"],
        "query": query["text"] if query.get("text") is not None else f"[query id] {query['id']}",
        "chunks": chunks,
    }, "meta": {"judges": int(it.get("judges", 1))}}


def checked_tasks(doc: Any) -> list[dict]:
    """Tasks read back from a batch's label-studio/tasks.json: ``ValueError``
    naming the first (by its place) that is not a task as ``tasks`` makes it."""
    if not isinstance(doc, list):
        raise ValueError("not a list of Label Studio tasks")
    for n, task in enumerate(doc, 1):
        if not (isinstance(task, dict) and isinstance(task.get("data"), dict)
                and isinstance(task.get("meta", {}), dict) and _count(_judges(task))):
            raise ValueError(f"task {n} is not a Label Studio task of a batch (data, and a number of judges)")
    return doc


def token_from(file: str | None, env: str = "LABEL_STUDIO_TOKEN") -> str:
    """The token from ``file`` if given, else from environment ``env``: one line
    of printable ASCII, surrounding whitespace stripped. An error never shows it."""
    if file:
        try:
            raw: str | bytes = Path(file).read_bytes()
        except OSError as exc:
            raise LabelStudioError(f"cannot read Label Studio token file {file}: {exc.strerror}") from None
        where = f"Label Studio token file {file}"
    else:
        raw, where = os.environ.get(env, ""), f"environment variable {env} (the Label Studio token)"
    try:
        token = one_line(raw, where)
    except SecretError as exc:
        raise LabelStudioError(str(exc)) from None
    if not token.isascii() or " " in token:
        raise LabelStudioError(f"{where} must hold one token: ASCII, without spaces")
    return token


class LabelStudio:
    """A thin REST client: ``LabelStudio("http://host:8080", token)``.

    ``timeout`` bounds each request from its start to its last byte; a
    ``deadline``, when given, bounds every request together (the command's,
    shared with its other requests); ``max_bytes`` bounds each answer.
    """

    def __init__(self, url: str, token: str, *, timeout: float = 60.0, deadline: Deadline | None = None,
                 max_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._deadline = deadline
        self._token = token
        self._pat = token.count(".") == 2 and token.startswith("eyJ")
        self._access: str | None = None

    def __repr__(self) -> str:
        return f"LabelStudio({redact_url(self.url)!r})"

    def create_project(self, title: str, config: str, tags: Sequence[str] = TAGS) -> int:
        """A project judged blind: PROJECT_SETTINGS, the grading guide of
        ``tags`` as its instructions, and a data manager tab without the
        chunks' raw JSON or other judges' results (HIDDEN_COLUMNS)."""
        project = self._created("/api/projects/", {
            "title": title, "label_config": config, "expert_instruction": instructions(tags), **PROJECT_SETTINGS})
        hidden = list(HIDDEN_COLUMNS)
        self._call("POST", "/api/dm/views/", {"project": project, "data": {
            "title": "Tasks", "hiddenColumns": {"explore": hidden, "labeling": hidden}}})
        return project

    def project(self, project_id: int) -> dict:
        """The project as stored: ``label_config``, ``parsed_label_config``, counts."""
        path = f"/api/projects/{project_id}/"
        answer = self._call("GET", path)
        if not isinstance(answer, dict):
            raise self._unexpected("GET", path)
        return answer

    def import_tasks(self, project_id: int, tasks: list[dict]) -> int:
        """Import tasks; returns how many the server created. A task whose
        ``meta.judges`` is 2 gets overlap 2: Label Studio hands it to two judges
        (in the labeling stream, each of them their own annotation only)."""
        path = f"/api/projects/{project_id}/import"
        res = self._call("POST", path, tasks, {"return_task_ids": "true"})
        if isinstance(res, dict) and "task_count" not in res:  # an edition that queues imports answers without a count
            raise LabelStudioError(f"import into project {project_id} queued, not done")
        count, ids = (res.get("task_count"), res.get("task_ids", [])) if isinstance(res, dict) else (None, None)
        if not (_count(count, 0) and isinstance(ids, list) and all(_count(i) for i in ids)):
            raise self._unexpected("POST", path)
        for task, task_id in zip(tasks, ids):  # ids come in import order
            if (judges := _judges(task)) > 1:
                self._call("PATCH", f"/api/tasks/{task_id}/", {"overlap": judges})
        return count

    def project_tasks(self, project_id: int, page_size: int = 100) -> list[dict]:
        """Every task of the project (data, id, annotation counts), page by page."""
        out: list[dict] = []
        page = 1
        while True:
            res = self._call("GET", "/api/tasks/", params={
                "project": project_id, "page": page, "page_size": page_size, "fields": "all"})
            batch = res.get("tasks") if isinstance(res, dict) else res
            if not (isinstance(batch, list) and all(isinstance(t, dict) for t in batch)):
                raise self._unexpected("GET", "/api/tasks/")
            out.extend(batch)
            total = res.get("total", len(out)) if isinstance(res, dict) else len(out)
            if not _count(total, 0):
                raise self._unexpected("GET", "/api/tasks/")
            if not batch or len(out) >= total:
                return out
            page += 1

    def export_annotations(self, project_id: int, all_tasks: bool = False) -> list[dict]:
        """The JSON export: each annotated task (every task if ``all_tasks``)
        with its ``id``, ``data`` and ``annotations``."""
        params = {"exportType": "JSON", "download_all_tasks": "true" if all_tasks else "false"}
        return self._call("GET", f"/api/projects/{project_id}/export", params=params)

    def annotate(self, task_id: int, result: list[dict]) -> int:
        """Submit one annotation (as a judge would); returns its id."""
        return self._created(f"/api/tasks/{task_id}/annotations/", {"result": result})

    # -- HTTP ------------------------------------------------------------

    def _created(self, path: str, body: Any) -> int:
        """POST ``body``; the id of what the server created."""
        answer = self._call("POST", path, body)
        created = answer.get("id") if isinstance(answer, dict) else None
        if not _count(created):
            raise self._unexpected("POST", path)
        return created

    def _unexpected(self, method: str, path: str, why: str = "") -> LabelStudioError:
        """An answer of the wrong shape: the server is named, what it said is not."""
        return LabelStudioError(f"Label Studio {method} {path}: unexpected answer from {redact_url(self.url)}{why}")

    def _auth(self, renew: bool = False) -> str:
        if not self._pat:
            return f"Token {self._token}"
        if self._access is None or renew:
            answer = self._send("POST", "/api/token/refresh/", {"refresh": self._token}, None)
            access = answer.get("access") if isinstance(answer, dict) else None
            if not (isinstance(access, str) and access.isascii() and access.isprintable() and " " not in access):
                raise LabelStudioError("Label Studio POST /api/token/refresh/: the answer holds no access token")
            self._access = access
        return f"Bearer {self._access}"

    def _call(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any:
        try:
            return self._send(method, path, body, self._auth(), params)
        except LabelStudioError as exc:
            if not (self._pat and exc.status == 401):
                raise
            return self._send(method, path, body, self._auth(renew=True), params)

    def _send(self, method: str, path: str, body: Any, auth: str | None, params: dict | None = None) -> Any:
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = auth
        data = None if body is None else json.dumps(body).encode()
        what = f"Label Studio {method} {path}"
        try:
            raw = fetch(url, method=method, data=data, headers=headers, timeout=self.timeout,
                        max_bytes=self.max_bytes, deadline=self._deadline)
        except FetchError as exc:
            if exc.status == 401:
                message = f"{what}: {exc}: the token was refused"
            elif exc.status is not None and exc.status >= 400:
                message = f"{what}: {exc}"
            else:
                message = f"{what} at {redact_url(self.url)}: {exc}"
            error = TooLarge if isinstance(exc, AnswerTooLarge) else LabelStudioError
            raise error(self._clean(message), exc.status) from None
        try:
            return loads(raw.decode()) if raw else {}
        except TooDeep:
            raise LabelStudioError(f"{what}: answer is JSON nested too deeply to read") from None
        except ValueError:
            raise self._unexpected(method, path, f" (HTTP 2xx, {len(raw)} bytes, not JSON)") from None

    def _clean(self, message: str, limit: int = 600) -> str:
        """Tokens and what looks like a credential out first, then cut to ``limit``:
        a cut never leaves part of one."""
        for secret in (self._token, self._access):
            if secret:
                message = message.replace(secret, "<token>")
        message = scrub(message)
        return message if len(message) <= limit else message[:limit] + "..."


def _judges(task: dict) -> Any:
    """How many judges a task asks for: its ``meta.judges`` (``data.judges`` in
    the tasks.json of a batch built before the count left the task's data)."""
    return task.get("meta", {}).get("judges", task["data"].get("judges", 1))


def _count(value: Any, least: int = 1) -> TypeGuard[int]:
    """Whether a value read from JSON is a whole number, at least ``least`` (not a bool, a float or a string)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least
