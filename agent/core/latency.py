"""Retrieval latency as reported by the application."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

METRICS = (Histogram("retrieval_latency_seconds", ("app",), "Retrieval latency reported by the application.", "latency_seconds"),)


def observe(view: View, tally: Tally) -> None:
    latency = view.event.latency_ms
    if latency is not None:
        view.config.bucket_set("latency_seconds").observe(tally, "retrieval_latency_seconds", view.app, latency / 1000.0)
