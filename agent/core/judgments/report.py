"""The judged batch as numbers: metrics per stratum and for traffic, with intervals.

Plain data in (the batch's manifest, its key rows, the latest labels), plain
data out; docs/judgments.md, "The report", states every policy. In short:

- An item's ranking is its admitted chunks in rank order, cut at the event's
  real `cutoff_k`; a chunk nobody graded is dropped from it (never assumed
  irrelevant), and counted. Precision divides by the admitted (judged) count,
  the seed script's purity policy; a zero result has nothing to grade and is
  left to the zero-result rate.
- Relevance is one grade per (query, chunk) in the batch: the mean of every
  grade the chunk got for that query id, in any item (the same query sampled
  twice, or one event in two strata). The query's judged pool is every chunk
  so graded; recall is over the pool's relevant chunks.
- Recall, nDCG and evidence-group figures are averaged over the items where
  they are defined (something relevant in the pool, a positive grade, a
  marked group), not scored 1 as the seed script scores an empty qrels.
- Content age and citations: an item's band is that of the median known age of its
  admitted chunks; answer-supported precision counts, among the admitted
  judged chunks in the cutoff of items that report citations, those both
  cited and relevant.
- Views: `challenge` weighs each judged item 1 (per stratum, and over all);
  `traffic` weighs each by its key's weight max(w, tau) / w. Per stratum that
  estimates the stratum's own traffic. For all traffic the risk strata are
  used together: every event is offered to exactly one risk stratum, so they
  partition the traffic and the union of their samples, weighted, estimates
  it; the `uniform` stratum (a simple random sample of the same traffic) is
  its own, independent estimate, reported as its stratum.
- Intervals: a traffic figure's comes from the sampling design (priority
  sampling's variance of the ratio, agent/core/sampling/estimate.py); a
  challenge figure's from a bootstrap that resamples items within each
  stratum (agent/core/judgments/bootstrap.py).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score

from agent.core.judgments.bootstrap import bootstrap_interval
from agent.core.judgments.judged import JudgedChunk, JudgedItem, judged
from agent.core.judgments.labels import TAGS, Label
from agent.core.judgments.metrics import METRICS, SEED, Gain, per_query
from agent.core.pipelines import NO_VERSION
from agent.core.sampling import UNIFORM, ratio

ALL = "all"  # the stratum label of a view over every stratum
GROUP_METRICS = ("groupComplete", "groupRecall")  # over items whose query has a marked evidence group
CITED_METRICS = ("answerSupported",)  # over items whose event reports citations
REPORT_METRICS = (*METRICS, *GROUP_METRICS, *CITED_METRICS)
SLICES = ("app", "query_type", "language", "content_age", "pipeline_version")
AGE_BANDS = ((30, "< 30 d"), (180, "30-180 d"), (365, "180-365 d"), (math.inf, ">= 1 y"))  # upper bound (days), band
UNKNOWN_AGE = "unknown"
CHECKED_TAGS = {"stale": "stale", "unauthorized": "unauthorized"}  # tag -> the agent's signal that should fire
KAPPA_WEIGHTS = "linear"  # grades are ordinal and evenly spaced: each step of disagreement costs the same


@dataclass(frozen=True, kw_only=True)
class Options:
    threshold: float = 2  # a (mean) grade at least this is relevant
    gain: Gain = "exp"  # nDCG gain: 2^g - 1, or g
    resamples: int = 2000  # bootstrap resamples per challenge interval
    seed: int = 0  # of the bootstrap's generator
    level: float = 0.95
    bins: int = 10  # score bins of the reliability diagram


@dataclass(frozen=True)
class Scored:
    """One judged item and its per-item figures (NaN where a figure is undefined)."""

    item: JudgedItem
    values: Mapping[str, float]
    qrels: Mapping[str, float]  # the query's pooled grades the figures were scored against


def report(manifest: Mapping[str, Any], key: Sequence[Mapping[str, Any]], labels: Iterable[Label], options: Options = Options()) -> dict[str, Any]:
    """Every figure of a judged batch, as JSON-able plain data."""
    items = judged(key, labels)
    scored = score(items, options)
    traffic = [s for s in scored if s.item.key["stratum"] != UNIFORM]
    strata = sorted({s.item.key["stratum"] for s in scored})
    views = [view("traffic", ALL, traffic, options, weighted=True),
             view("challenge", ALL, scored, options, weighted=False)]
    for stratum in strata:
        members = [s for s in scored if s.item.key["stratum"] == stratum]
        views += [view("traffic", stratum, members, options, weighted=True),
                  view("challenge", stratum, members, options, weighted=False)]
    return {
        "batch_id": manifest.get("batch_id"),
        "week": manifest.get("week"),
        "policy": policy(options),
        "counts": counts(key, items),
        "views": views,
        "slices": {name: slices(name, traffic, options) for name in SLICES},
        "citations": citations(scored, options.threshold),
        "agreement": agreement(items, options.threshold),
        "tags": tags(items),
        "calibration": reliability(items, options),
    }


def policy(options: Options) -> dict[str, Any]:
    """Every convention the figures follow, printed with them."""
    return {
        "relevance": f"mean grade >= {options.threshold:g}",
        "cutoff": "the event's cutoff_k",
        "precision": "relevant / admitted judged chunks in the cutoff (purity)",
        "unjudged_chunks": "dropped from the ranking, counted",
        "recall": "over the relevant chunks of the query's judged pool in the batch; items without any excluded",
        "ndcg": f"gain {'2^g - 1' if options.gain == 'exp' else 'g'}, ideal from the pool; items without a positive grade excluded",
        "double_judged": "mean of the grades",
        "group_complete": "every chunk of one evidence group marked for the query admitted and relevant",
        "answer_supported": "cited and relevant / admitted judged chunks in the cutoff, items reporting citations",
        "content_age": "band of the median known age of the item's admitted chunks",
        "traffic": "weight max(w, tau) / w; all traffic from the risk strata together",
        "interval": (f"{options.level:.0%}; traffic: the priority-sampling variance of the ratio, Wilson at its effective"
                     f" size with Student's t; challenge: percentile bootstrap within strata, n - 1 draws of n,"
                     f" {options.resamples} resamples, seed {options.seed}"),
        "kappa": f"Cohen's kappa, {KAPPA_WEIGHTS} weights, on the grades of double-judged chunks",
        "gain": options.gain,
        "threshold": options.threshold,
    }


def score(items: Sequence[JudgedItem], options: Options) -> list[Scored]:
    """Each item's figures against its query's pooled grades."""
    metric_policy = replace(SEED, threshold=options.threshold, gain=options.gain, empty_score=math.nan)
    pooled: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    groups: dict[str, list[frozenset[str]]] = defaultdict(list)
    for item in items:
        query = item.key["query_id"]
        for c in item.chunks:
            if c.grade is not None:
                pooled[query][c.chunk_id].append(c.grade)
        names = {name for c in item.chunks for name in c.evidence_groups}
        groups[query] += [frozenset(c.chunk_id for c in item.chunks if name in c.evidence_groups)
                          for name in sorted(names)]
    scored = []
    for item in items:
        query = item.key["query_id"]
        qrels = {chunk: sum(grades) / len(grades) for chunk, grades in pooled[query].items()}
        ranked = [c.chunk_id for c in item.chunks if c.grade is not None]
        values = dict(per_query(qrels, ranked, max(item.key["cutoff_k"], 1), metric_policy))
        complete = math.nan
        if groups[query]:
            found = {c.chunk_id for c in shown(item) if qrels[c.chunk_id] >= options.threshold}
            complete = float(any(group <= found for group in groups[query]))
        values["groupComplete"] = complete
        values["groupRecall"] = values["recall"] if groups[query] else math.nan
        values["answerSupported"] = math.nan
        if reports_citations(item):
            cut = shown(item)
            values["answerSupported"] = sum(bool(c.cited) and qrels[c.chunk_id] >= options.threshold for c in cut) / len(cut)
        scored.append(Scored(item, values, qrels))
    return scored


def shown(item: JudgedItem) -> list[JudgedChunk]:
    """The chunks precision counts: admitted, judged, within the event's cutoff."""
    return [c for c in item.chunks if c.grade is not None][:max(item.key["cutoff_k"], 1)]


def reports_citations(item: JudgedItem) -> bool:
    return any(c.cited is not None for c in item.chunks)


def view(name: str, stratum: str, scored: Sequence[Scored], options: Options, *, weighted: bool) -> dict[str, Any]:
    """The figures of a set of items: each metric's estimate, interval and item count."""
    weights = np.array([s.item.key["weight"] if weighted else 1.0 for s in scored])
    strata = [s.item.key["stratum"] for s in scored]
    metrics = {}
    for metric in REPORT_METRICS:
        values = np.array([s.values[metric] for s in scored])
        keep = np.isfinite(values)
        metrics[metric] = interval(values[keep], weights[keep], [x for x, k in zip(strata, keep) if k], options,
                                   traffic=weighted)
    return {"view": name, "stratum": stratum, "items": len(scored), "metrics": metrics}


def interval(values: np.ndarray, weights: np.ndarray, strata: list[str], options: Options, *, traffic: bool) -> dict[str, Any] | None:
    """A traffic figure (weights max(w, tau) / w) with the design's interval; a challenge figure with the bootstrap's."""
    if values.size == 0:
        return None
    if traffic:
        found = ratio(values, weights)
        estimate, (low, high) = found.estimate, found.interval(options.level)
    else:
        rng = np.random.default_rng(options.seed)
        boot = bootstrap_interval(values, rng, weights, resamples=options.resamples, level=options.level, strata=strata)
        estimate, low, high = boot.estimate, boot.low, boot.high
    return {"estimate": estimate, "low": low, "high": high, "n": int(values.size)}


def counts(key: Sequence[Mapping[str, Any]], items: Sequence[JudgedItem]) -> dict[str, Any]:
    with_chunks = [row for row in key if row.get("item") is not None]
    chunks = [c for item in items for c in item.chunks]
    return {
        "sampled": len(key),  # events in the batch, zero results included
        "without_chunks": len(key) - len(with_chunks),
        "items": len(with_chunks),
        "judged": len(items),
        "unjudged_items": len(with_chunks) - len(items),
        "chunks": len(chunks),  # of judged items
        "unjudged_chunks": sum(not c.grades for c in chunks),
        "double_judged": sum(any(len(c.grades) > 1 for c in item.chunks) for item in items),
    }


def slices(name: str, traffic: Sequence[Scored], options: Options) -> list[dict[str, Any]]:
    """Traffic precision per value of a slice label, the worst first."""
    by_value: dict[str, list[Scored]] = defaultdict(list)
    for s in traffic:
        by_value[age_band(s.item) if name == "content_age" else _value(s.item.key.get(name))].append(s)
    rows = []
    for value, members in by_value.items():
        weights = np.array([s.item.key["weight"] for s in members])
        values = np.array([s.values["precision"] for s in members])
        rows.append({"value": value, "items": len(members),
                     "precision": interval(values, weights, [s.item.key["stratum"] for s in members], options,
                                           traffic=True)})
    return sorted(rows, key=lambda row: (row["precision"]["estimate"], row["value"]))


def _value(value: Any) -> str:
    """A slice's value as text; only a pipeline version can be missing, and `none` names it as the gauges do."""
    return NO_VERSION if value is None else str(value)


def age_band(item: JudgedItem) -> str:
    """The band of the median known content age of the item's admitted chunks: the content it mostly
    served (the oldest chunk would put nearly every item with one old chunk in the oldest band)."""
    ages = [c.age_days for c in item.chunks if c.age_days is not None]
    if not ages:
        return UNKNOWN_AGE
    median = statistics.median(ages)
    return next(band for upper, band in AGE_BANDS if median < upper)


def citations(scored: Sequence[Scored], threshold: float) -> dict[str, Any]:
    """Judged relevance of cited and uncited chunks (admitted, judged, in the cutoff) of the items
    that report citations, every stratum, unweighted: the seed's four quadrants."""
    found: dict[str, Any] = {"items": 0, "cited": {"relevant": 0, "irrelevant": 0}, "uncited": {"relevant": 0, "irrelevant": 0}}
    for s in scored:
        if not reports_citations(s.item):
            continue
        found["items"] += 1
        for c in shown(s.item):
            relevant = s.qrels[c.chunk_id] >= threshold
            found["cited" if c.cited else "uncited"]["relevant" if relevant else "irrelevant"] += 1
    return found


def agreement(items: Sequence[JudgedItem], threshold: float) -> dict[str, Any]:
    """Weighted Cohen's kappa over every pair of judges on a chunk, and the chunks they disagree on."""
    first, second, disagreements = [], [], []
    for item in items:
        for c in item.chunks:
            for a, b in itertools.combinations(sorted(c.grades), 2):
                first.append(c.grades[a])
                second.append(c.grades[b])
                if c.grades[a] != c.grades[b]:
                    crosses = (c.grades[a] >= threshold) != (c.grades[b] >= threshold)
                    disagreements.append({"item": item.key["item"], "chunk": c.chunk, "grades": dict(sorted(c.grades.items())),
                                          "crosses_threshold": crosses})
    kappa = None
    if len(set(first) | set(second)) > 1:
        kappa = float(cohen_kappa_score(first, second, labels=[0, 1, 2, 3], weights=KAPPA_WEIGHTS))
    return {
        "weights": KAPPA_WEIGHTS,
        "pairs": len(first),
        "kappa": kappa,  # None without pairs, or when every grade is the same
        "exact": sum(a == b for a, b in zip(first, second)) / len(first) if first else None,
        "disagreements": disagreements,
    }


def tags(items: Sequence[JudgedItem]) -> dict[str, Any]:
    """Per tag, the chunks and items judges ticked it on; for stale and
    unauthorized, which the agent's own checks missed (the event's signals
    lack it); the other tags only judges can find."""
    found: dict[str, dict[str, Any]] = {tag: {"chunks": 0, "items": 0, "missed_by_agent": 0 if tag in CHECKED_TAGS else None} for tag in TAGS}
    missed = []
    for item in items:
        signals = set(item.key.get("signals") or ())
        for tag in TAGS:
            ticked = [c for c in item.chunks if tag in c.tags]
            found[tag]["chunks"] += len(ticked)
            found[tag]["items"] += bool(ticked)
            if ticked and tag in CHECKED_TAGS and CHECKED_TAGS[tag] not in signals:
                found[tag]["missed_by_agent"] += len(ticked)
                missed += [{"item": item.key["item"], "chunk": c.chunk, "event_id": item.key["event_id"], "tag": tag}
                           for c in ticked]
    return {"found": found, "missed": missed}


def reliability(items: Sequence[JudgedItem], options: Options) -> list[dict[str, Any]]:
    """Share of judged chunks relevant per score bin: the calibration reliability diagram.
    Bins are equal-width over [0, 1] when every score lies in it, else over the scores' range."""
    points = [(c.score, c.grade >= options.threshold) for item in items for c in item.chunks if c.grade is not None]
    if not points:
        return []
    scores = np.array([p[0] for p in points], dtype=float)
    relevant = np.array([p[1] for p in points], dtype=float)
    low, high = (0.0, 1.0) if scores.min() >= 0 and scores.max() <= 1 else (scores.min(), scores.max())
    edges = np.linspace(low, high, options.bins + 1) if high > low else np.array([low, low + 1.0])
    index = np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, edges.size - 2)
    return [
        {"low": float(edges[b]), "high": float(edges[b + 1]), "centre": float((edges[b] + edges[b + 1]) / 2),
         "chunks": int(np.sum(index == b)), "relevance": float(relevant[index == b].mean())}
        for b in range(edges.size - 1) if np.any(index == b)
    ]
