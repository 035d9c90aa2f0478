"""The span processor on spans shaped as each framework's instrumentation emits them.

The framework end-to-end tests (tests/test_frameworks.py) run the real
frameworks; these pin each rule of the mapping on hand-made spans, through a
real tracer provider and a real broker.
"""

from __future__ import annotations

import json

import orjson
import pytest
from kafka import KafkaConsumer
from opentelemetry.sdk.trace import TracerProvider

from agent.core.decoder import decode
from ragdrift_producer import Dropped, HashKey, Producer, User, user_context
from ragdrift_producer.hashing import Hasher
from ragdrift_producer.otel import RetrievalSpanProcessor, SpanMapping
from tests.services import poll_records

KEY = HashKey(b"example-only-key-0123456789abcdef-0123456789")


@pytest.fixture
def setup(broker, make_topic):
    topic = make_topic()
    producer = Producer(app="spans", key=KEY, kafka={"bootstrap_servers": broker.bootstrap}, topic=topic,
                        cutoff_k=2, registry=None)
    provider = TracerProvider()
    provider.add_span_processor(RetrievalSpanProcessor(producer, default_user=User(tenant="acme", groups=["staff"])))
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=200)
    yield producer, provider.get_tracer("test"), consumer
    producer.close()
    consumer.close()


def events(producer: Producer, consumer: KafkaConsumer, count: int) -> list[dict]:
    producer.close()
    records = poll_records(consumer, count=count)
    for record in records:
        decode(record.value)  # every event is one the agent accepts
    return [orjson.loads(r.value) for r in records]


def documents(prefix: str, docs: list[dict]) -> dict:
    attributes = {}
    for n, doc in enumerate(docs):
        for name, value in doc.items():
            attributes[f"{prefix}{n}.document.{name}"] = json.dumps(value) if name == "metadata" else value
    return attributes


def test_a_haystack_shaped_retrieval_and_its_reranking_make_one_event(setup):
    producer, tracer, consumer = setup
    meta = {"parent_id": "doc-1", "source": "kb", "acl": ["staff"], "effective_date": "2026-01-01"}
    with tracer.start_as_current_span("Pipeline.run", attributes={"openinference.span.kind": "CHAIN"}):
        with tracer.start_as_current_span("InMemoryBM25Retriever.run", attributes={
                "openinference.span.kind": "RETRIEVER", "input.mime_type": "application/json",
                "input.value": json.dumps({"query": "How do I reset my VPN?", "top_k": 3}),
                **documents("retrieval.documents.", [
                    {"id": "c1", "score": 2.5, "content": "first", "metadata": meta},
                    {"id": "c2", "score": 1.5, "content": "second", "metadata": {**meta, "parent_id": "doc-2"}},
                ])}):
            pass
        with tracer.start_as_current_span("MetaFieldRanker.run", attributes={
                "openinference.span.kind": "RERANKER",
                **documents("reranker.input_documents.", [{"id": "c1"}, {"id": "c2"}]),
                **documents("reranker.output_documents.", [{"id": "c2", "score": 0.9}, {"id": "c1", "score": 0.1}]),
        }):
            pass
    (event,) = events(producer, consumer, 1)
    hasher = Hasher(KEY)
    assert event["query"]["id"] == hasher.query("How do I reset my VPN?")[0]
    assert [(r["chunk_id"], r["score"], r["rerank_score"], r["pre_rerank_rank"]) for r in event["results"]] == [
        ("c2", 1.5, 0.9, 2), ("c1", 2.5, 0.1, 1)]
    assert event["stages"] == {"candidates": 2, "after_rerank": 2}
    assert event["principal"]["groups"] == [hasher.group("staff")]
    assert event["results"][0]["acl"] == [hasher.group("staff")]
    assert event["results"][0]["fingerprint"] == hasher.fingerprint("second")
    assert "second" not in json.dumps(event)


def test_nested_llamaindex_retriever_spans_make_one_event_and_ids_come_from_metadata(setup):
    producer, tracer, consumer = setup
    with tracer.start_as_current_span("BaseRetriever.retrieve", attributes={"openinference.span.kind": "RETRIEVER",
                                                                             "input.value": "parental leave"}) as outer:
        with tracer.start_as_current_span("VectorIndexRetriever._retrieve",
                                          attributes={"openinference.span.kind": "RETRIEVER",
                                                      "input.value": "parental leave"}):
            pass
        outer.set_attributes(documents("retrieval.documents.", [
            {"id": "random-node-uuid", "score": 0.8, "content": "text",
             "metadata": {"chunk_id": "HR-7#c1", "parent_id": "HR-7", "source": "hr"}}]))
    (event,) = events(producer, consumer, 1)
    assert event["results"][0]["chunk_id"] == "HR-7#c1"


def test_a_span_without_what_the_contract_needs_is_dropped_with_its_reason_not_filled_in(setup):
    producer, tracer, consumer = setup
    with tracer.start_as_current_span("VectorStoreRetriever", attributes={  # LangChain: no id, no score
            "openinference.span.kind": "RETRIEVER", "input.value": "q",
            **documents("retrieval.documents.", [{"content": "x", "metadata": {"parent_id": "d", "source": "s"}}])}):
        pass
    with tracer.start_as_current_span("VectorStoreRetriever", attributes={
            "openinference.span.kind": "RETRIEVER", "input.value": "q",
            **documents("retrieval.documents.", [{"content": "x", "metadata": {
                "chunk_id": "c", "parent_id": "d", "source": "s", "score": 0.5}}])}):
        pass
    events(producer, consumer, 1)
    assert producer.stats().dropped == {"missing_chunk_id": 1}


def test_the_user_comes_from_the_request_context_before_the_default(setup):
    producer, tracer, consumer = setup
    with user_context(User(tenant="globex", groups=["finance"])), tracer.start_as_current_span(
            "r", attributes={"openinference.span.kind": "RETRIEVER", "input.value": "q"}):
        pass
    (event,) = events(producer, consumer, 1)
    assert event["principal"] == {"tenant": "globex", "groups": [Hasher(KEY).group("finance")]}
    assert event["results"] == []  # a retrieval that found nothing is a zero-result event


def test_genai_retrieval_spans_with_the_teams_parent_rule(broker, make_topic):
    topic = make_topic()
    producer = Producer(app="spans", key=KEY, kafka={"bootstrap_servers": broker.bootstrap}, topic=topic,
                        registry=None, strict=True)
    provider = TracerProvider()
    mapping = SpanMapping(parent_of=lambda chunk: chunk.split("#")[0], default_source="wiki")
    provider.add_span_processor(RetrievalSpanProcessor(producer, mapping=mapping, default_user=User(tenant="t")))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("retrieval", attributes={
            "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "q",
            "gen_ai.retrieval.documents": json.dumps([{"id": "D1#c2", "score": 0.7}])}):
        pass
    with pytest.raises(Dropped, match="missing_query"), tracer.start_as_current_span("retrieval", attributes={
            "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": "[]"}):
        pass
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        (event,) = events(producer, consumer, 1)
    finally:
        consumer.close()
    assert event["results"][0] | {"score": None} == {
        "chunk_id": "D1#c2", "parent_id": "D1", "source": "wiki", "rank": 1, "score": None}


def test_what_openinference_redacted_is_absent_not_hashed(setup):
    producer, tracer, consumer = setup
    with tracer.start_as_current_span("r", attributes={"openinference.span.kind": "RETRIEVER",
                                                      "input.value": "__REDACTED__"}):
        pass
    with tracer.start_as_current_span("r", attributes={
            "openinference.span.kind": "RETRIEVER", "input.value": "q",
            **documents("retrieval.documents.", [{"id": "c", "score": 1.0, "content": "__REDACTED__",
                                                  "metadata": {"parent_id": "d", "source": "s"}}])}):
        pass
    (event,) = events(producer, consumer, 1)
    assert producer.stats().dropped == {"missing_query": 1}
    assert "fingerprint" not in event["results"][0] and "tokens" not in event["results"][0]
