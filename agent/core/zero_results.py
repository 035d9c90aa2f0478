"""Volume, zero results and filter-caused zero results."""

from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import View

RESULT_COUNT = Histogram("results_per_retrieval", ("app",), "Results per event.", "count")
METRICS = (
    Counter("retrievals", ("app",), "Processed retrieval events."),
    Counter("results", ("app",), "Results returned, admitted or not."),
    Counter("zero_result_retrievals", ("app",), "Events with no results."),
    Counter("filter_zero_retrievals", ("app",), "Events whose filters removed every candidate."),
    RESULT_COUNT,
)


def observe(view: View, tally: Tally) -> None:
    event, app = view.event, view.app
    n = len(event.results)
    inc(tally, ("retrievals", app))
    inc(tally, ("results", app), n)
    if n == 0:
        inc(tally, ("zero_result_retrievals", app))
    stages = event.stages
    if stages is not None and (stages.candidates or 0) > 0 and stages.after_filter == 0:
        inc(tally, ("filter_zero_retrievals", app))
    RESULT_COUNT.record(tally, view.config.bucket_set("count"), app, n)
