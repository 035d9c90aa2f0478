"""Filter outcomes: runs per status and chunks removed, per filter name."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

METRICS = (
    Counter("filter_outcomes", ("filter", "status"), "Filter runs by status."),
    Counter("filter_removed_chunks", ("filter",), "Chunks removed by each filter."),
)


def observe(view: View, tally: Tally) -> None:
    name_label = view.labels["filter"]
    for f in view.event.filters:
        name = name_label(f.name)
        inc(tally, ("filter_outcomes", name, f.status))
        inc(tally, ("filter_removed_chunks", name), f.removed)
