"""Score calibration: the probability that a chunk is relevant, given its score.

Judged chunks say how often a retriever's score means a relevant chunk.
Isotonic regression (scikit-learn, increasing, clipped at the ends) fits that
probability as a monotone function of the score, per app and pipeline version:
another retriever, embedding model or reranker puts scores on another scale.

The fit is kept as plain data, the thresholds (x, y) of scikit-learn's fitted
function, and evaluated without scikit-learn: a bisect and one linear
interpolation between neighbouring thresholds, the very operations
scikit-learn's `predict` performs (through scipy's interp1d, numpy's interp),
so the two agree to the bit. The agent evaluates it once per admitted chunk of live traffic.

How good the fit is, is measured out of sample: k-fold cross-validation
(folds fixed by the chunks' order by score, so the same labels give the same
figures) gives each chunk a probability from a fit that never saw it; the
expected calibration error (ECE) bins those probabilities into `ECE_BINS`
equal-width bins on [0, 1] and weighs each bin's |mean probability - share
relevant| by its share of the chunks; the Brier score is the mean squared
difference between probability and outcome.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from agent.core.judgments.judged import JudgedItem

FOLDS = 5
ECE_BINS = 10
THRESHOLD = 2  # grade >= 2 is relevant, as in the report


@dataclass(frozen=True, kw_only=True)
class ScoreFit:
    """A fitted calibration: plain data, JSON in and out, evaluated in O(log n)."""

    app: str
    pipeline_version: str | None
    x: tuple[float, ...]  # scores, increasing
    y: tuple[float, ...]  # the probability of relevance at each score, non-decreasing
    n: int  # judged chunks it was fitted on
    relevant: int  # of which relevant
    ece: float | None  # cross-validated; None with fewer chunks than folds
    brier: float | None
    threshold: float = THRESHOLD  # grade >= threshold is relevant
    folds: int = FOLDS
    batches: tuple[str, ...] = ()  # the batches whose labels it was fitted on
    fitted_at: float = 0.0  # epoch seconds

    def probability(self, score: float) -> float:
        """scikit-learn's `predict` of the fit, without scikit-learn."""
        return interpolate(self.x, self.y, score)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScoreFit:
        fields = dict(data)
        for name in ("x", "y", "batches"):
            fields[name] = tuple(fields[name])
        out = cls(**fields)
        if len(out.x) != len(out.y) or not out.x:
            raise ValueError("a calibration needs as many x as y thresholds, at least one")
        return out


def interpolate(x: Sequence[float], y: Sequence[float], score: float) -> float:
    """Linear interpolation between thresholds, clipped at the ends, in the
    same floating-point operations as numpy's interp (scikit-learn's predict
    comes down to it), so the two agree to the bit."""
    i = bisect_right(x, score)
    if i == 0:
        return y[0]
    if i == len(x):
        return y[-1]
    j = i - 1
    x_lo, y_lo = x[j], y[j]
    if x_lo == score:
        return y_lo
    return (y[i] - y_lo) / (x[i] - x_lo) * (score - x_lo) + y_lo


def isotonic(scores: Sequence[float], relevant: Sequence[float]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The thresholds of scikit-learn's increasing isotonic fit."""
    # Imported here: the agent only evaluates fits, and importing scikit-learn
    # would add a second or more to its start and to every command's.
    from sklearn.isotonic import IsotonicRegression

    model = IsotonicRegression(increasing=True, out_of_bounds="clip")
    model.fit(np.asarray(scores, dtype=float), np.asarray(relevant, dtype=float))
    return tuple(float(v) for v in model.X_thresholds_), tuple(float(v) for v in model.y_thresholds_)


def out_of_fold(scores: Sequence[float], relevant: Sequence[float], folds: int = FOLDS) -> np.ndarray:
    """Each chunk's probability from a fit on the other folds. Chunks ordered
    by (score, outcome) are dealt to folds in turn: every fold spans the score
    range, and the folds depend on the data only, never on a seed or the order given."""
    s = np.asarray(scores, dtype=float)
    r = np.asarray(relevant, dtype=float)
    order = np.lexsort((r, s))
    fold = np.empty(len(s), dtype=int)
    fold[order] = np.arange(len(s)) % folds
    out = np.empty(len(s))
    for k in range(folds):
        test = fold == k
        x, y = isotonic(s[~test], r[~test])
        out[test] = [interpolate(x, y, v) for v in s[test]]
    return out


def ece(probabilities: npt.ArrayLike, relevant: Sequence[float], bins: int = ECE_BINS) -> float:
    """Expected calibration error over equal-width bins of the probability
    ([0, 0.1), ..., [0.9, 1.0] with 10 bins), each weighed by its share of chunks."""
    p = np.asarray(probabilities, dtype=float)
    r = np.asarray(relevant, dtype=float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in np.unique(which):
        inside = which == b
        total += inside.sum() / len(p) * abs(p[inside].mean() - r[inside].mean())
    return float(total)


def brier(probabilities: npt.ArrayLike, relevant: Sequence[float]) -> float:
    p = np.asarray(probabilities, dtype=float)
    return float(np.mean((p - np.asarray(relevant, dtype=float)) ** 2))


def fit(app: str, pipeline_version: str | None, scores: Sequence[float], grades: Sequence[float], *,
        threshold: float = THRESHOLD, folds: int = FOLDS, batches: Iterable[str] = (),
        fitted_at: float = 0.0) -> ScoreFit:
    """The calibration of one app and pipeline version from its judged chunks' scores and grades."""
    if len(scores) != len(grades) or not scores:
        raise ValueError("need one grade per score, and at least one")
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    relevant = [1.0 if g >= threshold else 0.0 for g in grades]
    x, y = isotonic(scores, relevant)
    error = score = None
    if len(scores) >= folds:
        held_out = out_of_fold(scores, relevant, folds)
        error, score = ece(held_out, relevant), brier(held_out, relevant)
    return ScoreFit(app=app, pipeline_version=pipeline_version, x=x, y=y, n=len(scores), relevant=int(sum(relevant)), ece=error, brier=score,
                       threshold=threshold, folds=folds, batches=tuple(batches), fitted_at=fitted_at)


def samples(items: Iterable[JudgedItem]) -> dict[tuple[str, str | None], tuple[list[float], list[float]]]:
    """(scores, grades) of the graded chunks, per (app, pipeline version);
    a double-judged chunk counts once, with its mean grade."""
    out: dict[tuple[str, str | None], tuple[list[float], list[float]]] = {}
    for item in items:
        scores, grades = out.setdefault((item.key["app"], item.key.get("pipeline_version")), ([], []))
        for chunk in item.chunks:
            if chunk.grade is not None:
                scores.append(chunk.score)
                grades.append(chunk.grade)
    return out


def fit_all(items_by_batch: Mapping[str, Iterable[JudgedItem]], *, threshold: float = THRESHOLD,
            folds: int = FOLDS, fitted_at: float = 0.0) -> list[ScoreFit]:
    """One calibration per (app, pipeline version) over the judged items of the given batches."""
    pooled: dict[tuple[str, str | None], tuple[list[float], list[float]]] = {}
    used: dict[tuple[str, str | None], set[str]] = {}
    for batch_id, items in sorted(items_by_batch.items()):
        for pair, (scores, grades) in samples(items).items():
            if scores:
                into = pooled.setdefault(pair, ([], []))
                into[0].extend(scores)
                into[1].extend(grades)
                used.setdefault(pair, set()).add(batch_id)
    return [fit(app, version, scores, grades, threshold=threshold, folds=folds, batches=sorted(used[(app, version)]),
                fitted_at=fitted_at)
            for (app, version), (scores, grades) in sorted(pooled.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))]
