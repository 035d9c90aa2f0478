"""The labeling view as a judge sees it: a real Label Studio in headless Chromium.

A double-judged task is graded by its first judge; a second judge signs
up, opens the project's labeling stream and gets the task: the query pinned
above numbered chunks, captioned rows, none of the first judge's grades,
keys that select nothing. From the data manager the same judge does see
the first judge's grades: the open-source edition's limit, which
docs/judgments.md tells the admin about. The screenshot is always taken and checked to be more than a blank
page; with ``RAGDRIFT_SCREENSHOT=1`` it is also written to
docs/images/labeling-view.png (the README shows it).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import secrets
import struct
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

import pytest

from agent.io.label_studio.client import GRADE_REQUIRED, TAGS, labeling_config, tasks
from tests.browser import Browser
from tests.test_label_studio import ITEMS

pytestmark = pytest.mark.label_studio
IMAGE = Path(__file__).resolve().parent.parent / "docs" / "images" / "labeling-view.png"
SHOWN = {**ITEMS[1], "query": {"id": "q-19c2", "text": "How do I set up the VPN client on Linux?"}, "chunks": [
    {"chunk": "2026-W48-0002-1", "chunk_id": "vpn/linux#2",
     "text": "Install the VPN client on Linux with `sudo apt install corp-vpn`, then run `corp-vpn login` "
             "and sign in with your company account. The client starts with the system from then on."},
    {"chunk": "2026-W48-0002-2", "chunk_id": "vpn/mac#2",
     "text": "On macOS, open System Settings > VPN, choose Add VPN Configuration and import the profile "
             "the IT portal gives you."},
    {"chunk": "2026-W48-0002-3", "chunk_id": "vpn/old#9",
     "text": "Version 1 of the VPN client (deprecated in 2024): download vpn1.tar.gz from the old intranet "
             "and run ./install.sh as root."},
]}


def new_judge(client, url: str, email: str) -> str:
    """A judge who signs up through the organization's invite link, as a
    person would: the ``sessionid`` their browser then holds."""
    signup = url + client._call("GET", "/api/invite")["invite_url"]
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(signup, timeout=30).read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf, "email": email,
                                   "password": secrets.token_hex(12)}).encode()
    opener.open(urllib.request.Request(signup, data=form, headers={"Referer": signup}), timeout=30).read()
    (session,) = [c.value for c in jar if c.name == "sessionid"]
    return session


def png_colours(png: bytes) -> tuple[tuple[int, int], int]:
    """A PNG's size and how many distinct row-start pixels it has (a blank page has one)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    chunks, at = [], 8
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind == b"IDAT":
            chunks.append(png[at + 8:at + 8 + length])
        at += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    stride = 1 + width * (4 if png[25] == 6 else 3)
    rows = [raw[i * stride:(i + 1) * stride] for i in range(height)]
    return (width, height), len({bytes(r[1:]) for r in rows})


LABELING_READY = "document.body.innerText.includes('Grade (required)') && document.body.innerText.includes('Chunk 3')"
QUERY_BOX = """(() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    if (walker.currentNode.textContent.trim() === 'Query') {
      let box = walker.currentNode.parentElement;
      while (box && getComputedStyle(box).position !== 'sticky') box = box.parentElement;
      return box;
    }
  }
  return null;
})()"""


def test_the_second_judge_sees_a_pinned_query_no_grades_and_keys_select_nothing(label_studio, tmp_path):
    """A double-judged task, graded by its first judge: the second judge's
    labeling stream shows it without the first judge's grades."""
    client = label_studio.client()
    project = client.create_project("ragdrift 2026-W48 (screenshot)", labeling_config(TAGS))
    client.import_tasks(project, tasks([SHOWN]))
    (task,) = client.project_tasks(project)
    assert task["overlap"] == 2
    client.annotate(task["id"], [{"from_name": f"grade_{i}", "to_name": f"chunk_{i}", "type": "choices",
                                  "value": {"choices": ["3"]}} for i in range(len(SHOWN["chunks"]))])
    session = new_judge(client, label_studio.url, f"second-{project}@ragdrift.test")
    with Browser(tmp_path, width=1280, height=900) as page:
        page.cookie("sessionid", session, label_studio.url)
        page.open(f"{label_studio.url}/projects/{project}/data?labeling=1")
        page.wait_for(LABELING_READY)
        # the grading guide pops up before the first task: read it, then close it as a judge would
        assert page.wait_for("document.body.innerText.includes('Grading guide')")
        page.evaluate("document.querySelector('[aria-label=\"Close modal\"]').click()")
        page.wait_for("!document.body.innerText.includes('Grading guide')", timeout=10)
        assert page.evaluate("document.querySelectorAll('input:checked').length") == 0  # not the first judge's grades

        # keys select nothing (Label Studio's own hotkeys would pick a grade with "2")
        page.evaluate("document.activeElement && document.activeElement.blur()")
        for key in ("1", "2", "q"):
            page.press(key)
        assert page.evaluate("document.querySelectorAll('input:checked').length") == 0

        # the query stays in sight when the chunks scroll under it
        assert page.evaluate(f"{QUERY_BOX} !== null")
        png = page.screenshot()
        scroller = (f"(() => {{ let e = {QUERY_BOX}.parentElement; while (e && e.scrollHeight <= e.clientHeight) "
                    "e = e.parentElement; return e; })()")
        page.evaluate(f"{scroller}.scrollTo({{top: 300, behavior: 'instant'}})")
        page.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert page.evaluate(f"{scroller}.scrollTop") > 0
        query = page.evaluate(f"{QUERY_BOX}.getBoundingClientRect().bottom")
        first_chunk = page.evaluate("[...document.querySelectorAll('h1,h2,h3,h4,h5,h6')]"
                                    ".find(h => h.innerText === 'Chunk 1').getBoundingClientRect().top")
        assert first_chunk < query  # chunk 1 went under the query
        assert page.evaluate(f"{QUERY_BOX}.getBoundingClientRect().top >= {scroller}.getBoundingClientRect().top - 1")
        assert page.evaluate("document.querySelectorAll('.lsf-hint').length") > 0  # the blank keys' hints ...
        assert page.evaluate("[...document.querySelectorAll('.lsf-hint')].every(h => !h.offsetParent)")  # ... hidden

        # submitting with a chunk ungraded: a message in words, no control's name
        page.evaluate("document.querySelector('input[type=radio]').click()")
        page.wait_for("[...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Submit' && !b.disabled)")
        page.evaluate("[...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Submit').click()")
        page.wait_for(f"document.body.innerText.includes({json.dumps(GRADE_REQUIRED)})", timeout=10)
        assert page.evaluate("!/grade_[0-9]/.test(document.body.innerText)")

        # what the open-source edition cannot stop (docs/judgments.md): the same judge, opening
        # the task from the data manager instead of the stream, sees the first judge's grades
        page.open(f"{label_studio.url}/projects/{project}/data?task={task['id']}")
        page.wait_for("document.querySelectorAll('input:checked').length > 0")
        # the data manager's list shows neither the chunks' JSON nor the first judge's results
        page.open(f"{label_studio.url}/projects/{project}/data")
        page.wait_for("document.body.innerText.includes('Label All Tasks') && document.body.innerText.includes('item')")
        assert page.evaluate("!/Annotation results|grade_0|Chunk 1/.test(document.body.innerText)")
    (size, colours) = png_colours(png)
    assert size == (1280, 900) and colours > 20  # a page with content, not a blank one
    if os.environ.get("RAGDRIFT_SCREENSHOT"):
        IMAGE.parent.mkdir(exist_ok=True)
        IMAGE.write_bytes(png)
