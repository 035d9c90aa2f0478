"""Access: unauthorized results and results served without identity claims."""

from agent.core.model import Event
from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

METRICS = (
    Counter("unauthorized_results", ("app",), "Results outside the principal's tenant or groups."),
    Counter("unauthorized_retrievals", ("app",), "Events with at least one unauthorized result."),
    Counter("unauthorized_risk_retrievals", ("app",), "Events with results served while identity claims were missing."),
)


def observe(view: View, tally: Tally) -> None:
    event, app = view.event, view.app
    bad = unauthorized_results(event)
    if bad:
        inc(tally, ("unauthorized_results", app), bad)
        inc(tally, ("unauthorized_retrievals", app))
    if not event.principal.claims_present and event.results:
        inc(tally, ("unauthorized_risk_retrievals", app))


def unauthorized_results(event: Event) -> int:
    """Count results, admitted or not, that this principal may not see."""
    tenant = event.principal.tenant
    groups = set(event.principal.groups)
    return sum(
        1
        for r in event.results
        if (r.tenant is not None and r.tenant != tenant) or (r.acl and groups.isdisjoint(r.acl))
    )
