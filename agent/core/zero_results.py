"""Volume, zero results and filter-caused zero results."""

from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import View

RETRIEVALS = Counter("retrievals", ("app",), "Processed retrieval events.")
RESULTS = Counter("results", ("app",), "Results returned, admitted or not.")
ZERO_RESULTS = Counter("zero_result_retrievals", ("app",), "Events with no results.")
FILTER_ZERO = Counter("filter_zero_retrievals", ("app",), "Events whose filters removed every candidate.")
RESULT_COUNT = Histogram("results_per_retrieval", ("app",), "Results per event.", buckets="count")
METRICS = (RETRIEVALS, RESULTS, ZERO_RESULTS, FILTER_ZERO, RESULT_COUNT)


def observe(view: View, tally: Tally) -> None:
    facts, keys = view.facts, view.keys
    n = len(facts.event.results)
    inc(tally, keys[RETRIEVALS])
    inc(tally, keys[RESULTS], n)
    if n == 0:
        inc(tally, keys[ZERO_RESULTS])
    if facts.filter_zero:
        inc(tally, keys[FILTER_ZERO])
    keys[RESULT_COUNT].record(tally, n)
