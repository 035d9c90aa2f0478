"""Reranker rank shift: how far the reranker moved each result."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

SHIFT = Histogram("rerank_rank_shift", ("app",), "Absolute rank change made by the reranker, per result.", "rank_shift")
METRICS = (SHIFT,)


def observe(view: View, tally: Tally) -> None:
    shifts = [abs(r.rank - r.pre_rerank_rank) for r in view.event.results if r.pre_rerank_rank is not None]
    SHIFT.record_all(tally, view.config.bucket_set("rank_shift"), view.app, shifts)
