"""A hostile HTTP server for the clients' tests: the attacker or the broken
peer a client must survive. ``HostileServer(behaviour, **options)`` answers
every request the same way:

redirect(to=URL)      302 to URL (another origin, or the same); a request
                      for /landed gets the default answer instead
trickle               200 with a body sent one byte every 0.2 s, for 8 s (each
                      read of a client is quick: only a total deadline stops it)
trickle_headers       the status line and headers sent the same way
cut                   Content-Length 1000, 10 bytes, then the connection closes
cut_chunked           chunked, one chunk, then the connection closes
big(bytes=N)          N bytes (chunked: no Content-Length)
nested(depth=N)       a JSON list nested N deep
json(body=TEXT)       200 with TEXT
slow(body=TEXT, seconds=S)  200 with TEXT after S seconds (each answer is quick
                      enough: only a deadline over several requests stops them)
status(code=N)        N with a JSON {"detail": ...} body
raw(text=TEXT)        TEXT and nothing else, not HTTP (its first line no status line)
echo(code=N)          N with a JSON {"detail": ...} quoting the request's
                      Authorization header, path and query: the worst case for leaks
default               200 with the JSON {"queries": {}, "chunks": {}}

Every request is recorded: ``requests`` holds (method, path, Authorization).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DRIP_BYTES = 40  # then the connection closes: a client without a deadline fails, later, with a cut answer


class HostileServer:
    def __init__(self, behaviour: str = "default", host: str = "127.0.0.1", **options) -> None:
        self.behaviour = behaviour
        self.options = options
        self.requests: list[tuple[str, str, str | None]] = []
        self.stop = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


def _handler(hostile: HostileServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            path = urllib.parse.urlsplit(self.path).path
            hostile.requests.append((self.command, path, self.headers.get("Authorization")))
            behaviour = "default" if path == "/landed" else hostile.behaviour
            getattr(self, "_" + behaviour)(hostile.options)

        do_GET = do_POST = do_PATCH = _answer

        def _send(self, code: int, body: bytes, headers: dict | None = None) -> None:
            self.send_response(code)
            for name, value in {"Content-Type": "application/json", "Content-Length": str(len(body)),
                                **(headers or {})}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _default(self, options) -> None:
            self._send(200, b'{"queries": {}, "chunks": {}}')

        def _redirect(self, options) -> None:
            self._send(302, b"", {"Location": options["to"]})

        def _json(self, options) -> None:
            self._send(200, options["body"].encode())

        def _slow(self, options) -> None:
            hostile.stop.wait(options["seconds"])
            self._json(options)

        def _raw(self, options) -> None:
            self.wfile.write(options["text"].encode())
            self.close_connection = True

        def _status(self, options) -> None:
            self._send(int(options["code"]), b'{"detail": "refused"}')

        def _echo(self, options) -> None:
            detail = f"refused {self.headers.get('Authorization')} at {self.path}"
            self._send(int(options["code"]), json.dumps({"detail": detail}).encode())

        def _nested(self, options) -> None:
            depth = options["depth"]
            self._send(200, b"[" * depth + b"]" * depth)

        def _trickle(self, options) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self._drip(b" " * 1000000)

        def _trickle_headers(self, options) -> None:
            self._drip(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000000)

        def _drip(self, data: bytes) -> None:
            for i in range(DRIP_BYTES):
                if hostile.stop.is_set():
                    return
                try:
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                except OSError:
                    return  # the client gave up: what it should do
                time.sleep(0.2)
            self.close_connection = True

        def _cut(self, options) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"[" * 10)
            self.close_connection = True

        def _cut_chunked(self, options) -> None:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"a\r\n[[[[[[[[[[\r\n")
            self.close_connection = True

        def _big(self, options) -> None:
            size = options["bytes"]
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b"[" + b"0," * 32767 + b"0]"  # JSON only when whole: the bound, not the parser, refuses
            sent = 0
            try:
                while sent < size:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent += len(piece)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass

        def log_message(self, *args) -> None:
            pass

    return Handler
