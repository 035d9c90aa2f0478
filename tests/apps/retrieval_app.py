"""A small RAG app's retrievals, through a real framework or the plain library call.

Run by tests/test_frameworks.py in the frameworks venv (tests/frameworks.py),
never imported by the tests themselves:

    python retrieval_app.py {langchain,haystack,plain} BOOTSTRAP TOPIC APP

The hashing key comes from RAGDRIFT_HASH_KEY, as the docs tell a team. Each
framework is instrumented by its own OpenInference package, and
RetrievalSpanProcessor turns its spans into events; `plain` calls
`Producer.retrieval` directly. The app prints, as one JSON document, what the
framework itself returned for each query (not what the spans said), so that
the test can compute the agent's figures by hand.

The corpus plants personal data and a marker in texts, metadata and the
user's id: none of it may leave the process.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime

from openinference.instrumentation import using_user
from opentelemetry.sdk.trace import TracerProvider

from ragdrift_producer import HashKey, Producer, Result, User, user_context
from ragdrift_producer.otel import RetrievalSpanProcessor

MARKER = "zq7-marker-5f1e"
PII = ("jane.doe@example.com", "+1 415 555 0134", "Jane Doe")
SECRET_METADATA = {"owner_email": "jane.doe@example.com", "note": f"ask Jane Doe {MARKER}"}
# Each query searches one space of at most two chunks, so that every chunk found is
# admitted (cutoff 2) whatever each retriever's scores: the expired ticket (stale),
# the HR chunk outside the user's groups (unauthorized), and an empty space (zero results).
CORPUS = [
    # chunk id, parent, source, text, acl, effective date, expiry, space
    ("VPN-1#c1", "VPN-1", "it-wiki", "Reset the VPN client: open settings and choose reset.", [], "2026-01-05", None,
     "it"),
    ("VPN-2#c1", "VPN-2", "tickets", "Ticket: VPN reset failed for Jane Doe (jane.doe@example.com).", [], "2025-11-20",
     "2026-03-01", "it"),
    ("HR-7#c1", "HR-7", "hr-policies", "Parental leave is 16 weeks; ask HR at +1 415 555 0134.", ["hr-only"],
     "2026-03-01", None, "hr"),
    ("HR-7#c2", "HR-7", "hr-policies", f"Leave requests go through the HR portal. {MARKER}", [], "2026-03-02", None,
     "hr"),
    ("PAY-3#c1", "PAY-3", "payroll", "Payroll runs on the 25th of each month.", ["staff"], "2025-06-30", None, "pay"),
    ("VPN-1#c2", "VPN-1", "it-wiki", "Renew VPN tokens when payroll closes the month.", [], "2026-02-10", None, "pay"),
]
QUERIES = [  # the query and the space it searches
    (f"How do I reset the VPN client? {MARKER}", "it"),
    ("parental leave weeks", "hr"),
    ("When does payroll run, jane.doe@example.com asks", "pay"),
    ("a space with nothing in it", "none"),
]
USER = User(tenant="acme", groups=["staff", "it"])
K = 3


def metadata(chunk_id, parent, source, _text, acl, effective, expires, space) -> dict:
    meta = {"chunk_id": chunk_id, "parent_id": parent, "source": source, "effective_date": effective,
            "tenant": "acme", "acl": acl, "space": space, **SECRET_METADATA}
    if expires:
        meta["expires_at"] = expires
    return meta


def langchain(tracer_provider) -> list[dict]:
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import InMemoryVectorStore
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents([Document(id=row[0], page_content=row[3], metadata=metadata(*row)) for row in CORPUS])

    class ScoredRetriever(BaseRetriever):
        """The few lines that put each document's id and score where its span shows them."""

        space: str

        def _get_relevant_documents(self, query, *, run_manager):
            found = store.similarity_search_with_score(query, k=K, filter=lambda d: d.metadata["space"] == self.space)
            return [Document(id=d.id, page_content=d.page_content, metadata={**d.metadata, "score": s})
                    for d, s in found]

    out = []
    for query, space in QUERIES:
        started = time.time()
        with using_user(PII[0]), user_context(USER):  # the user's id on every span: never in an event
            docs = ScoredRetriever(space=space).invoke(query)
        out.append(returned(query, started, [(d.metadata, d.metadata["score"]) for d in docs]))
    return out


def haystack(tracer_provider) -> list[dict]:
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from openinference.instrumentation.haystack import HaystackInstrumentor

    HaystackInstrumentor().instrument(tracer_provider=tracer_provider)
    store = InMemoryDocumentStore()
    store.write_documents([Document(id=row[0], content=row[3], meta=metadata(*row)) for row in CORPUS])
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=K))
    out = []
    for query, space in QUERIES:
        filters = {"field": "meta.space", "operator": "==", "value": space}
        started = time.time()
        with using_user(PII[0]), user_context(USER):
            docs = pipeline.run({"retriever": {"query": query, "filters": filters}})["retriever"]["documents"]
        out.append(returned(query, started, [(d.meta, d.score) for d in docs]))
    return out


def plain(producer: Producer) -> list[dict]:
    """The library call with no framework: a toy retriever scoring shared words."""
    out = []
    for query, space in QUERIES:
        words = set(query.lower().split())
        scored = sorted(((len(words & set(row[3].lower().split())), row) for row in CORPUS if row[7] == space),
                        key=lambda pair: (-pair[0], pair[1][0]))[:K]
        started = time.time()
        producer.retrieval(query=query, user=USER, ts=datetime.fromtimestamp(started, UTC), results=[
            Result(chunk_id=row[0], parent_id=row[1], source=row[2], score=float(score), text=row[3], acl=row[4],
                   effective_date=row[5], expires_at=row[6], tenant="acme") for score, row in scored])
        out.append(returned(query, started, [(metadata(*row), float(score)) for score, row in scored]))
    return out


def returned(query: str, started: float, docs: list[tuple[dict, float]]) -> dict:
    keep = ("chunk_id", "parent_id", "source", "effective_date", "expires_at", "acl", "tenant")
    return {"query": query, "ts": started, "user_groups": list(USER.groups), "user_tenant": USER.tenant,
            "results": [{**{k: meta.get(k) for k in keep}, "score": float(score)} for meta, score in docs]}


def main() -> int:
    framework, bootstrap, topic, app = sys.argv[1:5]
    producer = Producer(app=app, key=HashKey.from_env(), kafka={"bootstrap_servers": bootstrap}, topic=topic,
                        cutoff_k=2, strict=True, registry=None)
    provider = TracerProvider()
    provider.add_span_processor(RetrievalSpanProcessor(producer))
    frameworks = {"langchain": langchain, "haystack": haystack}
    retrievals = plain(producer) if framework == "plain" else frameworks[framework](provider)
    provider.shutdown()
    stats = producer.close(timeout=30)
    json.dump({"retrievals": retrievals, "sent": stats.sent, "failed": stats.failed, "dropped": dict(stats.dropped)},
              sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
