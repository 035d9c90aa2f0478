"""Filter outcomes: runs per status and chunks removed, per filter name."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

OUTCOMES = Counter("filter_outcomes", ("filter", "status"), "Filter runs by status.")
REMOVED = Counter("filter_removed_chunks", ("filter",), "Chunks removed by each filter.")
METRICS = (OUTCOMES, REMOVED)


def observe(view: View, tally: Tally) -> None:
    name_label = view.labels["filter"]
    for f in view.facts.event.filters:
        name = name_label(f.name)
        inc(tally, (OUTCOMES.name, name, f.status))
        inc(tally, (REMOVED.name, name), f.removed)
