"""Risk signals of one event and its risk weight w = 1 + sum of fired weights.

The sampler gives a risky event a proportionally better chance to be judged;
the estimator divides by the same w, so weights steer effort, never bias.
Every signal reads the event's facts (agent/core/facts.py) and nothing else,
except two things the facts cannot know: how many of the query's terms were
new to the vocabulary (the vocabulary lives in the partition state) and an
optional baseline `RiskReference`.

Signals, in the fixed order `SIGNALS` (the order of `Risk.signals`):

- zero_result: no results.
- low_top1: the top-1 score is below the app's threshold (`RiskReference.top1_low`
  for the app, else `RiskConfig.top1_low`; None = no absolute threshold).
- small_gap: top-1 minus top-2 score is below the app's threshold
  (`RiskReference.gap_small`, else `RiskConfig.gap_small`); a negative gap fires.
- rerank_disagreement: the reranker moved some result by >= `rerank_shift`
  ranks. Read from `facts.rank_shifts`, i.e. over every result that reports a
  `pre_rerank_rank`, admitted or not (the same shifts as the rank-shift
  histogram): a result pulled from far below into the context, or pushed out
  of it, is a disagreement either way.
- new_terms: at least `new_terms_min` of the query's terms were new.
- rephrased, correction, thumbs_down: from `event.feedback`.
- stale: a stale result in the admitted set.
- unauthorized: an unauthorized result, or results served while identity
  claims were missing (`unauthorized_risk`).
- filter_zero: filters removed every candidate.
- rare_slice: the query type (missing: "unknown") has a share below
  `rare_share` in `RiskReference.query_type_share`; a type absent from that mix has
  share 0 and fires. Without a reference, or with an empty mix, it never
  fires: rarity needs a reference mix to be measured against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from agent.core.drift.bins import OTHER, Bins
from agent.core.drift.features import QUERY_TYPE, SCORE_GAP, TOP1_SCORE
from agent.core.facts import Facts

if TYPE_CHECKING:
    from agent.core.drift.baseline import Baseline

ZERO_RESULT = "zero_result"
LOW_TOP1 = "low_top1"
SMALL_GAP = "small_gap"
RERANK_DISAGREEMENT = "rerank_disagreement"
NEW_TERMS = "new_terms"
REPHRASED = "rephrased"
CORRECTION = "correction"
THUMBS_DOWN = "thumbs_down"
STALE = "stale"
UNAUTHORIZED = "unauthorized"
FILTER_ZERO = "filter_zero"
RARE_SLICE = "rare_slice"
SIGNALS = (
    ZERO_RESULT, LOW_TOP1, SMALL_GAP, RERANK_DISAGREEMENT, NEW_TERMS, REPHRASED,
    CORRECTION, THUMBS_DOWN, STALE, UNAUTHORIZED, FILTER_ZERO, RARE_SLICE,
)  # fmt: skip

UNKNOWN = "unknown"  # query type when the event has none (as in the query mix)

# Explicit user dissatisfaction and harm weigh most; weak score hints least.
# A filter-caused zero also fires zero_result, so it weighs 2 + 1 = 3 in all.
DEFAULT_WEIGHTS: dict[str, float] = {
    ZERO_RESULT: 2.0,
    LOW_TOP1: 1.0,
    SMALL_GAP: 0.5,
    RERANK_DISAGREEMENT: 0.5,
    NEW_TERMS: 1.0,
    REPHRASED: 1.0,
    CORRECTION: 2.0,
    THUMBS_DOWN: 3.0,
    STALE: 2.0,
    UNAUTHORIZED: 4.0,
    FILTER_ZERO: 1.0,
    RARE_SLICE: 1.0,
}


@dataclass(frozen=True, kw_only=True)
class RiskConfig:
    """Signal weights and thresholds; `weights` overrides `DEFAULT_WEIGHTS` per signal.

    A signal with weight 0 is still reported in `Risk.signals` but leaves w alone.
    The absolute score thresholds suit similarity scores in [0, 1]; retrievers
    scoring on other scales (BM25, logits) want a per-app `RiskReference`.
    """

    weights: dict[str, float] = field(default_factory=dict)
    top1_low: float | None = 0.3  # low_top1 below this top-1 score
    gap_small: float | None = 0.02  # small_gap below this top-1 minus top-2 gap
    rerank_shift: int = 3  # rerank_disagreement at a rank shift this large
    new_terms_min: int = 1  # new_terms at this many new query terms
    rare_share: float = 0.05  # rare_slice below this share of the reference mix
    if TYPE_CHECKING:  # set by __post_init__
        _weights: dict[str, float] = field(init=False)
        max_weight: float = field(init=False)

    def __post_init__(self) -> None:
        unknown = set(self.weights) - set(SIGNALS)
        if unknown:
            raise ValueError(f"unknown risk signals: {sorted(unknown)}")
        merged = {**DEFAULT_WEIGHTS, **self.weights}
        for name, weight in merged.items():
            if not (isinstance(weight, (int, float)) and math.isfinite(weight) and weight >= 0):
                raise ValueError(f"risk weight {name}: {weight!r} is not a finite number >= 0")
        if self.rerank_shift < 1 or self.new_terms_min < 1:
            raise ValueError("rerank_shift and new_terms_min must be >= 1")
        if not 0 <= self.rare_share <= 1:
            raise ValueError("rare_share must be in [0, 1]")
        object.__setattr__(self, "_weights", {name: float(merged[name]) for name in SIGNALS})
        object.__setattr__(self, "max_weight", 1.0 + sum(self._weights.values()))  # every signal at once

    def weight(self, signal: str) -> float:
        return self._weights[signal]


@dataclass(frozen=True)
class RiskReference:
    """Per-app thresholds and a query-type mix from a baseline.

    Present entries override `RiskConfig`'s absolute thresholds for that app;
    suggested values are the baseline's 10th percentiles of top-1 score and of
    the gap. `query_type_share` maps query type to its share of baseline events.
    """

    top1_low: dict[str, float] = field(default_factory=dict)  # app -> threshold
    gap_small: dict[str, float] = field(default_factory=dict)  # app -> threshold
    query_type_share: dict[str, float] = field(default_factory=dict)  # query type -> share

    def to_dict(self) -> dict[str, Any]:
        return {"top1_low": dict(self.top1_low), "gap_small": dict(self.gap_small),
                "query_type_share": dict(self.query_type_share)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RiskReference:
        return cls(dict(data.get("top1_low", {})), dict(data.get("gap_small", {})),
                   dict(data.get("query_type_share", {})))


LOW_QUANTILE = 0.1  # a baseline's low top-1 and small gap: its 10th percentiles


def reference_from(baseline: Baseline) -> RiskReference:
    """What a frozen baseline says of risk: per app (its bounded app label, every pipeline version
    summed, as a baseline holds it) the upper edge of the coarse bin that holds its 10th percentile
    of top-1 score and of the top-1/top-2 gap, and each query type's share of its events over every
    app. With the default 10 coarse bins, cut at the baseline's own deciles, an edge is the 10th
    percentile to within one fine cell. A percentile in the last bin, which has no upper edge,
    leaves that app the configured threshold; a type folded into `other` has no share (0)."""
    top1_low: dict[str, float] = {}
    gap_small: dict[str, float] = {}
    types: dict[str, int] = {}
    events = 0
    for app, reference in sorted(baseline.apps.items()):
        for feature, thresholds in ((TOP1_SCORE, top1_low), (SCORE_GAP, gap_small)):
            found = reference.numeric.get(feature)
            edge = None if found is None else _low_edge(found.bins, found.counts)
            if edge is not None:
                thresholds[app] = edge
        mix = reference.mixes.get(QUERY_TYPE)
        if mix is not None:
            for label, n in zip(mix.bins.labels, mix.counts, strict=True):
                events += n
                if label != OTHER:
                    types[label] = types.get(label, 0) + n
    shares = {t: n / events for t, n in sorted(types.items())} if events else {}
    return RiskReference(top1_low, gap_small, shares)


def _low_edge(bins: Bins, counts: tuple[int, ...]) -> float | None:
    """The upper edge of the coarse bin holding the `LOW_QUANTILE` of the counts; None without one."""
    total = sum(counts)
    if total <= 0:
        return None
    cumulative = 0
    for edge, n in zip(bins.edges, counts):  # the last bin, which ends at +inf, has no edge
        cumulative += n
        if cumulative >= LOW_QUANTILE * total:
            return edge
    return None


class Risk(msgspec.Struct, frozen=True, gc=False):
    """Built for nearly every event: a struct, which is cheaper to make than a frozen dataclass."""

    signals: tuple[str, ...]  # the signals that fired, in `SIGNALS` order
    weight: float  # 1 + sum of their weights, so always >= 1


def assess(facts: Facts, new_terms: int, config: RiskConfig, reference: RiskReference | None = None,
           app: str | None = None) -> Risk:
    """The signals one event fires and its risk weight; `app` is the key of the reference's
    thresholds (`reference_from`; the event's own app by default)."""
    event = facts.event
    top1_low, gap_small = config.top1_low, config.gap_small
    if reference is not None:
        app = event.app if app is None else app
        top1_low = reference.top1_low.get(app, top1_low)
        gap_small = reference.gap_small.get(app, gap_small)
    fired = []
    if facts.zero:
        fired.append(ZERO_RESULT)
    x = facts.top1
    if top1_low is not None and x is not None and x < top1_low:
        fired.append(LOW_TOP1)
    x = facts.gap
    if gap_small is not None and x is not None and x < gap_small:
        fired.append(SMALL_GAP)
    shifts = facts.rank_shifts
    if shifts and max(shifts) >= config.rerank_shift:
        fired.append(RERANK_DISAGREEMENT)
    if new_terms >= config.new_terms_min:
        fired.append(NEW_TERMS)
    feedback = event.feedback
    if feedback is not None:
        if feedback.rephrased:
            fired.append(REPHRASED)
        if feedback.correction:
            fired.append(CORRECTION)
        if feedback.thumbs == -1:
            fired.append(THUMBS_DOWN)
    if facts.stale > 0:
        fired.append(STALE)
    if facts.unauthorized or facts.unauthorized_risk:
        fired.append(UNAUTHORIZED)
    if facts.filter_zero:
        fired.append(FILTER_ZERO)
    if reference is not None and reference.query_type_share:
        share = reference.query_type_share.get(event.query.type or UNKNOWN, 0.0)
        if share < config.rare_share:
            fired.append(RARE_SLICE)
    weight = 1.0
    if fired:
        weights = config._weights
        for signal in fired:
            weight += weights[signal]
    return Risk(tuple(fired), weight)
