"""Content age, stale results and stale conflicts in the admitted set."""

from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import View

AGE = Histogram("content_age_days", ("app",), "Age of each admitted result at event time.", buckets="age_days")
NOT_YET_EFFECTIVE = Counter("not_yet_effective_results", ("app",), "Admitted results effective only after the event.")
STALE_RESULTS = Counter("stale_results", ("app",),
                        "Admitted results superseded, draft, tombstoned, expired or not yet effective.")
STALE_CONFLICTS = Counter("stale_conflict_retrievals", ("app",),
                          "Events admitting a stale and a current result of one parent.")
METRICS = (AGE, NOT_YET_EFFECTIVE, STALE_RESULTS, STALE_CONFLICTS)


def observe(view: View, tally: Tally) -> None:
    facts, keys = view.facts, view.keys
    keys[AGE].record_all(tally, facts.ages)
    if facts.not_yet_effective:
        inc(tally, keys[NOT_YET_EFFECTIVE], facts.not_yet_effective)
    if facts.stale:
        inc(tally, keys[STALE_RESULTS], facts.stale)
        if facts.stale_conflict:
            inc(tally, keys[STALE_CONFLICTS])
