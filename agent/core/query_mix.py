"""Query mix: slices by type and language, and the new-term rate."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

UNKNOWN = "unknown"

QUERY_TYPES = Counter("query_type_retrievals", ("app", "query_type"), "Events per query slice.")
LANGUAGES = Counter("query_language_retrievals", ("language",), "Events per query language.")
TERMS = Counter("query_terms", ("app",), "Query-term occurrences.")
NEW_TERMS = Counter("query_new_terms", ("app",), "Occurrences of terms not in the vocabulary.")
METRICS = (QUERY_TYPES, LANGUAGES, TERMS, NEW_TERMS)


def observe(view: View, tally: Tally) -> None:
    query, app, labels = view.facts.event.query, view.app, view.labels
    inc(tally, (QUERY_TYPES.name, app, labels["query_type"](query.type or UNKNOWN)))
    language = query.language.lower() if query.language else UNKNOWN
    inc(tally, (LANGUAGES.name, labels["language"](language)))
    if query.terms:
        inc(tally, view.keys[TERMS], len(query.terms))
        if view.new_terms:
            inc(tally, view.keys[NEW_TERMS], view.new_terms)
