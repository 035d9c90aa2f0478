"""Label Studio as the judging tool: labeling config, task import format, REST client.

A judge sees the query and each retrieved chunk, grades every chunk 0-3, may
tag it and may put it in an evidence group (chunks in one group together
form a complete answer). Names in annotation results map back to the blinded
item: ``grade_<i>`` / ``tags_<i>`` / ``group_<i>`` are about
``task["data"]["chunks"][i]``, whose ``chunk`` key is the blinded chunk key;
``task["data"]["item"]`` is the item (agent/core/judgments/importing.py
reads them back).

Authentication: a legacy token (40 hex characters) is sent as
``Authorization: Token <token>``. A personal access token (a JWT refresh
token, ``eyJ...``) is exchanged at ``/api/token/refresh/`` for a short-lived
access token, sent as ``Authorization: Bearer <access>`` and renewed once on
a 401. Tokens never appear in an error message, and never go to another
origin: every call is one bounded request of agent/io/fetch.py (a total
deadline, an answer size bound, redirects only within the configured origin).
"""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agent.core.judgments.labels import TAGS  # noqa: F401 - the tags of the labeling config, re-exported
from agent.io.fetch import AnswerTooLarge, FetchError, fetch
from agent.io.secrets import SecretError, one_line, redact_url, scrub

GRADES = (("0", "irrelevant"), ("1", "marginally relevant"), ("2", "relevant"), ("3", "highly relevant"))
EVIDENCE_GROUPS = ("A", "B", "C")
SCALE = ("Grade each retrieved chunk for its relevance to the query: "
         + ", ".join(f"{g} = {name}" for g, name in GRADES)
         + ". Tag any problem you see with a chunk. When several chunks are needed together to answer,"
         + " give them the same evidence group (optional).")


MAX_ANSWER_BYTES = 100_000_000  # the default bound of one answer, an export above all


class LabelStudioError(RuntimeError):
    """A failed call: ``status`` is the HTTP status (None when no answer came)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TooLarge(LabelStudioError):
    """An answer above the client's ``max_bytes``."""


def labeling_config(tags: Sequence[str]) -> str:
    """The XML config: query, then per chunk its text, a 0-3 grade, the tags and an evidence group."""
    view = ET.Element("View")
    ET.SubElement(view, "Header", value=SCALE, size="5")
    ET.SubElement(view, "Header", value="Query", size="4")
    ET.SubElement(view, "Text", name="query", value="$query_shown")
    rep = ET.SubElement(view, "Repeater", on="$chunks", indexFlag="{{idx}}")
    box = ET.SubElement(rep, "View", style="border-top: 1px solid #ccc; padding-top: 8px")
    ET.SubElement(box, "Text", name="chunk_{{idx}}", value="$chunks[{{idx}}].shown")
    grade = ET.SubElement(box, "Choices", name="grade_{{idx}}", toName="chunk_{{idx}}",
                          choice="single-radio", showInline="true", required="true")
    for value, name in GRADES:  # the result holds the alias: "0".."3"
        ET.SubElement(grade, "Choice", value=f"{value} {name}", alias=value)
    if tags:
        tagset = ET.SubElement(box, "Choices", name="tags_{{idx}}", toName="chunk_{{idx}}",
                               choice="multiple", showInline="true")
        for tag in tags:
            ET.SubElement(tagset, "Choice", value=str(tag))
    group = ET.SubElement(box, "Choices", name="group_{{idx}}", toName="chunk_{{idx}}",
                          choice="single", showInline="true")
    for value in EVIDENCE_GROUPS:
        ET.SubElement(group, "Choice", value=value)
    ET.indent(view)
    return ET.tostring(view, encoding="unicode")


def tasks(items: Iterable[dict]) -> list[dict]:
    """Blinded items to Label Studio's import format, one task per item.

    ``shown`` is what the judge reads: the text, or the id when text is null.
    """
    out = []
    for it in items:
        query = it["query"]
        chunks = [{"chunk": c["chunk"], "chunk_id": c["chunk_id"], "text": c.get("text"),
                   "shown": c["text"] if c.get("text") is not None else f"[chunk id] {c['chunk_id']}"}
                  for c in it["chunks"]]
        if not chunks:
            raise ValueError(f"item {it['item']!r} has no chunks")
        out.append({"data": {
            "item": it["item"], "judges": int(it.get("judges", 1)),
            "query_id": query["id"], "query_text": query.get("text"),
            "query_shown": query["text"] if query.get("text") is not None else f"[query id] {query['id']}",
            "chunks": chunks,
        }})
    return out


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

    ``timeout`` bounds each request from its start to its last byte; ``budget``,
    when given, bounds every request of the client together (a command's
    deadline); ``max_bytes`` bounds each answer.
    """

    def __init__(self, url: str, token: str, timeout: float = 60.0, budget: float | None = None,
                 max_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._deadline = None if budget is None else time.monotonic() + budget
        self._token = token
        self._pat = token.count(".") == 2 and token.startswith("eyJ")
        self._access: str | None = None

    def __repr__(self) -> str:
        return f"LabelStudio({redact_url(self.url)!r})"

    def create_project(self, title: str, config: str) -> int:
        return int(self._call("POST", "/api/projects/", {"title": title, "label_config": config})["id"])

    def project(self, project_id: int) -> dict:
        """The project as stored: ``label_config``, ``parsed_label_config``, counts."""
        return self._call("GET", f"/api/projects/{project_id}/")

    def import_tasks(self, project_id: int, tasks: list[dict]) -> int:
        """Import tasks; returns how many the server created. A task whose
        ``data.judges`` is 2 gets overlap 2: Label Studio hands it to two judges."""
        res = self._call("POST", f"/api/projects/{project_id}/import", tasks, {"return_task_ids": "true"})
        if "task_count" not in res:  # an edition that queues imports answers without a count
            raise LabelStudioError(f"import into project {project_id} queued, not done: {res}")
        for task, task_id in zip(tasks, res.get("task_ids", ())):  # ids come in import order
            if (judges := int(task["data"].get("judges", 1))) > 1:
                self._call("PATCH", f"/api/tasks/{task_id}/", {"overlap": judges})
        return int(res["task_count"])

    def project_tasks(self, project_id: int, page_size: int = 100) -> list[dict]:
        """Every task of the project (data, id, annotation counts), page by page."""
        out: list[dict] = []
        page = 1
        while True:
            res = self._call("GET", "/api/tasks/", params={
                "project": project_id, "page": page, "page_size": page_size, "fields": "all"})
            batch = res["tasks"] if isinstance(res, dict) else res
            out.extend(batch)
            total = res.get("total", len(out)) if isinstance(res, dict) else len(out)
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
        return int(self._call("POST", f"/api/tasks/{task_id}/annotations/", {"result": result})["id"])

    # -- HTTP ------------------------------------------------------------

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
        timeout = self.timeout
        if self._deadline is not None:
            timeout = min(timeout, self._deadline - time.monotonic())
            if timeout <= 0:
                raise LabelStudioError(f"{what}: not sent, the command's time is up")
        try:
            raw = fetch(url, method=method, data=data, headers=headers, timeout=timeout, max_bytes=self.max_bytes)
        except FetchError as exc:
            if exc.status is not None and exc.status >= 400:
                message = f"{what}: {exc}: {_server_message(exc.body)}"
            else:
                message = f"{what} at {redact_url(self.url)}: {exc}"
            error = TooLarge if isinstance(exc, AnswerTooLarge) else LabelStudioError
            raise error(self._clean(message), exc.status) from None
        try:
            return json.loads(raw) if raw else {}
        except RecursionError:
            raise LabelStudioError(f"{what}: answer is JSON nested too deeply to read") from None
        except ValueError:
            raise LabelStudioError(self._clean(f"{what}: answer is not JSON: {bytes(raw[:200])!r}")) from None

    def _clean(self, message: str, limit: int = 600) -> str:
        """Tokens and what looks like a credential out first, then cut to ``limit``:
        a cut never leaves part of one."""
        for secret in (self._token, self._access):
            if secret:
                message = message.replace(secret, "<token>")
        message = scrub(message)
        return message if len(message) <= limit else message[:limit] + "..."


def _server_message(raw: bytes) -> str:
    """The server's own words: ``detail``/validation errors of a JSON body, else the text."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return raw.decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(body, dict):
        parts = [str(body[k]) for k in ("detail", "validation_errors") if body.get(k)]
        if parts:
            return "; ".join(parts)
    return json.dumps(body)
