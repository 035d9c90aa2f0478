"""Volume, zero results and filter-caused zero results."""

from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import View

RETRIEVALS = Counter("retrievals", ("app",), "Processed retrieval events.")
RESULTS = Counter("results", ("app",), "Results returned, admitted or not.")
ZERO_RESULTS = Counter("zero_result_retrievals", ("app",), "Events with no results.")
FILTER_ZERO = Counter("filter_zero_retrievals", ("app",), "Events whose filters removed every candidate.")
RESULT_COUNT = Histogram("results_per_retrieval", ("app",), "Results per event.", "count")
METRICS = (RETRIEVALS, RESULTS, ZERO_RESULTS, FILTER_ZERO, RESULT_COUNT)


def observe(view: View, tally: Tally) -> None:
    facts, app = view.facts, view.app
    n = len(facts.event.results)
    inc(tally, (RETRIEVALS.name, app))
    inc(tally, (RESULTS.name, app), n)
    if n == 0:
        inc(tally, (ZERO_RESULTS.name, app))
    if facts.filter_zero:
        inc(tally, (FILTER_ZERO.name, app))
    RESULT_COUNT.record(tally, view.config.bucket_set("count"), app, n)
