"""Retrieval latency as reported by the application."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

LATENCY = Histogram("retrieval_latency_seconds", ("app",), "Retrieval latency reported by the application.", buckets="latency_seconds")
METRICS = (LATENCY,)


def observe(view: View, tally: Tally) -> None:
    latency = view.facts.event.latency_ms
    if latency is not None:
        view.keys[LATENCY].record(tally, latency / 1000.0)
