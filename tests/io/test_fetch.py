"""One bounded HTTP request against a hostile server: credentials stay within
their origin, a trickle meets the deadline, a cut or an oversized answer is
an error, never a short or endless body."""

from __future__ import annotations

import base64
import socket
import threading
import traceback

import pytest

from agent.io.http.fetch import AnswerTooLarge, Deadline, FetchError, fetch
from tests.hostile_http import HostileServer

TOKEN = "Token s3cr3t-t0ken-value-0123456789"


def shown(exc: BaseException) -> str:
    """What a traceback of `exc` prints of it and the exceptions chained to it (not the source lines)."""
    text = ""
    while exc is not None:
        text += "".join(traceback.format_exception_only(exc)) + repr(exc.args)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return text


def test_a_redirect_within_the_origin_is_followed_with_its_credentials():
    with HostileServer("redirect", to="/landed") as server:
        body = fetch(f"{server.url}/x", headers={"Authorization": TOKEN}, timeout=5)
    assert body == b'{"queries": {}, "chunks": {}}'
    assert server.requests == [("GET", "/x", TOKEN), ("GET", "/landed", TOKEN)]


@pytest.mark.parametrize("other", ["host", "port"])
def test_a_redirect_to_another_origin_is_an_error_naming_it_and_sends_nothing_there(other):
    with HostileServer("redirect") as server, HostileServer() as elsewhere:
        # another host: the same server under another name, another origin all the same
        away = f"http://localhost:{server.port}" if other == "host" else elsewhere.url
        server.options["to"] = f"{away}/landed?token=leaked-query-token"
        with pytest.raises(FetchError) as info:
            fetch(f"{server.url}/x", headers={"Authorization": TOKEN}, timeout=5)
    message = str(info.value)
    assert "another origin" in message and f"{away}/landed" in message and info.value.status == 302
    assert "leaked-query-token" not in message
    assert server.requests == [("GET", "/x", TOKEN)] and elsewhere.requests == []


def test_a_redirect_from_https_to_http_is_another_origin_too():
    from agent.io.http.fetch import origin

    assert origin("https://ls.example:443/x") == origin("https://LS.example/y")
    assert origin("https://ls.example/x") != origin("http://ls.example/x")
    assert origin("http://ls.example/x") != origin("http://ls.example:8080/x")


@pytest.mark.parametrize("behaviour", ["trickle", "trickle_headers"])
def test_a_trickling_server_meets_the_total_deadline(behaviour):
    with HostileServer(behaviour) as server, pytest.raises(FetchError, match=r"no complete answer within 1 s"):
        fetch(server.url, timeout=1)  # each byte comes well within 1 s


@pytest.mark.parametrize("behaviour", ["cut", "cut_chunked"])
def test_an_answer_cut_off_is_an_error(behaviour):
    with HostileServer(behaviour) as server, pytest.raises(FetchError, match="cut off"):
        fetch(server.url, timeout=5)


@pytest.mark.parametrize(("behaviour", "options"), [("big", {"bytes": 3000000}), ("json", {"body": "1" * 2000})])
def test_an_answer_above_the_bound_is_an_error(behaviour, options):
    with HostileServer(behaviour, **options) as server, pytest.raises(AnswerTooLarge, match="larger than the limit of 1000 bytes"):
        fetch(server.url, timeout=5, max_bytes=1000)


def test_a_user_and_password_in_the_url_are_basic_credentials_and_never_shown():
    with HostileServer("status", code=500) as server:
        url = server.url.replace("http://", "http://judge:pa%40ss-w0rd-value@")
        with pytest.raises(FetchError) as info:
            fetch(url + "/x?token=token-in-query-value", timeout=5)
    assert server.requests[0][2] == "Basic " + base64.b64encode(b"judge:pa@ss-w0rd-value").decode()
    assert info.value.status == 500 and str(info.value) == "HTTP 500 (an answer of 21 bytes, not shown)"
    assert "pa@ss-w0rd-value" not in shown(info.value) and "pa%40ss" not in shown(info.value)
    assert "token-in-query-value" not in shown(info.value)


def test_an_unreachable_server_is_an_error_without_the_urls_secrets():
    with HostileServer() as server:
        url = server.url
    with pytest.raises(FetchError, match="no answer") as info:
        fetch(url.replace("http://", "http://u:hidden-pw-value@") + "/?token=hidden-token-value", timeout=2)
    assert "hidden" not in shown(info.value)


@pytest.mark.parametrize("scheme", ["file", "ftp", "data"])
def test_only_http_urls_with_a_host_are_requested(tmp_path, scheme):
    judged = tmp_path / "items.jsonl"
    judged.write_text('{"query": {"text": "judged query text"}}\n')
    url = {"file": f"file://{judged}", "ftp": "ftp://127.0.0.1:1/items.jsonl",
           "data": "data:application/json,%7B%22judged%20query%20text%22%3A1%7D"}[scheme]
    with pytest.raises(FetchError, match=r"http:// or https:// with a host") as info:
        fetch(url, timeout=5)
    assert "judged query text" not in shown(info.value)


@pytest.mark.parametrize("text", ["judged query text\r\n\r\n", "HTTP/1.1 2xx judged query text\r\n\r\n"])
def test_an_answer_that_is_not_http_is_never_quoted(text):
    with HostileServer("raw", text=text) as server, pytest.raises(FetchError, match="the answer is not HTTP") as info:
        fetch(server.url, timeout=5)
    assert "judged query text" not in shown(info.value)


def test_a_deadline_bounds_the_requests_together():
    """Each answer comes well within its own timeout; together they outlast the deadline."""
    deadline = Deadline(1)
    with HostileServer("slow", seconds=0.4, body="{}") as server, pytest.raises(FetchError) as info:
        for _ in range(4):
            fetch(server.url, timeout=5, deadline=deadline)
    assert "the command's deadline of 1 s" in str(info.value)


def test_a_name_whose_resolution_hangs_is_bounded_by_the_deadline(monkeypatch):
    """The system's resolver cannot be made to hang offline: getaddrinfo is
    made to, until the test lets it go (or a minute passes, so a request that
    waits for it fails the test rather than hanging it)."""
    release, returned = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def hanging(host, *args, **kwargs):
        if host != "hangs.example":
            return real(host, *args, **kwargs)
        release.wait(60)
        returned.set()
        raise socket.gaierror(socket.EAI_AGAIN, "released by the test")

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    try:
        with pytest.raises(FetchError, match=r"no complete answer within the command.s deadline of 0\.5 s"):
            fetch("http://hangs.example/", timeout=5, deadline=Deadline(0.5))
        assert not returned.is_set()  # the request gave up on the resolver, not the other way round
    finally:
        release.set()
