"""Access: unauthorized results and results served without identity claims."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

UNAUTHORIZED_RESULTS = Counter("unauthorized_results", ("app",), "Results outside the principal's tenant or groups.")
UNAUTHORIZED_RETRIEVALS = Counter("unauthorized_retrievals", ("app",), "Events with at least one unauthorized result.")
UNAUTHORIZED_RISK = Counter("unauthorized_risk_retrievals", ("app",),
                            "Events with results served while identity claims were missing.")
METRICS = (UNAUTHORIZED_RESULTS, UNAUTHORIZED_RETRIEVALS, UNAUTHORIZED_RISK)


def observe(view: View, tally: Tally) -> None:
    facts, keys = view.facts, view.keys
    if facts.unauthorized:
        inc(tally, keys[UNAUTHORIZED_RESULTS], len(facts.unauthorized))
        inc(tally, keys[UNAUTHORIZED_RETRIEVALS])
    if facts.unauthorized_risk:
        inc(tally, keys[UNAUTHORIZED_RISK])
