"""Reranker rank shift: how far the reranker moved each result."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

SHIFT = Histogram("rerank_rank_shift", ("app",), "Absolute rank change made by the reranker, per result.", buckets="rank_shift")
METRICS = (SHIFT,)


def observe(view: View, tally: Tally) -> None:
    view.keys[SHIFT].record_all(tally, view.facts.rank_shifts)
