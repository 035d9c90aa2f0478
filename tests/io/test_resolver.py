"""The resolver against hostile peers: credentials stay within the
configured origin and out of messages, `timeout` bounds the whole call, and
a command's children end with it."""

from __future__ import annotations

import os
import select
import sys

import pytest

from agent.io.http.resolver import ResolverError, resolve
from tests.hostile_http import HostileServer

PASSWORD, TOKEN = "resolver-pass-value", "resolver-token-value"


def with_token(url: str) -> str:
    return f"{url}/resolve?token={TOKEN}"


@pytest.mark.parametrize("away", ["host", "port"])
def test_a_redirect_to_another_origin_is_an_error_naming_it(away):
    with HostileServer() as elsewhere, HostileServer("redirect") as server:
        target = f"http://localhost:{server.port}/landed" if away == "host" else f"{elsewhere.url}/landed"
        server.options["to"] = target
        with pytest.raises(ResolverError, match="another origin") as info:
            resolve("http", ["q1"], ["c1"], url=with_token(server.url), timeout=5)
    message = str(info.value)
    assert target in message and TOKEN not in message
    assert [path for _, path, _ in server.requests + elsewhere.requests] == ["/resolve"]


def test_a_user_and_password_in_the_url_go_to_its_origin_only_and_never_into_a_message():
    with HostileServer() as elsewhere, HostileServer("redirect", to=f"{elsewhere.url}/landed") as server:
        url = server.url.replace("http://", f"http://ragdrift:{PASSWORD}@")
        with pytest.raises(ResolverError, match="another origin") as info:
            resolve("http", ["q1"], ["c1"], url=url, timeout=5)
    assert PASSWORD not in str(info.value) and "ragdrift:***@" in str(info.value)
    assert server.requests[0][2].startswith("Basic ") and elsewhere.requests == []


@pytest.mark.parametrize(("behaviour", "options", "message"), [
    ("trickle", {}, "no complete answer within 1 s"),
    ("cut", {}, "cut off"),
    ("cut_chunked", {}, "cut off"),
    ("nested", {"depth": 100000}, "did not answer with the resolver's JSON"),
    ("status", {"code": 503}, "HTTP 503"),
])
def test_a_broken_answer_is_one_error_within_the_timeout(behaviour, options, message):
    with HostileServer(behaviour, **options) as server, pytest.raises(ResolverError, match=message) as info:
        resolve("http", ["q1"], ["c1"], url=with_token(server.url), timeout=1)
    assert TOKEN not in str(info.value)


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie waiting for a reaper has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def assert_ended(pid: int) -> None:
    """`pid` ends within 5 s (the kill is sent; its delivery is the kernel's); killed here if not, so nothing lingers."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if gone(pid) or select.select([handle], [], [], 5)[0]:
            return
    finally:
        os.close(handle)
    os.kill(pid, 9)
    raise AssertionError(f"process {pid} outlived the resolver command")


def test_a_command_that_times_out_is_killed_with_its_children(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    script = ("import signal, subprocess, sys\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
              f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
              "signal.pause()\n")
    with pytest.raises(ResolverError, match="resolver command"):
        resolve("command", ["q1"], [], command=[sys.executable, "-c", script], timeout=1)
    assert_ended(int(pid_file.read_text()))


def test_a_command_that_answers_leaves_nothing_running(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    script = ("import json, subprocess, sys\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'],"
              " stdout=subprocess.DEVNULL)\n"
              f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
              "print(json.dumps({'queries': {'q1': 'text'}, 'chunks': {}}))\n")
    assert resolve("command", ["q1"], [], command=[sys.executable, "-c", script], timeout=10).queries == {"q1": "text"}
    assert_ended(int(pid_file.read_text()))


def test_a_file_whose_last_line_is_still_being_written_gives_the_whole_lines(tmp_path):
    """An app's recorder appends line by line: a read meeting a half-written last line takes the lines
    before it; a damaged line anywhere else is one error naming it."""
    path = tmp_path / "texts.jsonl"
    whole = '{"kind": "query", "id": "q1", "text": "how do refunds work"}\n'
    path.write_text(whole + '{"kind": "chunk", "id": "c1", "te')
    assert resolve("file", ["q1"], ["c1"], path=str(path)).queries == {"q1": "how do refunds work"}
    path.write_text('{"kind": "chunk", "id": "c1", "te\n' + whole)
    with pytest.raises(ResolverError, match="line 1 is not a resolver entry"):
        resolve("file", ["q1"], ["c1"], path=str(path))
