"""Smoke tests: the real-service fixtures start, work, and stop."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections import Counter

import pytest

from tests.services import (
    ServiceError,
    StopWaiting,
    Tansu,
    free_port,
    poll_records,
    postgres_database,
    unique_name,
    wait_assigned,
    wait_until,
)

# Short group timings: tansu settles a join in max(1 s, session_timeout / 2).
GROUP = dict(session_timeout_ms=2000, heartbeat_interval_ms=500)


# -- helpers ----------------------------------------------------------------


def test_wait_until_returns_value_and_times_out_clearly():
    calls = iter([0, None, 7])
    assert wait_until(lambda: next(calls), timeout=2, interval=0.001) == 7
    with pytest.raises(TimeoutError, match="waiting for the moon"):
        wait_until(lambda: False, timeout=0.1, message="the moon")

    def boom():
        raise StopWaiting("dead")

    t0 = time.monotonic()
    with pytest.raises(StopWaiting):
        wait_until(boom, timeout=5)
    assert time.monotonic() - t0 < 1


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_failed_start_raises_with_log_and_leaves_no_process(tmp_path):
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'boom: cannot bind' >&2\nexit 3\n")
    fake.chmod(0o755)
    t = Tansu(binary=str(fake))
    with pytest.raises(ServiceError, match=r"(?s)exit code 3.*boom: cannot bind"):
        t.start()
    assert t.proc is None
    assert "boom: cannot bind" in t.log_path.read_text()  # kept for the reader
    shutil.rmtree(t.tmpdir)


def test_missing_service_fails_in_ci_and_skips_elsewhere(monkeypatch):
    from tests.conftest import _which

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="unavailable in CI"):
        _which("no-such-binary-ragdrift", "no-such-package")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no-such-binary-ragdrift"):
        _which("no-such-binary-ragdrift", "no-such-package")


# -- broker -----------------------------------------------------------------


def test_broker_group_consumes_every_record_and_commits(broker, make_topic, group_id):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic = make_topic(partitions=3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    try:
        for i in range(1000):
            producer.send(topic, key=b"k%d" % (i % 17), value=b"m%d" % i)
        producer.flush()
    finally:
        producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=group_id, enable_auto_commit=False,
        auto_offset_reset="earliest", **GROUP,
    )
    try:
        consumer.subscribe([topic])
        records = wait_assigned(consumer, partitions=3, timeout=20)
        records += poll_records(consumer, count=1000 - len(records), timeout=20)
        assert len(records) == 1000
        assert sorted(r.value for r in records) == sorted(b"m%d" % i for i in range(1000))
        per_partition = Counter(r.partition for r in records)
        assert set(per_partition) == {0, 1, 2}

        # commit the next offset per partition, from the records themselves
        nxt = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            nxt[tp] = max(nxt.get(tp, 0), r.offset + 1)
        consumer.commit({tp: OffsetAndMetadata(off, "", -1) for tp, off in nxt.items()})
        assert {tp: consumer.committed(tp) for tp in nxt} == nxt
    finally:
        consumer.close()

    # a separate client of the same group sees the commits
    probe = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group_id,
                          enable_auto_commit=False)
    try:
        assert {tp: probe.committed(tp) for tp in nxt} == nxt
        # partitions start at 0, so next offsets add up to the record count
        assert sum(nxt.values()) == 1000
    finally:
        probe.close()


def test_broker_record_headers_round_trip(broker, make_topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = make_topic(partitions=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    headers = [("reason", b"invalid_json"), ("source.offset", b"42"), ("empty", b"")]
    try:
        producer.send(topic, value=b"{}", headers=headers).get(timeout=10)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        (record,) = poll_records(consumer, count=1, timeout=10)
        assert list(record.headers) == headers
        assert record.value == b"{}"
    finally:
        consumer.close()


def test_private_broker_stops_and_kills_its_process(tansu_bin):
    with Tansu(binary=tansu_bin) as t:
        pid = t.proc.pid
        assert t.proc.poll() is None  # running
    assert t.proc is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- Prometheus / Alertmanager ---------------------------------------------


def test_prometheus_scrapes_a_prometheus_client_server(prometheus_factory):
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    registry = CollectorRegistry()
    Gauge("ragdrift_smoke_value", "smoke test gauge", registry=registry).set(42.5)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        prom = prometheus_factory(targets=[f"127.0.0.1:{port}"])
        value = wait_until(lambda: prom.query_value("ragdrift_smoke_value"), timeout=20,
                           interval=0.2, message="prometheus to scrape ragdrift_smoke_value")
        assert value == 42.5
        (sample,) = prom.query('up{job="ragdrift"}')
        assert sample["value"][1] == "1"
    finally:
        server.shutdown()
        server.server_close()


def test_alertmanager_delivers_a_posted_alert_to_the_webhook(alertmanager, webhook):
    name = unique_name("SmokeAlert")
    now = dt.datetime.now(dt.UTC)
    sent = time.monotonic()
    alertmanager.post_alerts([{
        "labels": {"alertname": name, "severity": "page"},
        "annotations": {"summary": "smoke"},
        "startsAt": now.isoformat(),
        "endsAt": (now + dt.timedelta(minutes=5)).isoformat(),
    }])
    arrived, _wall, path, body = webhook.wait_for(
        lambda b: b.get("commonLabels", {}).get("alertname") == name, timeout=15)
    assert path == "/hook"
    assert body["status"] == "firing"
    assert body["alerts"][0]["labels"]["severity"] == "page"
    assert arrived - sent < 10


def test_prometheus_rule_fires_through_alertmanager_to_webhook(
        prometheus_factory, alertmanager, webhook, tmp_path):
    rules = tmp_path / "smoke.rules.yml"
    rules.write_text(
        "groups:\n"
        "  - name: smoke\n"
        "    interval: 1s\n"
        "    rules:\n"
        "      - alert: RagdriftSmokeAlwaysFiring\n"
        "        expr: vector(1)\n"
        "        labels: {severity: ticket}\n"
    )
    prom = prometheus_factory(rule_files=[rules], alertmanager=alertmanager.address)
    prom.wait_alertmanager_known(timeout=15)
    _, _, _, body = webhook.wait_for(
        lambda b: b.get("commonLabels", {}).get("alertname") == "RagdriftSmokeAlwaysFiring",
        timeout=20)
    assert body["alerts"][0]["labels"]["severity"] == "ticket"


# -- PostgreSQL -------------------------------------------------------------


def test_pg_url_is_a_fresh_usable_database(pg_url):
    import sqlalchemy as sa

    assert pg_url.startswith("postgresql+psycopg://root@127.0.0.1:5432/ragdrift_t_")
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            assert conn.execute(sa.text(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).scalar() == 0
            conn.execute(sa.text("CREATE TABLE t (id int primary key, v text)"))
            conn.execute(sa.text("INSERT INTO t VALUES (1, 'a'), (2, 'b')"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 2
            assert conn.execute(sa.text("SELECT pg_try_advisory_lock(1)")).scalar() is True
    finally:
        engine.dispose()


def test_postgres_database_is_dropped_after_use_even_with_open_connections(pg_admin_url):
    import psycopg

    admin_url = pg_admin_url.replace("postgresql+psycopg://", "postgresql://")
    exists = "SELECT count(*) FROM pg_database WHERE datname = %s"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        with postgres_database(pg_admin_url) as url:
            name = url.rsplit("/", 1)[1]
            assert admin.execute(exists, (name,)).fetchone()[0] == 1
            # left open on purpose: the drop uses WITH (FORCE)
            leftover = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
            leftover.execute("SELECT 1")
        assert admin.execute(exists, (name,)).fetchone()[0] == 0
    leftover.close()
