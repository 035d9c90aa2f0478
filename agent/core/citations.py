"""Citations: the share of admitted results the answer cited.

Only events that report citations count (a non-empty `feedback.cited`): the
event contract cannot tell an answer that cited nothing from a producer that
does not report citations, and counting the latter would read as a rate of 0.
"""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

CITED = Counter("cited_results", ("app",), "Admitted results the answer cited.")
CITABLE = Counter("citable_results", ("app",), "Admitted results of events reporting citations (feedback.cited).")
METRICS = (CITED, CITABLE)


def observe(view: View, tally: Tally) -> None:
    citations = view.facts.citations
    if citations is None:
        return
    inc(tally, view.keys[CITABLE], len(citations))
    cited = sum(citations)
    if cited:
        inc(tally, view.keys[CITED], cited)
