"""Start real services for tests and benchmarks: tansu (Kafka wire protocol),
Prometheus, Alertmanager, and a tiny webhook receiver.

No pytest imports here, so bench scripts can reuse these helpers::

    from tests.services import Tansu
    with Tansu() as broker:
        broker.create_topic("retrievals", partitions=3)
        ... KafkaConsumer(bootstrap_servers=broker.bootstrap, ...)

Every helper is a context manager; ``stop()`` is idempotent, kills the child
process and waits for it. Children also die with the Python process that
started them (PR_SET_PDEATHSIG, plus an atexit hook), so a run killed by a
timeout leaves nothing behind. Start services from the main thread: the
death signal follows the thread that started the child. Readiness is always a polled condition
(``wait_until``), never a fixed sleep. When a service fails to start, the
raised error carries the tail of its log file.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent.demo.broker import Tansu, tansu_bin  # re-exported for tests and bench
from agent.demo.process import (  # noqa: F401 - re-exported for tests and bench
    ChildProcess,
    ServiceError,
    StopWaiting,
    _port_open,
    free_port,
    wait_until,
)

__all__ = [
    "ALERTMANAGER_BIN",
    "PG_ADMIN_URL",
    "PROMETHEUS_BIN",
    "Alertmanager",
    "Missing",
    "Prometheus",
    "ServiceError",
    "StopWaiting",
    "Tansu",
    "WebhookReceiver",
    "apt",
    "free_port",
    "http_get",
    "http_post_json",
    "poll_records",
    "postgres_available",
    "postgres_database",
    "tansu_bin",
    "unavailable",
    "unique_name",
    "wait_assigned",
    "wait_until",
]

PG_ADMIN_URL = os.environ.get("RAGDRIFT_TEST_PG", "postgresql://root@127.0.0.1:5432/test")
PROMETHEUS_BIN = "prometheus"
ALERTMANAGER_BIN = "prometheus-alertmanager"


def unique_name(prefix: str = "t") -> str:
    """A short unique name (topics, groups, schemas): ``prefix_<12 hex>``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def http_post_json(url: str, payload: Any, timeout: float = 5.0) -> bytes:
    req = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read()


# --------------------------------------------------------------------------
# process base

# --------------------------------------------------------------------------
# Prometheus / Alertmanager


def _yaml_list(items: Iterable[str]) -> str:
    # JSON strings are valid YAML scalars
    return "[" + ", ".join(json.dumps(str(i)) for i in items) + "]"


class Prometheus(ChildProcess):
    """A real Prometheus server scraping ``targets`` ("host:port") every second.

    ``rule_files`` are absolute paths; ``alertmanager`` is "host:port" or None.
    """

    name = "prometheus"

    def __init__(
        self,
        targets: Sequence[str] = (),
        rule_files: Sequence[str | os.PathLike] = (),
        alertmanager: str | None = None,
        port: int | None = None,
        job: str = "ragdrift",
        binary: str = PROMETHEUS_BIN,
        evaluation_interval: str = "1s",
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.binary = shutil.which(binary) or binary
        self.port = port or free_port()
        self.targets = list(targets)
        self.rule_files = [str(Path(p).resolve()) for p in rule_files]
        self.alertmanager = alertmanager
        self.job = job
        self.evaluation_interval = evaluation_interval
        self.extra_args = list(extra_args)
        self.config_path = self.tmpdir / "prometheus.yml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config_text(self) -> str:
        lines = [
            "global:",
            "  scrape_interval: 1s",
            "  scrape_timeout: 1s",
            f"  evaluation_interval: {self.evaluation_interval}",
            f"rule_files: {_yaml_list(self.rule_files)}",
            "scrape_configs:",
            f"  - job_name: {json.dumps(self.job)}",
            "    static_configs:",
            f"      - targets: {_yaml_list(self.targets)}",
        ]
        if self.alertmanager:
            lines += [
                "alerting:",
                "  alertmanagers:",
                "    - api_version: v2",
                "      static_configs:",
                f"        - targets: {_yaml_list([self.alertmanager])}",
            ]
        return "\n".join(lines) + "\n"

    def command(self) -> list[str]:
        self.config_path.write_text(self.config_text())
        return [
            self.binary,
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.tmpdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--rules.alert.resend-delay=1s",
            "--web.enable-lifecycle",
            *self.extra_args,
        ]

    def ready(self) -> bool:
        try:
            return http_get(self.url + "/-/ready", timeout=1) is not None
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params: Any) -> Any:
        """GET /api/v1/<path>; returns ``data``; raises on status != success."""
        qs = ("?" + urllib.parse.urlencode(params)) if params else ""
        body = json.loads(http_get(f"{self.url}/api/v1/{path}{qs}"))
        if body.get("status") != "success":
            raise ServiceError(f"prometheus API {path}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[dict]:
        """Instant query; returns the ``result`` list (vector samples)."""
        return self.api("query", query=promql)["result"]

    def query_value(self, promql: str) -> float | None:
        """The single value of an instant query, or None if the result is empty."""
        result = self.query(promql)
        if not result:
            return None
        return float(result[0]["value"][1])

    def targets_up(self) -> bool:
        active = self.api("targets")["activeTargets"]
        return bool(active) and all(t.get("health") == "up" for t in active)

    def wait_targets_up(self, timeout: float = 15.0) -> None:
        wait_until(self.targets_up, timeout, 0.2, f"prometheus targets {self.targets} up")

    def alerts(self) -> list[dict]:
        return self.api("alerts")["alerts"]

    def wait_alertmanager_known(self, timeout: float = 15.0) -> list[dict]:
        """Wait until Prometheus lists at least one active Alertmanager."""
        return wait_until(
            lambda: self.api("alertmanagers")["activeAlertmanagers"],
            timeout, 0.2, "prometheus to discover its alertmanager",
        )

    def reload(self) -> None:
        req = urllib.request.Request(self.url + "/-/reload", method="POST")
        urllib.request.urlopen(req, timeout=5).read()


class Alertmanager(ChildProcess):
    """A real Alertmanager; routes every alert to ``webhook_url`` (if given).

    Short group_wait / group_interval / repeat_interval so tests see
    notifications within about a second. ``config`` overrides the whole YAML.
    """

    name = "alertmanager"

    def __init__(
        self,
        webhook_url: str | None = None,
        port: int | None = None,
        config: str | None = None,
        binary: str = ALERTMANAGER_BIN,
        group_by: Sequence[str] = ("alertname",),
        group_wait: str = "0s",
        group_interval: str = "1s",
        repeat_interval: str = "1h",
    ) -> None:
        super().__init__()
        self.binary = shutil.which(binary) or binary
        self.port = port or free_port()
        self.config_path = self.tmpdir / "alertmanager.yml"
        if config is None:
            receiver = "webhook" if webhook_url else "null"
            lines = [
                "route:",
                f"  receiver: {receiver}",
                f"  group_by: {_yaml_list(group_by)}",
                f"  group_wait: {group_wait}",
                f"  group_interval: {group_interval}",
                f"  repeat_interval: {repeat_interval}",
                "receivers:",
                "  - name: 'null'",
            ]
            if webhook_url:
                lines += [
                    "  - name: webhook",
                    "    webhook_configs:",
                    f"      - url: {json.dumps(webhook_url)}",
                    "        send_resolved: true",
                ]
            config = "\n".join(lines) + "\n"
        self.config = config

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        self.config_path.write_text(self.config)
        return [
            self.binary,
            f"--config.file={self.config_path}",
            f"--storage.path={self.tmpdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]

    def ready(self) -> bool:
        try:
            return http_get(self.url + "/-/ready", timeout=1) is not None
        except (urllib.error.URLError, OSError):
            return False

    def post_alerts(self, alerts: list[dict]) -> None:
        """POST alerts to the v2 API, as Prometheus would."""
        http_post_json(self.url + "/api/v2/alerts", alerts)

    def alerts(self) -> list[dict]:
        return json.loads(http_get(self.url + "/api/v2/alerts"))


# --------------------------------------------------------------------------
# webhook receiver


class WebhookReceiver:
    """Threaded HTTP server on loopback collecting POSTed JSON bodies.

    ``received`` holds ``(arrival_monotonic, arrival_wall, path, body)`` tuples;
    ``bodies()`` returns just the parsed bodies. Use ``wait_for(pred)`` to wait
    for a body matching a predicate.
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or 0
        self.received: list[tuple[float, float, str, Any]] = []
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> WebhookReceiver:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with owner._cond:
                    owner.received.append((time.monotonic(), time.time(), self.path, body))
                    owner._cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="webhook-receiver", daemon=True)
        self._thread.start()
        return self

    def bodies(self) -> list[Any]:
        with self._cond:
            return [r[3] for r in self.received]

    def wait_for(self, predicate: Callable[[Any], bool] = lambda b: True,
                 timeout: float = 15.0) -> tuple[float, float, str, Any]:
        """Wait for a received body matching ``predicate``; return its record."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for rec in self.received:
                    if predicate(rec[3]):
                        return rec
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"timed out after {timeout:.1f}s waiting for a webhook body; "
                        f"received {len(self.received)}: {[r[3] for r in self.received][-3:]}"
                    )
                self._cond.wait(min(left, 0.5))

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------
# kafka-python helpers (tansu takes ~max(1 s, session_timeout/2) to settle a
# join: wait on assignment, never sleep)


def poll_records(consumer, count: int | None = None, timeout: float = 30.0,
                 until: Callable[[list], bool] | None = None) -> list:
    """Poll ``consumer`` and return the records it yields.

    Stops when ``count`` records arrived, or ``until(records)`` is true, or
    (neither given) at ``timeout``. Raises TimeoutError if ``count``/``until``
    is not met in time. Records are counted, never inferred from offsets
    (tansu's end offsets count batches, see docs/broker-notes.md).
    """
    records: list = []
    deadline = time.monotonic() + timeout
    while True:
        if count is not None and len(records) >= count:
            return records
        if until is not None and until(records):
            return records
        left = deadline - time.monotonic()
        if left <= 0:
            if count is None and until is None:
                return records
            raise TimeoutError(
                f"timed out after {timeout:.1f}s: got {len(records)} records"
                + (f", wanted {count}" if count is not None else "")
            )
        for batch in consumer.poll(timeout_ms=int(min(left, 0.2) * 1000) or 1).values():
            records.extend(batch)


def wait_assigned(consumer, partitions: int | None = None, timeout: float = 30.0) -> list:
    """Poll a subscribed consumer until it holds an assignment (of exactly
    ``partitions`` partitions if given). Returns the records that polling
    yielded meanwhile: they arrive in the same poll as the assignment, so
    dropping them would lose data."""
    def done(_records: list) -> bool:
        assigned = consumer.assignment()
        return bool(assigned) and (partitions is None or len(assigned) == partitions)

    try:
        return poll_records(consumer, timeout=timeout, until=done)
    except TimeoutError as exc:
        raise TimeoutError(
            f"consumer not assigned {partitions or 'any'} partitions within {timeout:.1f}s "
            f"(has {sorted(consumer.assignment())})"
        ) from exc


# --------------------------------------------------------------------------
# PostgreSQL: one fresh database per use (advisory locks are per database, so
# concurrent test runs on one server cannot see each other's locks)


def _pg_connect(url: str):
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"),
                           autocommit=True, connect_timeout=3)


def postgres_available(admin_url: str = PG_ADMIN_URL) -> str | None:
    """None if the server answers, else a one-line reason."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed"
    try:
        with _pg_connect(admin_url) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"PostgreSQL not reachable at {admin_url}: {str(exc).strip().splitlines()[0]}"
    return None


class postgres_database:  # used like a function
    """Context manager: CREATE a fresh database, yield its SQLAlchemy URL
    (``postgresql+psycopg://root@127.0.0.1:5432/ragdrift_t_<hex>``), then
    DROP it WITH (FORCE) (closing leftover connections)."""

    def __init__(self, admin_url: str = PG_ADMIN_URL, prefix: str = "ragdrift_t") -> None:
        self.admin_url = admin_url.replace("postgresql+psycopg://", "postgresql://")
        self.name = unique_name(prefix)
        base = self.admin_url.rsplit("/", 1)[0]
        self.url = base.replace("postgresql://", "postgresql+psycopg://") + "/" + self.name

    def __enter__(self) -> str:
        with _pg_connect(self.admin_url) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        return self.url

    def __exit__(self, *exc) -> None:
        with _pg_connect(self.admin_url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class Missing:
    """A service a test could not find and the one command that provides it.
    ``root``: the command needs root, so `make test` cannot run it for you."""

    service: str
    command: str
    root: bool = True

    def hint(self) -> str:
        if self.root:
            return f"needs root: {self.command}, or run .ci/run"
        return f"no root needed: {self.command}"


def apt(*packages: str) -> Missing:
    """What Debian packages provide (.ci/run installs them as root)."""
    return Missing(" ".join(packages), f"sudo apt-get install {' '.join(packages)}")


def unavailable(reason: str, missing: Missing | None = None) -> None:
    """Fail loudly in CI (`CI=true`), skip elsewhere: a missing service never passes silently.

    The skip carries ``missing`` so that the run's last line (tests/missing.py)
    can say which service the skipped tests lacked and how to get it."""
    import pytest

    if in_ci():
        pytest.fail(f"required service unavailable in CI: {reason}", pytrace=False)
    skip = pytest.skip.Exception(reason)
    skip.missing = missing
    raise skip
