"""Score distributions: top-1 score, mean admitted score, top-1/top-2 gap."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

TOP1 = Histogram("top1_score", ("app",), "Score of the best-ranked result.", "score")
ADMITTED = Histogram("admitted_score", ("app",), "Mean score over the admitted set, per event.", "score")
GAP = Histogram("score_gap", ("app",), "Top-1 minus top-2 score.", "gap")
METRICS = (TOP1, ADMITTED, GAP)


def observe(view: View, tally: Tally) -> None:
    results, app = view.event.results, view.app
    if not results:
        return
    buckets = view.config.score_buckets(app)
    TOP1.record(tally, buckets, app, results[0].score)
    if len(results) > 1:
        GAP.record(tally, view.config.bucket_set("gap"), app, results[0].score - results[1].score)
    admitted = view.admitted
    if admitted:
        ADMITTED.record(tally, buckets, app, sum(r.score for r in admitted) / len(admitted))
