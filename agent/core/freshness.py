"""Content age, stale results and stale conflicts in the admitted set."""

from agent.core.model import Result
from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import View

STALE_STATUSES = frozenset(("superseded", "draft", "tombstoned"))
DAY = 86400.0

AGE = Histogram("content_age_days", ("app",), "Age of each admitted result at event time.", "age_days")
METRICS = (
    AGE,
    Counter("not_yet_effective_results", ("app",), "Admitted results effective only after the event."),
    Counter("stale_results", ("app",), "Admitted results superseded, draft, tombstoned, expired or not yet effective."),
    Counter("stale_conflict_retrievals", ("app",), "Events admitting a stale and a current result of one parent."),
)


def observe(view: View, tally: Tally) -> None:
    ts, app = view.ts, view.app
    ages: list[float] = []
    stale = 0
    stale_parents: set[str] = set()
    fresh_parents: set[str] = set()
    for result in view.admitted:
        effective = result.effective_ts
        if effective is not None:
            if effective <= ts:
                ages.append((ts - effective) / DAY)
            else:
                inc(tally, ("not_yet_effective_results", app))
        if is_stale(result, ts):
            stale += 1
            stale_parents.add(result.parent_id)
        else:
            fresh_parents.add(result.parent_id)
    AGE.record_all(tally, view.config.bucket_set("age_days"), app, ages)
    if stale:
        inc(tally, ("stale_results", app), stale)
        if not stale_parents.isdisjoint(fresh_parents):
            inc(tally, ("stale_conflict_retrievals", app))


def is_stale(result: Result, ts: float) -> bool:
    return (
        result.status in STALE_STATUSES
        or (result.expires_ts is not None and result.expires_ts <= ts)
        or (result.effective_ts is not None and result.effective_ts > ts)
    )
