"""Query mix: slices by type and language, and the new-term rate."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

UNKNOWN = "unknown"

METRICS = (
    Counter("query_type_retrievals", ("app", "query_type"), "Events per query slice."),
    Counter("query_language_retrievals", ("language",), "Events per query language."),
    Counter("query_terms", ("app",), "Query-term occurrences."),
    Counter("query_new_terms", ("app",), "Occurrences of terms not in the vocabulary."),
)


def observe(view: View, tally: Tally) -> None:
    query, app, labels = view.event.query, view.app, view.labels
    inc(tally, ("query_type_retrievals", app, labels["query_type"](query.type or UNKNOWN)))
    language = query.language.lower() if query.language else UNKNOWN
    inc(tally, ("query_language_retrievals", labels["language"](language)))
    if query.terms:
        vocabulary = view.vocabulary
        new = sum(vocabulary.add(term) for term in query.terms)
        inc(tally, ("query_terms", app), len(query.terms))
        if new:
            inc(tally, ("query_new_terms", app), new)
