"""The registry of metric families: one module per family, in a fixed order."""

from itertools import chain

from agent.core import (
    access,
    calibrated,
    citations,
    feedback,
    filters,
    freshness,
    latency,
    query_mix,
    rerank,
    scores,
    sources,
    zero_results,
)  # fmt: skip
from agent.core.tally import Counter, Family

MODULES = (zero_results, scores, freshness, sources, filters, query_mix, access, latency, rerank, feedback, citations,
           calibrated)
OBSERVERS = tuple(module.observe for module in MODULES)
LATE_EVENTS = Counter("late_events", (), "Events older than the allowed lateness: in totals, not in windows.",
                      windowed=False)
UNKNOWN_FIELDS = Counter("unknown_fields", (), "Fields the agent ignored.", windowed=False)
FUTURE_EVENTS = Counter("future_events", (), "Events dated too far ahead of their write time: in totals, not in windows.",
                        windowed=False)
BOOKKEEPING = (LATE_EVENTS, UNKNOWN_FIELDS, FUTURE_EVENTS)
FAMILIES: tuple[Family, ...] = tuple(chain.from_iterable(m.METRICS for m in MODULES)) + BOOKKEEPING
