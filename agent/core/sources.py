"""Source concentration, parent diversity, duplicate dominance and fingerprints."""

from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import Table, View

ADMITTED_RESULTS = Counter("admitted_results", ("app", "source"), "Results admitted to the context.")
DUPLICATES = Counter("duplicate_fingerprint_results", ("app",),
                     "Admitted results repeating a better-ranked admitted fingerprint.")
DIVERSITY = Histogram("parent_diversity_ratio", ("app",), "Unique parents / admitted results, per event.", buckets="ratio")
DOMINANCE = Histogram("duplicate_dominance_ratio", ("app",), "Largest share of one parent in the admitted set.", buckets="ratio")
METRICS = (ADMITTED_RESULTS, DUPLICATES, DIVERSITY, DOMINANCE)
BY_SOURCE = Table("source", ADMITTED_RESULTS.key)


def observe(view: View, tally: Tally) -> None:
    facts, keys = view.facts, view.keys
    admitted = facts.admitted
    if not admitted:
        return
    by_source = keys[BY_SOURCE]
    for source, n in facts.sources.items():
        inc(tally, by_source[source], n)
    if facts.duplicate_fingerprints:
        inc(tally, keys[DUPLICATES], facts.duplicate_fingerprints)
    n = len(admitted)
    parents = facts.parents
    keys[DIVERSITY].record(tally, len(parents) / n)
    keys[DOMINANCE].record(tally, max(parents.values()) / n)


def concentration(admitted_by_source: dict[str, float]) -> tuple[float, float]:
    """Herfindahl index and top-source share of admitted results (0, 0 when empty)."""
    total = sum(admitted_by_source.values())
    if not total:
        return 0.0, 0.0
    shares = [count / total for count in admitted_by_source.values()]
    return sum(s * s for s in shares), max(shares)
