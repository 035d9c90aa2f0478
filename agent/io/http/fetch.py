"""One HTTP request that cannot hang, send credentials elsewhere or exhaust memory.

urllib's timeout bounds each socket operation, so a server that trickles a
byte at a time holds a request for ever: here a watchdog shuts the
request's connections down when its total deadline passes. urllib's
redirects copy every header, credentials included, to wherever they point:
here a redirect is followed only within the request's origin (scheme, host
and port), and one elsewhere is an error naming its target. The answer is
read up to a bound, and an answer cut short is an error, not a short body.
A user and password in the URL are sent as HTTP Basic credentials.
Only an http:// or https:// URL with a host is requested (urllib would also
read file:, ftp: and data: URLs). An error answer's body is never shown (it
may quote what was sent): only its status and length.

A command's requests share one `Deadline`, counted from the first: each
request gets what is left of it (at most its own timeout). The host name's
resolution is bounded with the rest: it runs in a thread the request stops
waiting for at the deadline (a system resolver that hangs holds that
thread, not the request).
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
from agent.io.settings.checks import http_url

_CHUNK = 1 << 16
_ERROR_BODY = 1 << 16  # of an error answer, read only to say its length
_PORTS = {"http": 80, "https": 443}


class FetchError(RuntimeError):
    """The request failed: `status` is the HTTP status (None without one)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AnswerTooLarge(FetchError):
    """The answer is larger than the request's bound."""


class Deadline:
    """A command's time for every request it makes, together, counted from its first request."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end: float | None = None

    def __str__(self) -> str:
        return f"the command's deadline of {self.seconds:g} s"

    def within(self, timeout: float) -> float:
        """`timeout`, cut to the time left; `FetchError` when none is."""
        if self._end is None:
            self._end = time.monotonic() + self.seconds
        left = self._end - time.monotonic()
        if left <= 0:
            raise FetchError(f"{self} has passed")
        return min(timeout, left)

    def passed(self) -> bool:
        return self._end is not None and time.monotonic() >= self._end


def fetch(url: str, *, method: str = "GET", data: bytes | None = None, headers: Mapping[str, str] | None = None,
          timeout: float, max_bytes: int | None = None, deadline: Deadline | None = None) -> bytearray:
    """The body of a 2xx answer, read whole within `timeout` seconds (and
    within `deadline`); else `FetchError`."""
    if not http_url(url):
        raise FetchError("not a URL that can be requested (http:// or https:// with a host)")
    watchdog = _Watchdog(timeout if deadline is None else deadline.within(timeout))
    opener = urllib.request.build_opener(_SameOrigin(), _HTTPHandler(watchdog), _HTTPSHandler(watchdog))
    with watchdog:
        try:
            url, headers = _basic_credentials(url, dict(headers or {}))
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            with opener.open(request, timeout=timeout) as answer:
                body = _read(answer, max_bytes)
        except urllib.error.HTTPError as exc:
            with exc:
                length = 0 if watchdog.passed() else len(_quietly(exc.read, _ERROR_BODY))
            raise FetchError(f"HTTP {exc.code} (an answer of {length} bytes, not shown)", exc.code) from None
        except FetchError:
            if not watchdog.passed():
                raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if not watchdog.passed():
                raise FetchError(_describe(exc)) from None
        else:
            if not watchdog.passed():
                return body
    if deadline is not None and deadline.passed():
        raise FetchError(f"no complete answer within {deadline}")
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
    if isinstance(exc, http.client.HTTPException):  # its message may quote what the server sent
        return f"the answer is not HTTP ({exc.__class__.__name__})"
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

    def passed(self) -> bool:
        return self.fired or time.monotonic() >= self.deadline

    def connect(self, address, timeout=None, source_address=None) -> socket.socket:
        """`socket.create_connection` within the deadline, the name's resolution included, watched."""
        host, port = address
        error: OSError = OSError(f"{host} has no address")
        for family, kind, proto, _, where in _resolved(host, port, self._left()):
            per_operation = timeout if isinstance(timeout, (int, float)) else self._left()
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(min(per_operation, self._left()))
                if source_address:
                    sock.bind(source_address)
                sock.connect(where)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            sock.settimeout(per_operation)
            with self._lock:
                self._sockets.append(sock.dup())
                if self.fired:
                    _shut(sock)
            return sock
        raise error

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        return left

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _resolved(host: str, port: int, timeout: float) -> list:
    """`socket.getaddrinfo` of a TCP connection, given up after `timeout` seconds:
    the system's resolver has no timeout of its own, so it runs in a thread."""
    found: list = []
    failed: list[Exception] = []
    done = threading.Event()

    def resolve() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except Exception as exc:  # raised again in the request's thread, as create_connection would
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=resolve, name="ragdrift-resolve", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"resolving {host} took longer than the request may")
    if failed:
        raise failed[0]
    return found


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
