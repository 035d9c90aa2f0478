"""Score distributions: top-1 score, mean admitted score, top-1/top-2 gap."""

from agent.core.tally import Histogram, Tally
from agent.core.view import View

TOP1 = Histogram("top1_score", ("app",), "Score of the best-ranked result.", buckets="score")
ADMITTED = Histogram("admitted_score", ("app",), "Mean score over the admitted set, per event.", buckets="score")
GAP = Histogram("score_gap", ("app",), "Top-1 minus top-2 score.", buckets="gap")
METRICS = (TOP1, ADMITTED, GAP)


def observe(view: View, tally: Tally) -> None:
    facts, keys = view.facts, view.keys
    if facts.top1 is None:
        return
    keys[TOP1].record(tally, facts.top1)
    if facts.gap is not None:
        keys[GAP].record(tally, facts.gap)
    if facts.admitted_score is not None:
        keys[ADMITTED].record(tally, facts.admitted_score)
