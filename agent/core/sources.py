"""Source concentration, parent diversity, duplicate dominance and fingerprints."""

from agent.core.tally import Counter, Histogram, Tally, inc
from agent.core.view import View

DIVERSITY = Histogram("parent_diversity_ratio", ("app",), "Unique parents / admitted results, per event.", "ratio")
DOMINANCE = Histogram("duplicate_dominance_ratio", ("app",), "Largest share of one parent in the admitted set.", "ratio")
METRICS = (
    Counter("admitted_results", ("app", "source"), "Results admitted to the context."),
    Counter("duplicate_fingerprint_results", ("app",), "Admitted results repeating a better-ranked admitted fingerprint."),
    DIVERSITY,
    DOMINANCE,
)


def observe(view: View, tally: Tally) -> None:
    admitted, app = view.admitted, view.app
    if not admitted:
        return
    source_label = view.labels["source"]
    parents: dict[str, int] = {}
    seen: set[str] = set()
    duplicates = 0
    for result in admitted:
        inc(tally, ("admitted_results", app, source_label(result.source)))
        parents[result.parent_id] = parents.get(result.parent_id, 0) + 1
        if result.fingerprint is not None:
            fingerprint = result.fingerprint.lower()
            if fingerprint in seen:
                duplicates += 1
            seen.add(fingerprint)
    if duplicates:
        inc(tally, ("duplicate_fingerprint_results", app), duplicates)
    ratios = view.config.bucket_set("ratio")
    n = len(admitted)
    DIVERSITY.record(tally, ratios, app, len(parents) / n)
    DOMINANCE.record(tally, ratios, app, max(parents.values()) / n)


def concentration(admitted_by_source: dict[str, float]) -> tuple[float, float]:
    """Herfindahl index and top-source share of admitted results (0, 0 when empty)."""
    total = sum(admitted_by_source.values())
    if not total:
        return 0.0, 0.0
    shares = [count / total for count in admitted_by_source.values()]
    return sum(s * s for s in shares), max(shares)
