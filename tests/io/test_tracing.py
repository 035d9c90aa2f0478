"""Tracing: producer contexts from W3C `traceparent`, the provider's export
switch, and the spans and exemplars of a real agent on the real broker."""

from __future__ import annotations

import random
import threading
import urllib.request
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from agent import synth
from agent.demo.process import wait_until
from agent.io.settings.agent import KafkaSettings, MetricsSettings, Settings, StoreSettings, WindowSettings
from agent.io.store.database import Store
from agent.io.tracing import provider, remote_context
from agent.runner import MAX_LINKS
from agent.service import build

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def processors(tracer_provider) -> tuple:
    # The SDK keeps its processors here; there is no public accessor.
    return tracer_provider._active_span_processor._span_processors


# -- remote contexts ---------------------------------------------------------------


@pytest.mark.parametrize("flags", ["01", "00"])
def test_remote_context_from_a_valid_traceparent(flags):
    context = remote_context(f"00-{TRACE}-{SPAN}-{flags}")
    assert context is not None and context.is_valid and context.is_remote
    assert format(context.trace_id, "032x") == TRACE
    assert format(context.span_id, "016x") == SPAN
    assert int(context.trace_flags) == int(flags, 16)


@pytest.mark.parametrize("header", [
    None,
    "",
    "garbage",
    f"00-{TRACE}-{SPAN}",  # no flags
    f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
    f"00-{TRACE}-{'0' * 16}-01",  # all-zero span id
    f"ff-{TRACE}-{SPAN}-01",  # forbidden version
    f"00-{TRACE[:-1]}-{SPAN}-01",  # short trace id
    f"00-{TRACE.upper()}-{SPAN}-01",  # upper-case hex is not W3C
])
def test_remote_context_from_an_invalid_traceparent_is_none(header):
    assert remote_context(header) is None


# -- the provider ----------------------------------------------------------------------


def test_no_exporter_and_no_endpoint_adds_no_span_processor(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    tracer_provider = provider()
    try:
        assert processors(tracer_provider) == ()
        assert tracer_provider.resource.attributes["service.name"] == "ragdrift"
    finally:
        tracer_provider.shutdown()


def test_endpoint_variable_adds_an_otlp_batch_exporter(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    tracer_provider = provider()
    try:
        (processor,) = processors(tracer_provider)
        assert isinstance(processor, BatchSpanProcessor)
        assert isinstance(processor.span_exporter, OTLPSpanExporter)
    finally:
        tracer_provider.shutdown()


def test_given_exporter_records_spans(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    exporter = InMemorySpanExporter()
    tracer_provider = provider(exporter, processor=SimpleSpanProcessor)
    try:
        (processor,) = processors(tracer_provider)
        assert isinstance(processor, SimpleSpanProcessor)
        with tracer_provider.get_tracer("t").start_as_current_span("work"):
            pass
        (span,) = exporter.get_finished_spans()
        assert span.name == "work" and span.resource.attributes["service.name"] == "ragdrift"
    finally:
        tracer_provider.shutdown()


# -- a real agent, in-process, on the real broker -------------------------------------------


def _traceparent(rng: random.Random) -> tuple[str, str]:
    trace = format(rng.getrandbits(128) | 1, "032x")
    return trace, f"00-{trace}-{format(rng.getrandbits(64) | 1, '016x')}-01"


def _unauthorized(doc: dict) -> bool:
    """Unauthorized: a result outside the principal's tenant, or with an ACL disjoint from its groups."""
    principal = doc["principal"]
    groups = set(principal["groups"])
    return any(
        (r.get("tenant") is not None and r["tenant"] != principal["tenant"]) or (r.get("acl") and groups.isdisjoint(r["acl"]))
        for r in doc["results"]
    )


@pytest.fixture(params=[False, True], ids=["unsplit", "by-pipeline-version"])
def running_agent(request, broker, make_topic, group_id, tmp_path, monkeypatch):
    """A wired agent consuming in a thread, with spans kept in memory; its families split by
    pipeline version or not."""
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    topic, dlq = make_topic(1, "retrievals"), make_topic(1, "dlq")
    url = f"sqlite:///{tmp_path}/state.db"
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers=broker.bootstrap, topics=[topic], dead_letter_topic=dlq,
                            group_id=group_id, session_timeout_ms=2000, heartbeat_interval_ms=500,
                            poll_timeout_ms=200),
        store=StoreSettings(url=url, checkpoint_interval_seconds=0.5),
        metrics=MetricsSettings(address="127.0.0.1", port=0, snapshot_interval_seconds=0.2),
        windows=WindowSettings(by_pipeline_version=request.param),
    )
    exporter = InMemorySpanExporter()
    running = build(settings, tracer_provider=provider(exporter, processor=SimpleSpanProcessor))
    thread = threading.Thread(target=running.agent.run, name="agent", daemon=True)
    try:
        yield running, thread.start, exporter, topic, url
    finally:
        running.agent.stop()
        if thread.is_alive():
            thread.join(30)
        running.close()
        assert not thread.is_alive(), "agent did not stop"


def test_agent_spans_link_producers_and_exemplars_carry_their_trace_ids(broker, running_agent, group_id):
    running, start_consuming, exporter, topic, url = running_agent
    start = datetime.now(UTC) - timedelta(minutes=3)
    lines = list(synth.generate(120, seed=4, start=start, rate=50, incidents=[synth.parse_incident("leak@0")]))
    rng = random.Random(99)
    headers: list[list] = []
    traces: list[str | None] = []  # the producer trace id each message carries, if valid
    for i in range(len(lines)):
        if i % 17 == 5:
            headers.append([]), traces.append(None)  # no header
        elif i % 17 == 11:
            headers.append([("traceparent", b"00-not-a-trace-01")]), traces.append(None)
        else:
            trace, value = _traceparent(rng)
            headers.append([("traceparent", value.encode())]), traces.append(trace)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    for line, header in zip(lines, headers):
        producer.send(topic, line, headers=header)
    producer.flush()
    producer.close()
    start_consuming()  # after producing, so the first poll holds more messages than MAX_LINKS

    def polls():
        return [s for s in exporter.get_finished_spans() if s.name == "ragdrift.poll"]

    wait_until(lambda: sum(s.attributes["messaging.batch.message_count"] for s in polls()) >= len(lines),
               60, 0.05, "every message in a poll span")
    spans = sorted(polls(), key=lambda s: s.start_time)
    assert sum(s.attributes["messaging.batch.message_count"] for s in spans) == len(lines)
    # Each poll span links the producers of its messages, in offset order, at most MAX_LINKS.
    position = 0
    for span in spans:
        count = span.attributes["messaging.batch.message_count"]
        expected = [t for t in traces[position:position + count] if t is not None][:MAX_LINKS]
        assert [format(link.context.trace_id, "032x") for link in span.links] == expected
        assert all(link.context.is_remote for link in span.links)
        assert span.resource.attributes["service.name"] == "ragdrift"
        position += count
    assert any(s.attributes["messaging.batch.message_count"] > MAX_LINKS and len(s.links) == MAX_LINKS for s in spans)

    # A checkpoint span follows, and the store holds the offset after the last message.
    wait_until(lambda: any(s.name == "ragdrift.checkpoint" for s in exporter.get_finished_spans()),
               30, 0.05, "checkpoint span")
    checkpoint = next(s for s in exporter.get_finished_spans() if s.name == "ragdrift.checkpoint")
    assert checkpoint.attributes["ragdrift.partitions"] == 1

    def stored_offset():
        with Store(url) as store:
            found = store.load(group_id, topic, 0)
            return found and found.next_offset

    wait_until(lambda: stored_offset() == len(lines), 30, 0.05, "checkpoint of every message")

    # The unauthorized counters carry, per app (and pipeline version, when split), the trace id
    # of the latest unauthorized event that had one.
    split = running.agent.core.by_pipeline_version
    latest: dict[tuple, str] = {}
    for line, trace in zip(lines, traces):
        doc = orjson.loads(line)
        if trace is not None and _unauthorized(doc):
            latest[(doc["app"], doc["pipeline"]["version"]) if split else (doc["app"],)] = trace
    assert latest, "the leak incident should produce unauthorized results"

    def exemplars():
        request = urllib.request.Request(f"http://127.0.0.1:{running.server.port}/metrics",
                                         headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode()
        found = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "ragdrift_unauthorized_results_total" and s.exemplar is not None:
                    lead = (s.labels["app"], s.labels["pipeline_version"]) if split else (s.labels["app"],)
                    found[lead] = s.exemplar.labels["trace_id"]
        return found

    wait_until(lambda: exemplars() == latest, 30, 0.1, f"exemplars {latest}")
