"""Query mix: slices by type and language, and the new-term rate."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import Table, View

UNKNOWN = "unknown"

QUERY_TYPES = Counter("query_type_retrievals", ("app", "query_type"), "Events per query slice.")
LANGUAGES = Counter("query_language_retrievals", ("language",), "Events per query language.")
TERMS = Counter("query_terms", ("app",), "Query-term occurrences.")
NEW_TERMS = Counter("query_new_terms", ("app",), "Occurrences of terms not in the vocabulary.")
METRICS = (QUERY_TYPES, LANGUAGES, TERMS, NEW_TERMS)
BY_TYPE = Table("query_type", QUERY_TYPES.key)
BY_LANGUAGE = Table("language", LANGUAGES.key, by_app=False)


def observe(view: View, tally: Tally) -> None:
    query, keys = view.facts.event.query, view.keys
    inc(tally, keys[BY_TYPE][query.type or UNKNOWN])
    inc(tally, keys[BY_LANGUAGE][query.language.lower() if query.language else UNKNOWN])
    if query.terms:
        inc(tally, keys[TERMS], len(query.terms))
        if view.new_terms:
            inc(tally, keys[NEW_TERMS], view.new_terms)
