"""Filter outcomes: runs per status and chunks removed, per filter name."""

from agent.core.model import FILTER_STATUSES
from agent.core.tally import Counter, Tally, inc
from agent.core.view import Table, View

OUTCOMES = Counter("filter_outcomes", ("filter", "status"), "Filter runs by status.")
REMOVED = Counter("filter_removed_chunks", ("filter",), "Chunks removed by each filter.")
METRICS = (OUTCOMES, REMOVED)
# Per filter label: its removed-chunks key, and its outcome key per status.
BY_NAME = Table("filter", lambda name: (REMOVED.key(name), {s: OUTCOMES.key(name, s) for s in FILTER_STATUSES}),
                by_app=False)


def observe(view: View, tally: Tally) -> None:
    by_name = view.keys[BY_NAME]
    for f in view.facts.event.filters:
        removed, outcomes = by_name[f.name]
        inc(tally, outcomes[f.status])
        inc(tally, removed, f.removed)
