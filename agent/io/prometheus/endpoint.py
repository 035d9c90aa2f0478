"""The metrics endpoint: `/metrics` (text and OpenMetrics), `/healthz` and `/readyz` on one port."""

from __future__ import annotations

import ssl
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer


class _QuietHandler(WSGIRequestHandler):
    timeout = 30  # an idle connection cannot hold a handler thread forever

    def log_message(self, format, *args):  # scrapes are not news
        pass


class MetricsServer:
    """`/metrics` (text and OpenMetrics), `/healthz` and `/readyz` on one port."""

    def __init__(self, registry: CollectorRegistry, address: str, port: int, *, health, ready,
                 cert_file: str | None = None, key_file: str | None = None):
        metrics = make_wsgi_app(registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO", "/")
            for route, check in (("/healthz", health), ("/readyz", ready)):
                if path == route:
                    ok, why = check()
                    start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
                    return [why.encode() + b"\n"]
            return metrics(environ, start_response)

        self.httpd = make_server(address, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        if cert_file:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert_file, key_file)
            # The handshake happens in the request's own thread, so an idle
            # connection cannot stall accept() for everyone else.
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
