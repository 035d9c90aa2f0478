"""Reranker rank shift: how far the reranker moved each result."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

METRICS = (Histogram("rerank_rank_shift", ("app",), "Absolute rank change made by the reranker, per result.", "rank_shift"),)


def observe(view: View, tally: Tally) -> None:
    buckets = view.config.bucket_set("rank_shift")
    for result in view.event.results:
        if result.pre_rerank_rank is not None:
            buckets.observe(tally, "rerank_rank_shift", view.app, abs(result.rank - result.pre_rerank_rank))
