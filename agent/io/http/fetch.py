"""One HTTP request that cannot hang, send credentials elsewhere or exhaust memory.

urllib's timeout bounds each socket operation, so a server that trickles a
byte at a time holds a request for ever: here a watchdog shuts the
request's connections down when its total deadline passes. urllib's
redirects copy every header, credentials included, to wherever they point:
here a redirect is followed only within the request's origin (scheme, host
and port), and one elsewhere is an error naming its target. The answer is
read up to a bound, and an answer cut short is an error, not a short body.
A user and password in the URL are sent as HTTP Basic credentials.
"""

from __future__ import annotations

import base64
import http.client
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from agent.io.secrets import redact_url, scrub

_CHUNK = 1 << 16
_ERROR_BODY = 1 << 16  # of an error answer, only what a message can quote
_PORTS = {"http": 80, "https": 443}


class FetchError(RuntimeError):
    """The request failed: `status` is the HTTP status (None without one), `body` an error answer's start."""

    def __init__(self, message: str, status: int | None = None, body: bytes = b"") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class AnswerTooLarge(FetchError):
    """The answer is larger than the request's bound."""


def fetch(url: str, *, method: str = "GET", data: bytes | None = None, headers: Mapping[str, str] | None = None,
          timeout: float, max_bytes: int | None = None) -> bytearray:
    """The body of a 2xx answer, read whole within `timeout` seconds; else `FetchError`."""
    watchdog = _Watchdog(timeout)
    opener = urllib.request.build_opener(_SameOrigin(), _HTTPHandler(watchdog), _HTTPSHandler(watchdog))
    with watchdog:
        try:
            url, headers = _basic_credentials(url, dict(headers or {}))
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            with opener.open(request, timeout=timeout) as answer:
                body = _read(answer, max_bytes)
        except urllib.error.HTTPError as exc:
            with exc:
                error_body = b"" if watchdog.fired else _quietly(exc.read, _ERROR_BODY)
            raise FetchError(f"HTTP {exc.code}", exc.code, error_body) from None
        except FetchError:
            if not watchdog.fired:
                raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if not watchdog.fired:
                raise FetchError(_describe(exc)) from None
        else:
            if not watchdog.fired:
                return body
    raise FetchError(f"no complete answer within {timeout:.3g} s")


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _PORTS.get(scheme)


def _read(answer, max_bytes: int | None) -> bytearray:
    length = answer.headers.get("Content-Length")
    expected = int(length) if length and length.isdigit() else None
    if max_bytes is not None and expected is not None and expected > max_bytes:
        raise AnswerTooLarge(f"answer of {expected} bytes is larger than the limit of {max_bytes} bytes")
    body = bytearray()
    while chunk := answer.read(_CHUNK):
        body += chunk
        if max_bytes is not None and len(body) > max_bytes:
            raise AnswerTooLarge(f"answer is larger than the limit of {max_bytes} bytes")
    if expected is not None and len(body) < expected:
        raise FetchError(f"answer cut off after {len(body)} of {expected} bytes")
    return body


def _quietly(read, size: int) -> bytes:
    try:
        return read(size)
    except (OSError, http.client.HTTPException):
        return b""


def _describe(exc: BaseException) -> str:
    """What went wrong, without the URL's credentials."""
    if isinstance(exc, http.client.IncompleteRead):
        return f"answer cut off after {len(exc.partial)} bytes"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, ValueError):  # its message quotes the URL
        return "not a URL that can be requested (http:// or https://)"
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return "no answer: " + scrub(str(reason) or reason.__class__.__name__)


def _basic_credentials(url: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The URL without its userinfo, which becomes an Authorization header (unless one is given)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, headers
    if not any(k.lower() == "authorization" for k in headers):
        user, _, password = userinfo.partition(":")
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), headers


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the request's origin: its headers carry credentials."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        fp.close()  # its body is never read: it could be endless
        try:
            same = origin(newurl) == origin(req.full_url)
        except ValueError:
            same = False
        if not same:
            raise FetchError(f"redirected (HTTP {code}) to another origin, {redact_url(newurl)}: "
                             "credentials are never sent there; configure the URL it redirects to", code)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Watchdog:
    """Shuts down every connection of one request when its deadline passes.

    It holds a duplicate of each socket, so shutting down reaches the
    connection (a blocked read returns) and never a later socket that
    reuses a closed one's descriptor.
    """

    def __init__(self, timeout: float) -> None:
        self.deadline = time.monotonic() + timeout
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()

    def connect(self, address, timeout=None, source_address=None, *args) -> socket.socket:
        """`socket.create_connection` within the deadline, watched."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        per_operation = timeout if isinstance(timeout, (int, float)) else left
        sock = socket.create_connection(address, min(per_operation, left), source_address, *args)
        sock.settimeout(per_operation)
        with self._lock:
            self._sockets.append(sock.dup())
            if self.fired:
                _shut(sock)
        return sock

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its peer


class _WatchedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args, watchdog: _Watchdog, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = watchdog.connect


class _WatchedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args, watchdog: _Watchdog, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = watchdog.connect


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def http_open(self, req):
        return self.do_open(_WatchedHTTPConnection, req, watchdog=self.watchdog)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self.watchdog = watchdog

    def https_open(self, req):
        return self.do_open(_WatchedHTTPSConnection, req, watchdog=self.watchdog,
                            context=self._context, check_hostname=self._check_hostname)
