"""OpenTelemetry: a tracer for the agent's own work, linked to producers' traces.

Spans are exported over OTLP only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set;
otherwise the provider records nothing that leaves the process.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanProcessor
from opentelemetry.trace import SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agent import __version__

_PROPAGATOR = TraceContextTextMapPropagator()


def provider(exporter: SpanExporter | None = None, processor: Callable[[SpanExporter], SpanProcessor] = BatchSpanProcessor) -> TracerProvider:
    """A tracer provider; OTLP over HTTP when the standard endpoint variable is set."""
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "ragdrift", "service.version": __version__}))
    if exporter is None and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    if exporter is not None:
        tracer_provider.add_span_processor(processor(exporter))
    return tracer_provider


def remote_context(traceparent: str | None) -> SpanContext | None:
    """The producer's span context from a W3C `traceparent`, if valid."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({"traceparent": traceparent})
    span_context = trace.get_current_span(ctx).get_span_context()
    return span_context if span_context.is_valid else None
