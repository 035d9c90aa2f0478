"""A frozen, versioned baseline, and the evaluation of a window against it.

`freeze` sums the stored daily counts of a range of days into, per app: for
each numeric feature the quantile `Bins` of its fine counts, the summed coarse
counts and a `Threshold` per statistic; for each mix the `Categories` (the
most frequent, the rest in `other`), the summed counts and thresholds
(thresholds.py: leave-one-day-out over the same days). The baseline's version
is a hash of its content (the name excluded), so the same days and settings
give the same version and byte-identical JSON (`to_json`: sorted keys).

`evaluate` rebins a window's fine counts on the baseline's bins (folds its
mixes on the baseline's categories) and reports one `Finding` per app,
feature and statistic. Skipped, by design: apps and features the baseline
lacks (no reference to compare with), features the window has no events for,
windows smaller than the threshold's smallest size (too few events), and
numeric features the window counted on another grid than the baseline's bins
(`grid_mismatches`: their cells mean other values). A day's recorded grids
(`Counts.grids`) are also checked by `freeze` against the configured grids.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import date
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from agent.core.drift.bins import Bins, Categories
from agent.core.drift.features import MIXED_GRID, QUERY_CLUSTER, Grids
from agent.core.drift.queries import QueryModel, Sample, fit
from agent.core.drift.stats import MIX_STATS, NUMERIC_STATS, statistic
from agent.core.drift.thresholds import Threshold, ThresholdSettings, alarm, derive_thresholds, expected_rate

BASELINE_FORMAT = 1


@dataclass(frozen=True)
class Counts:
    """Binned data of one app over one day or window, as the agent stores it."""

    numeric: Mapping[str, Sequence[int] | Mapping[int, int]] = field(default_factory=dict)  # fine counts
    mixes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # mix -> category -> count
    queries: Sample = field(default_factory=dict)  # the day's bottom-k sample of hashed query terms (queries.py)
    _: KW_ONLY
    grids: Mapping[str, str] = field(default_factory=dict)  # numeric feature -> Grid.digest it was counted on

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the store: fine counts sparse, as {"cell": count} without zeros."""
        numeric = {}
        for feature, counts in self.numeric.items():
            items = counts.items() if isinstance(counts, Mapping) else enumerate(counts)
            numeric[feature] = {str(int(i)): int(n) for i, n in items if n}
        out: dict[str, Any] = {"numeric": numeric, "mixes": {m: {k: int(n) for k, n in c.items()} for m, c in self.mixes.items()}}
        if self.queries:
            out["queries"] = {k: list(t) for k, t in self.queries.items()}
        if self.grids:
            out["grids"] = dict(self.grids)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Counts:
        return cls({f: {int(i): int(n) for i, n in c.items()} for f, c in data.get("numeric", {}).items()},
                   {m: {k: int(n) for k, n in c.items()} for m, c in data.get("mixes", {}).items()},
                   {k: tuple(t) for k, t in data.get("queries", {}).items()},
                   grids={f: str(g) for f, g in data.get("grids", {}).items()})  # fmt: skip


DayData = Mapping[str, Counts]  # app -> its counts for one day (or one window)


_B = TypeVar("_B", Bins, Categories)


@dataclass(frozen=True)
class FeatureReference(Generic[_B]):
    """One feature's (or mix's) frozen distribution: bins or categories, counts, thresholds by statistic."""

    bins: _B
    counts: tuple[int, ...]
    thresholds: Mapping[str, Threshold]

    def to_dict(self) -> dict[str, Any]:
        return {"bins": self.bins.to_dict(), "counts": list(self.counts),
                "thresholds": {s: t.to_dict() for s, t in self.thresholds.items()}}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], mix: bool) -> FeatureReference[Any]:
        bins: Any = Categories.from_dict(data["bins"]) if mix else Bins.from_dict(data["bins"])
        return cls(bins, tuple(int(c) for c in data["counts"]),
                   {s: Threshold.from_dict(t) for s, t in data["thresholds"].items()})  # fmt: skip


@dataclass(frozen=True)
class AppBaseline:
    numeric: Mapping[str, FeatureReference[Bins]]
    mixes: Mapping[str, FeatureReference[Categories]]


@dataclass(frozen=True, kw_only=True)
class Baseline:
    name: str
    version: str  # content hash: 16 hex digits of a SHA-256
    days: tuple[str, ...]  # ISO dates it was frozen from, sorted
    n_bins: int
    max_categories: int
    calibration: ThresholdSettings
    apps: Mapping[str, AppBaseline]
    queries: QueryModel | None = None  # the vocabulary and query clusters, when the days sampled terms

    def content(self) -> dict[str, Any]:
        """Everything the version hashes: all but the name and the version."""
        queries = {} if self.queries is None else {"queries": self.queries.to_dict()}
        return {**queries,
            "format": BASELINE_FORMAT, "days": list(self.days), "n_bins": self.n_bins,
            "max_categories": self.max_categories, "calibration": self.calibration.to_dict(),
            "apps": {app: {"numeric": {f: r.to_dict() for f, r in a.numeric.items()},
                           "mixes": {m: r.to_dict() for m, r in a.mixes.items()}}
                     for app, a in self.apps.items()},
        }  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, **self.content()}

    def to_json(self) -> bytes:
        """Canonical JSON: sorted keys, no spaces; the same content gives the same bytes."""
        return _canonical(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Baseline:
        if data.get("format") != BASELINE_FORMAT:
            raise ValueError(f"baseline format {data.get('format')!r}, this version reads {BASELINE_FORMAT}")
        apps = {
            app: AppBaseline({f: FeatureReference.from_dict(r, mix=False) for f, r in a["numeric"].items()},
                             {m: FeatureReference.from_dict(r, mix=True) for m, r in a["mixes"].items()})
            for app, a in data["apps"].items()
        }  # fmt: skip
        queries = None if data.get("queries") is None else QueryModel.from_dict(data["queries"])
        out = cls(name=str(data["name"]), version=str(data["version"]), days=tuple(data["days"]), n_bins=int(data["n_bins"]),
                  max_categories=int(data["max_categories"]), calibration=ThresholdSettings.from_dict(data["calibration"]),
                  apps=apps, queries=queries)
        if out.version != content_version(out.content()):
            raise ValueError(f"baseline {out.name!r}: content does not match version {out.version}")
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    app: str
    feature: str  # a numeric feature or a mix
    stat: str  # psi, js, ks, wasserstein (numeric); psi, chi2_p (mixes)
    value: float
    threshold: float
    alarm: bool  # value beyond threshold, in the statistic's bad direction
    n: int  # the window's events (values, for a feature counted per result)
    calibrated: bool  # False: a default threshold (too few baseline days)
    counts: tuple[int, ...] = ()  # the window's counts in the baseline's bins (categories): what `value` is of
    rate: float | None = None  # expected false-alarm rate at `threshold` (thresholds.expected_rate); None: unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class GridMismatch:
    """A numeric feature of a window counted on another grid than the baseline's bins: never compared."""

    app: str
    feature: str
    counted: str  # the window's grid digest, or MIXED_GRID
    expected: str  # the digest of the grid it should have been counted on
    against: str = "the baseline's grid"  # whose grid `expected` is

    def __str__(self) -> str:
        counted = "two grids" if self.counted == MIXED_GRID else f"grid {self.counted}"
        return f"app {self.app!r}, {self.feature}: counted on {counted}, {self.against} is {self.expected}"


def content_version(content: Mapping[str, Any]) -> str:
    """A baseline's version: the digest of its canonical content (not its name), so equal content, equal version."""
    return hashlib.sha256(_canonical(content)).hexdigest()[:16]


def freeze(
    days: Mapping[str, DayData],
    name: str = "baseline",
    grids: Grids = Grids(),
    n_bins: int = 10,
    max_categories: int = 20,
    calibration: ThresholdSettings = ThresholdSettings(),
    clusters: int = 8,
) -> Baseline:
    """A baseline from daily counts keyed by ISO date; ValueError when there is nothing to freeze.

    Days with query samples also give the baseline its `QueryModel` (`clusters`
    centres) and each day its `query_cluster` counts (queries.py)."""
    for day in days:
        try:
            date.fromisoformat(day)
        except (TypeError, ValueError):
            raise ValueError(f"baseline days are keyed by ISO date (YYYY-MM-DD), got {day!r}") from None
    order = sorted(days)
    days, queries = _with_clusters(days, order, clusters, calibration.seed)
    apps = {}
    for app in sorted({app for day in days.values() for app in day}):
        per_day = [days[d].get(app, Counts()) for d in order]
        numeric = {}
        for feature in sorted({f for c in per_day for f in c.numeric}):
            grid = grids.grid(app, feature)
            for day, c in zip(order, per_day):
                counted = c.grids.get(feature, grid.digest)  # a day stored before grids were recorded: unknown
                if counted != grid.digest:
                    found = GridMismatch(app=app, feature=feature, counted=counted, expected=grid.digest, against="the configured grid")
                    raise ValueError(f"day {day}: {found}; freeze from days counted on the configured grid")
            fine = _integral([grid.dense(c.numeric.get(feature, {})) for c in per_day], app, feature)
            if fine.sum() > 0:
                bins = Bins.from_quantiles(grid, fine.sum(axis=0), n_bins)
                coarse = np.array([bins.rebin(row) for row in fine])
                numeric[feature] = _reference(bins, coarse, NUMERIC_STATS, calibration, app, feature, bins.centres)
        mixes = {}
        for mix in sorted({m for c in per_day for m in c.mixes}):
            total: dict[str, int] = {}
            for c in per_day:
                for k, n in c.mixes.get(mix, {}).items():
                    total[k] = total.get(k, 0) + n
            if sum(total.values()) > 0:
                cats = Categories.from_counts(total, max_categories)
                folded = _integral([cats.fold(c.mixes.get(mix, {})) for c in per_day], app, mix)
                mixes[mix] = _reference(cats, folded, MIX_STATS, calibration, app, mix, None)
        if set(numeric) & set(mixes):
            raise ValueError(f"app {app!r}: {sorted(set(numeric) & set(mixes))} named both a feature and a mix")
        if numeric or mixes:
            apps[app] = AppBaseline(numeric, mixes)
    if not apps:
        raise ValueError(f"no data to freeze baseline {name!r} from: {len(days)} days, no counts in any")
    content = Baseline(name=name, version="", days=tuple(order), n_bins=n_bins, max_categories=max_categories, calibration=calibration, apps=apps,
                       queries=queries).content()
    return Baseline(name=name, version=content_version(content), days=tuple(order), n_bins=n_bins, max_categories=max_categories,
                    calibration=calibration, apps=apps, queries=queries)


def _with_clusters(
    days: Mapping[str, DayData], order: list[str], clusters: int, seed: int
) -> tuple[Mapping[str, DayData], QueryModel | None]:
    """The days with their `query_cluster` counts from their samples, and the model; days as given without samples."""
    names = [sorted(days[d]) for d in order]
    fitted = fit([[days[d][app].queries for app in apps] for d, apps in zip(order, names)], clusters, seed)
    if fitted is None:
        return days, None
    model, counts = fitted
    out = {}
    for d, apps, found in zip(order, names, counts):
        out[d] = {app: Counts(days[d][app].numeric, {**days[d][app].mixes, QUERY_CLUSTER: cats}, days[d][app].queries,
                              grids=days[d][app].grids)
                  for app, cats in zip(apps, found)}  # fmt: skip
    return out, model


def grid_mismatches(baseline: Baseline, window: DayData) -> list[GridMismatch]:
    """The window's numeric features counted on another grid than the baseline's bins (a window without
    recorded grids, from before they were recorded, has none), sorted by app and feature."""
    out = []
    for app in sorted(set(baseline.apps) & set(window)):
        recorded = window[app].grids
        for feature, r in sorted(baseline.apps[app].numeric.items()):
            expected = r.bins.grid.digest
            if feature in window[app].numeric and recorded.get(feature, expected) != expected:
                out.append(GridMismatch(app=app, feature=feature, counted=recorded[feature], expected=expected))
    return out


def evaluate(baseline: Baseline, window: DayData) -> list[Finding]:
    """Findings of one window (app -> fine counts and mix counts), sorted by app, feature, statistic;
    features counted on another grid than the baseline's (`grid_mismatches`) are left out."""
    out = []
    skip = {(m.app, m.feature) for m in grid_mismatches(baseline, window)}
    for app in sorted(set(baseline.apps) & set(window)):
        ref, counts = baseline.apps[app], window[app]
        if baseline.queries is not None and counts.queries and QUERY_CLUSTER not in counts.mixes:
            # a stored day: its sample's clusters (a sub-day window counts every query as it comes)
            cats = baseline.queries.categories(counts.queries[k] for k in sorted(counts.queries))
            counts = Counts(counts.numeric, {**counts.mixes, QUERY_CLUSTER: cats})
        pairs: list[tuple[str, FeatureReference[Any], np.ndarray]] = [(f, r, r.bins.rebin(counts.numeric[f])) for f, r in ref.numeric.items()
                 if f in counts.numeric and (app, f) not in skip]
        pairs += [(m, r, np.array(r.bins.fold(counts.mixes[m]))) for m, r in ref.mixes.items() if m in counts.mixes]
        for feature, r, coarse in sorted(pairs, key=lambda p: p[0]):
            n = int(coarse.sum())
            if n <= 0:
                continue
            centres = getattr(r.bins, "centres", None)
            held = tuple(int(c) for c in coarse)
            for stat, threshold in sorted(r.thresholds.items()):
                limit = threshold.at(n)
                if limit is None:
                    continue
                value = float(statistic(stat, r.counts, coarse, centres))
                fired = alarm(stat, value, limit)
                rate = expected_rate(threshold, baseline.calibration)
                out.append(Finding(app=app, feature=feature, stat=stat, value=value, threshold=limit, alarm=fired, n=n,
                                   calibrated=threshold.calibrated, counts=held, rate=rate))
    return out


def _reference(bins: _B, rows: np.ndarray, stats: Sequence[str], calibration: ThresholdSettings, app: str, name: str,
               centres: Sequence[float] | None) -> FeatureReference[_B]:
    key = (zlib.crc32(f"{app}\x00{name}".encode()),)
    thresholds = derive_thresholds(rows, stats, centres, calibration, key)
    return FeatureReference(bins, tuple(int(c) for c in rows.sum(axis=0)), thresholds)


def _integral(rows: npt.ArrayLike, app: str, name: str) -> np.ndarray:
    """Day rows as int64, refusing what is not a count (thinning draws events, so counts are whole)."""
    raw = np.array(rows, dtype=float)
    if not (np.isfinite(raw).all() and (raw >= 0).all() and (raw == np.floor(raw)).all()):
        raise ValueError(f"app {app!r}, {name!r}: daily counts must be whole numbers >= 0")
    return raw.astype(np.int64)


def _canonical(data: object) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()
