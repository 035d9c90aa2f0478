"""Retriever spans as events, inside the app's process.

LangChain, LlamaIndex and Haystack, instrumented by their OpenInference
packages, describe each retrieval as a RETRIEVER span (the query in
`input.value`, each document's id, score, content and metadata in
`retrieval.documents.N.document.*`) and each reranking as a RERANKER span.
The OpenTelemetry GenAI conventions have `gen_ai.retrieval` spans with
`gen_ai.retrieval.documents`. `RetrievalSpanProcessor`, added to the app's
tracer provider, reads those spans as they end and hands their values to the
same `Producer.retrieval` an app would call: the text is hashed here and
never leaves the process. The spans themselves are not altered, and go on
to whatever exporter the app has.

What the contract needs and the spans lack (parent document, source, dates,
ACL, tenant, status, authority; LangChain's ids and scores) comes from the
document's metadata, by the keys `SpanMapping` names. An event that still
lacks a required value is dropped and counted by the producer (`missing_*`),
never filled in. A value OpenInference's `TraceConfig` hid (`__REDACTED__`)
is absent too: a query hidden by `hide_inputs` drops the event
(`missing_query`), and documents hidden by `hide_outputs` lose their metadata.
The asking user comes from `user_context` (set per request),
else from the span attributes `ragdrift.user.tenant` and
`ragdrift.user.groups`, else from `default_user`.

A retrieval and its rerankings are one event. They are read per trace and
sent when the trace's local root span ends (at once when the retriever span
is the root), or after `wait_seconds`, or when more than `max_traces` traces
are waiting. A RETRIEVER span inside another RETRIEVER span (LlamaIndex
nests two per call) is the same retrieval and is not sent twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ragdrift_producer.event import Dropped
from ragdrift_producer.producer import Producer, current_user
from ragdrift_producer.values import Pipeline, Result, Stages, User

KIND = "openinference.span.kind"
DOCUMENTS = "retrieval.documents."
RERANK_IN = "reranker.input_documents."
RERANK_OUT = "reranker.output_documents."
GENAI_OPERATION = "gen_ai.operation.name"
GENAI_DOCUMENTS = "gen_ai.retrieval.documents"
GENAI_QUERY = "gen_ai.retrieval.query.text"
TENANT_ATTRIBUTE = "ragdrift.user.tenant"
GROUPS_ATTRIBUTE = "ragdrift.user.groups"
REDACTED = "__REDACTED__"  # what OpenInference's TraceConfig(hide_inputs/hide_outputs) writes instead
MAX_METADATA_CHARS = 1024 * 1024  # a larger metadata text is not parsed: its keys count as absent


@dataclass(frozen=True, kw_only=True)
class SpanMapping:
    """Where each value of an event is found: metadata keys, tried in order.

    The defaults are the event's own field names, so a team that stores
    `parent_id`, `source`, `acl`, ... in its documents' metadata needs no
    mapping at all. The span's own document id and score are used when the
    metadata has none (`chunk_id`, `score` keys first: LlamaIndex's document id
    is a random node id, and LangChain's spans carry neither).
    """

    chunk_id: Sequence[str] = ("chunk_id",)
    parent_id: Sequence[str] = ("parent_id",)
    source: Sequence[str] = ("source",)
    score: Sequence[str] = ("score",)
    effective_date: Sequence[str] = ("effective_date",)
    expires_at: Sequence[str] = ("expires_at",)
    status: Sequence[str] = ("status",)
    authority: Sequence[str] = ("authority",)
    acl: Sequence[str] = ("acl",)
    tenant: Sequence[str] = ("tenant",)
    tokens: Sequence[str] = ("tokens",)
    query_keys: Sequence[str] = ("query", "query_str", "input")  # in a JSON `input.value` (Haystack's)
    parent_of: Callable[[str], str | None] | None = None  # the team's rule from chunk id to document id
    default_source: str | None = None  # for an app with one corpus


@dataclass
class _Retrieval:
    """One RETRIEVER span's values, read when it ended."""

    span_id: int
    parent_id: int | None
    query: str | None
    documents: list[dict[str, Any]]
    user: User | None
    start_ns: int
    end_ns: int
    name: str
    event_id: str


@dataclass
class _Trace:
    started: float = field(default_factory=time.monotonic)
    retrievals: list[_Retrieval] = field(default_factory=list)
    rerankings: list[tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]] = field(default_factory=list)


class RetrievalSpanProcessor(SpanProcessor):
    """Add to the app's `TracerProvider`: `provider.add_span_processor(RetrievalSpanProcessor(producer))`."""

    def __init__(self, producer: Producer, *, mapping: SpanMapping | None = None, default_user: User | None = None,
                 cutoff_k: int | None = None, wait_seconds: float = 30.0, max_traces: int = 1000) -> None:
        self.producer = producer
        self.mapping = mapping or SpanMapping()
        self.default_user = default_user
        self.cutoff_k = cutoff_k
        self.wait_seconds = wait_seconds
        self.max_traces = max_traces
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Dropped:
            raise  # only a strict producer raises: for tests
        except Exception:
            self.producer.count_dropped("unreadable_span")  # a span it cannot read never breaks the app

    def _on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        attributes = span.attributes or {}
        kind = attributes.get(KIND)
        retrieval = kind == "RETRIEVER" or attributes.get(GENAI_OPERATION) == "retrieval"
        if not retrieval and kind != "RERANKER" and not self._traces:
            return  # most of an app's spans: nothing to read, no trace waiting (a read without the lock)
        # Read (and parse) outside the lock: other threads' spans end meanwhile.
        read = self._retrieval(span, attributes) if retrieval else None
        reranking = ((_documents(attributes, RERANK_IN), _documents(attributes, RERANK_OUT),
                      _text(attributes.get("reranker.model_name"))) if kind == "RERANKER" else None)
        trace_id = context.trace_id
        ready: list[_Trace] = []
        with self._lock:
            if read is not None:
                self._trace(trace_id).retrievals.append(read)
            elif reranking is not None:
                self._trace(trace_id).rerankings.append(reranking)
            if span.parent is None or span.parent.is_remote:
                trace = self._traces.pop(trace_id, None)
                if trace is not None:
                    ready.append(trace)
            ready.extend(self._expired())
        for trace in ready:
            self._send(trace)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            ready = list(self._traces.values())
            self._traces.clear()
        for trace in ready:
            self._send(trace)
        return True

    def shutdown(self) -> None:
        self.force_flush()

    # -- reading spans --------------------------------------------------------------

    def _trace(self, trace_id: int) -> _Trace:
        trace = self._traces.get(trace_id)
        if trace is None:
            trace = self._traces[trace_id] = _Trace()
        return trace

    def _expired(self) -> list[_Trace]:
        now, out = time.monotonic(), []
        while self._traces:
            trace_id, oldest = next(iter(self._traces.items()))
            if len(self._traces) <= self.max_traces and now - oldest.started < self.wait_seconds:
                break
            del self._traces[trace_id]
            out.append(oldest)
        return out

    def _retrieval(self, span: ReadableSpan, attributes: Mapping[str, Any]) -> _Retrieval:
        assert span.context is not None
        if attributes.get(KIND) == "RETRIEVER":
            query = self._query(attributes)
            documents = _documents(attributes, DOCUMENTS)
        else:
            query = _text(attributes.get(GENAI_QUERY))
            documents = _genai_documents(attributes.get(GENAI_DOCUMENTS))
        return _Retrieval(
            span_id=span.context.span_id, parent_id=span.parent.span_id if span.parent else None, query=query,
            documents=documents, user=self._user(attributes), start_ns=span.start_time or 0,
            end_ns=span.end_time or span.start_time or 0, name=span.name,
            event_id=f"{span.context.trace_id:032x}{span.context.span_id:016x}")

    def _query(self, attributes: Mapping[str, Any]) -> str | None:
        value = attributes.get("input.value")
        if not isinstance(value, str) or value == REDACTED:
            return None
        if attributes.get("input.mime_type") == "application/json":
            parsed = _json(value)
            if isinstance(parsed, dict):
                for key in self.mapping.query_keys:
                    if isinstance(parsed.get(key), str):
                        return str(parsed[key])
                return None
        return value

    def _user(self, attributes: Mapping[str, Any]) -> User | None:
        user = current_user()
        if user is not None:
            return user
        tenant = attributes.get(TENANT_ATTRIBUTE)
        if isinstance(tenant, str) and tenant:
            groups = attributes.get(GROUPS_ATTRIBUTE) or ()
            return User(tenant=tenant, groups=[str(g) for g in groups] if not isinstance(groups, str) else [groups])
        return self.default_user

    # -- writing events -------------------------------------------------------------

    def _send(self, trace: _Trace) -> None:
        """One event per outermost retrieval: its own values, or its nearest inner span's that has documents."""
        by_span = {r.span_id: r for r in trace.retrievals}
        nested: dict[int, list[tuple[int, _Retrieval]]] = {}
        for retrieval in trace.retrievals:
            outer, depth = retrieval, 0
            while outer.parent_id in by_span:
                outer, depth = by_span[outer.parent_id], depth + 1
            nested.setdefault(outer.span_id, []).append((depth, retrieval))
        chosen = []
        for outer_id, members in nested.items():
            with_documents = sorted((pair for pair in members if pair[1].documents), key=lambda pair: pair[0])
            chosen.append(with_documents[0][1] if with_documents else by_span[outer_id])
        reranking = trace.rerankings[-1] if len(chosen) == 1 and trace.rerankings else None
        for retrieval in chosen:
            self._event(retrieval, reranking)

    def _event(self, retrieval: _Retrieval,
               reranking: tuple[list[dict[str, Any]], list[dict[str, Any]], str | None] | None) -> None:
        if retrieval.query is None:
            self.producer.count_dropped("missing_query")
            return
        found = [self._result(doc) for doc in retrieval.documents]
        stages = Stages(candidates=len(found))
        reranker = None
        if reranking is not None:
            found, stages, reranker = self._reranked(retrieval.documents, found, reranking)
        pipeline = self.producer.pipeline or Pipeline()
        self.producer.retrieval(
            query=retrieval.query, results=found, user=retrieval.user, cutoff_k=self.cutoff_k, stages=stages,
            pipeline=Pipeline(version=pipeline.version, retriever=pipeline.retriever or retrieval.name,
                              reranker=pipeline.reranker or reranker, embedding_model=pipeline.embedding_model),
            latency_ms=(retrieval.end_ns - retrieval.start_ns) / 1e6,
            ts=datetime.fromtimestamp(retrieval.start_ns / 1e9, UTC), event_id=retrieval.event_id)

    def _reranked(self, documents: list[dict[str, Any]], found: list[Result],
                  reranking: tuple[list[dict[str, Any]], list[dict[str, Any]], str | None],
                  ) -> tuple[list[Result], Stages, str | None]:
        """The reranker's output, in its order, with each document's values from the retrieval."""
        _inputs, outputs, model = reranking
        by_id = {doc.get("id"): (rank, result) for rank, (doc, result) in enumerate(zip(documents, found), 1)
                 if doc.get("id") is not None}
        reranked = []
        for doc in outputs:
            rank, result = by_id.get(doc.get("id"), (None, None))
            if result is None:
                return found, Stages(candidates=len(found)), None  # not this retrieval's documents
            reranked.append(_replace(result, rerank_score=doc.get("score"), pre_rerank_rank=rank))
        return reranked, Stages(candidates=len(found), after_rerank=len(reranked)), model

    def _result(self, doc: Mapping[str, Any]) -> Result:
        metadata = doc.get("metadata") or {}
        m = self.mapping

        def pick(keys: Sequence[str]) -> Any:
            for key in keys:
                value = metadata.get(key)
                if value is not None and value != "":
                    return value
            return None

        chunk_id = pick(m.chunk_id) or doc.get("id")
        parent_id = pick(m.parent_id)
        if parent_id is None and m.parent_of is not None and chunk_id is not None:
            parent_id = m.parent_of(str(chunk_id))
        score = pick(m.score)
        if score is None:
            score = doc.get("score")
        acl = pick(m.acl)
        # A value the span lacks stays None: the producer drops the event with that field's reason.
        values: dict[str, Any] = {
            "chunk_id": chunk_id, "parent_id": parent_id, "source": pick(m.source) or m.default_source,
            "score": score, "effective_date": pick(m.effective_date), "expires_at": pick(m.expires_at),
            "status": pick(m.status), "authority": pick(m.authority),
            "acl": [acl] if isinstance(acl, str) else list(acl or ()), "tenant": pick(m.tenant),
            "text": _text(doc.get("content")), "tokens": pick(m.tokens)}
        return Result(**values)


def _replace(result: Result, **changes: Any) -> Result:
    from dataclasses import replace

    return replace(result, **changes)


def _documents(attributes: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """`prefix`N.document.{id,score,content,metadata} as one dict per N, in N's order."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix):].partition(".document.")
        if not index.isdigit() or rest not in ("id", "score", "content", "metadata"):
            continue
        doc = found.setdefault(int(index), {})
        if rest == "metadata":
            parsed = _json(value) if isinstance(value, str) else None
            doc["metadata"] = parsed if isinstance(parsed, dict) else {}
        elif rest == "id":
            doc["id"] = value if isinstance(value, str | int) else None
        else:
            doc[rest] = value
    return [found[i] for i in sorted(found)]


def _genai_documents(value: Any) -> list[dict[str, Any]]:
    """`gen_ai.retrieval.documents`: a JSON array of {id, score}, or an array of such JSON objects."""
    if isinstance(value, str):
        value = _json(value)
    if not isinstance(value, list | tuple):
        return []
    docs = []
    for item in value:
        parsed = _json(item) if isinstance(item, str) else item
        if isinstance(parsed, dict):
            docs.append({"id": parsed.get("id"), "score": parsed.get("score")})
    return docs


def _json(text: str) -> Any:
    if len(text) > MAX_METADATA_CHARS:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value and value != REDACTED else None
