"""The live release gate: two pipeline versions compared over the stored rows of a window, and a verdict.

Plain data in (the day rows and query rows agent/core/compare/live.py counts,
the judged items' figures), a JSON-able report out, shaped as the offline
gate's (agent/core/compare/verdict.py) so the same renderer prints both. The
agent's periodic evaluation and `ragdrift compare --live` call `live_compare`
alike.

Hard gates first, over the exact day rows: any unauthorized result in the
candidate (`max_unauthorized`), any stale conflict in it
(`max_stale_conflicts`), and a rise of its filter-caused zero results over
the stable version's, one-sided p below `filter_zero_alpha` (`filter_zero_p`:
both rates are estimates, so the test is conditional on the total seen; the
excess counted is the candidate's filter-caused zeros beyond what the stable
rate predicts for its events). The rise is not measured while either version
has no events. Each lists example event ids.

Then each metric (`METRICS`) per query: a query's value is its mean over its
events in the window (zero_result_rate: the share of its events with no
result); the figure is the mean over queries. Queries both versions served
(the same app and `query.id`, as a shadow pipeline logs them) are compared in
pairs, the paired bootstrap of the per-query differences; with fewer than
`min_queries` such pairs, or pairs fewer than `min_paired_share` of either
version's queries (canary traffic splits queries between versions, and a few
shared ones stand for a corner of it), the two versions' queries are compared
unpaired, a two-sample bootstrap of the difference of means. The store hands
over at most `max_queries` queries per version, those with the lowest hashes
of the query id, each version cut on its own (agent/io/store/live_gate.py):
below the lower of the two cuts both versions hold every query, so the pairs
and their share are those under that cut. Judged metrics (precision at
the cutoff, nDCG, MRR of the judged items of each version) likewise; they
gate only once each version has `min_queries` judged queries.

Material: from the stable version's own day-to-day variation, as the drift
thresholds are derived (agent/core/drift/thresholds.py). A day's mean is over its
queries (a query's value that day is its mean over that day's events), as the
figure is, from the query rows; the day still counting (`partial_from`,
today) is left out. For each day d, |mean of day d - mean of the other days|
is one draw of how far one more undrifted day strays; the material threshold
is `material_factor` times the `false_alarm_rate` upper quantile of those
values (Weibull position, its log-normal tail beyond the extreme when the
days are few), at least `min_margin` (a flat stable version would give 0).
Needs `min_days` days of the stable version with the metric; fewer: the
metric is not judged (not enough data). Slices take their own days' means.
Day-to-day variation includes the sampling noise of a day, so this is
conservative for a window of several days.

A figure fails when its whole interval lies beyond the material threshold in
the worse direction, passes when none of it does, else is inconclusive
(agent/core/compare/paired.py). Verdict: `fail` on a failed hard gate, a
failed gated metric or a failed slice (slices listed worst first); else `not
enough data` when a version has no events, too few queries or days, or a
gated metric is inconclusive; else `pass`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import numpy as np
from scipy.stats import binomtest

from agent.core.compare.live import DayKey, QueryKey, add_row
from agent.core.compare.paired import (
    FAIL,
    INCONCLUSIVE,
    NOT_MEASURED,
    PASS,
    TOO_FEW,
    Paired,
    PairedSettings,
    paired_interval,
    two_sample_interval,
)
from agent.core.compare.verdict import FAILED, NOT_ENOUGH, PASSED, Report, Row, judge
from agent.core.drift.thresholds import quantile
from agent.core.judgments.judged import JudgedItem
from agent.core.judgments.metrics import SEED, Policy, per_query
from agent.core.labels import OTHER
from agent.core.pipelines import NO_VERSION

SERVED = ("top1_score", "zero_result_rate", "content_age_days", "source_concentration", "latency_seconds")
JUDGED = ("precision_at_k", "ndcg", "mrr")
METRICS = SERVED + JUDGED
LOWER_IS_BETTER = frozenset({"zero_result_rate", "content_age_days", "source_concentration", "latency_seconds"})
DIMENSIONS = ("app", "query_type", "language")
TOO_FEW_DAYS = "too few days"
SAMPLE = 5
_OF_JUDGED = {"precision_at_k": "precision", "ndcg": "nDCG", "mrr": "reciprocalRank"}
_SEVERITY = {FAIL: 0, INCONCLUSIVE: 1, TOO_FEW: 2, TOO_FEW_DAYS: 2, NOT_MEASURED: 3, PASS: 4}


@dataclass(frozen=True, kw_only=True)
class LiveThresholds:
    min_queries: int = 30  # fewer compared queries (per version, unpaired): not enough data
    min_slice_queries: int = 10  # a smaller slice is listed, not gated
    min_days: int = 3  # days of the stable version needed to measure its variation
    material_factor: float = 1.0  # material = factor x the day-to-day quantile
    false_alarm_rate: float = 1 / 30  # the quantile's tail: one more stable day strays beyond it this often
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    max_unauthorized: int = 0  # candidate events with an unauthorized result
    max_stale_conflicts: int = 0  # candidate events with a stale conflict
    filter_zero_alpha: float = 0.01  # one-sided p below which a rise of filter-caused zeros fails
    min_margin: float = 0.01  # the material threshold's floor, so a flat stable version does not give 0
    min_paired_share: float = 0.5  # shared queries below this share of either version's: unpaired
    max_queries: int = 2000  # queries compared per version, the lowest hashes of the query id (the store cuts)
    slice_metrics: tuple[str, ...] = ("top1_score", "zero_result_rate")
    slice_dimensions: tuple[str, ...] = DIMENSIONS

    def as_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}


@dataclass(frozen=True, kw_only=True)
class JudgedQuery:
    """One judged item's figures: which version served which query, on which day."""

    version: str
    app: str
    query: str
    day: str
    values: Mapping[str, float]  # JUDGED metric -> value


@dataclass(frozen=True)
class Stored:
    days: Mapping[DayKey, Mapping[str, Any]]  # (day, app, version) -> day row
    queries: Mapping[QueryKey, Mapping[str, Any]]  # (day, app, version, query) -> query row
    judged: Sequence[JudgedQuery] = ()


def judged_queries(items: Iterable[JudgedItem], policy: Policy = SEED) -> list[JudgedQuery]:
    """The figures of judged items at each one's cutoff (agent/core/judgments/metrics.py), with the
    version that served it (`none` without one, as the live rows count them)."""
    out = []
    for item in items:
        key = item.key
        version = key.get("pipeline_version") or NO_VERSION
        grades = {c.chunk_id: c.grade for c in item.chunks if c.grade is not None}
        found = per_query(grades, [c.chunk_id for c in item.chunks], int(key["cutoff_k"]), policy)
        day = datetime.fromtimestamp(float(key["ts"]), UTC).date().isoformat()
        out.append(JudgedQuery(version=str(version), app=str(key["app"]), query=str(key["query_id"]), day=day,
                               values={name: found[source] for name, source in _OF_JUDGED.items()}))
    return out


def versions_by_traffic(days: Mapping[DayKey, Mapping[str, Any]]) -> list[tuple[str, int]]:
    """(version, events) in the rows, most events first (ties by name)."""
    totals: dict[str, int] = defaultdict(int)
    for (_, _, version), row in days.items():
        totals[version] += int(row["events"])
    return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))


class Pair(NamedTuple):
    """The compared versions and why these (the report's `versions.pair`)."""

    stable: str
    candidate: str
    why: Mapping[str, Any]


SERVING_RULE = ("candidate: the newest of the versions serving (first day with events, then fewer events); "
                "stable: of the others, the one with most events that day")


def pair_of(days: Mapping[DayKey, Mapping[str, Any]],
            history: Mapping[DayKey, Mapping[str, Any]] | None = None) -> Pair | None:
    """The pair for an app without configured versions, among the versions serving now: those with
    events on the newest day of `days` with any (`other` never, it is many versions; `none` only beside
    a single named one). The newest of them is the candidate: its first day with events (looked up in
    `history`, the day rows kept, a longer span than the window; default `days`), then fewer events
    in `days`, then the name; stable is the one of the others with most events that day (then the
    name). So versions that stopped serving are never paired, however many events
    they have in the window, and a canary ramped past half the traffic stays the candidate. None with
    fewer than two serving."""
    today = max((day for (day, _, v), row in days.items() if v != OTHER and int(row["events"])), default=None)
    if today is None:
        return None
    now = versions_by_traffic({k: row for k, row in days.items() if k[0] == today})
    serving = [v for v, n in now if n and v not in (OTHER, NO_VERSION)]
    if len(serving) == 1 and any(v == NO_VERSION and n for v, n in now):
        serving.append(NO_VERSION)
    if len(serving) < 2:
        return None
    totals = dict(versions_by_traffic(days))
    seen = _first_days(history) if history else {}
    served = _first_days(days)
    first = {v: min(served[v], seen.get(v, served[v])) for v in serving}
    candidate = max(serving, key=lambda v: (first[v], -totals[v], v))
    stable = next(v for v in serving if v != candidate)  # `now` is ordered by that day's events
    return Pair(stable, candidate, {"chosen": "serving", "day": today, "serving": sorted(serving),
                                    "reason": SERVING_RULE})


def _first_days(days: Mapping[DayKey, Mapping[str, Any]]) -> dict[str, str]:
    """Each version's first day with events in the rows."""
    first: dict[str, str] = {}
    for (day, _, version), row in days.items():
        if int(row["events"]) and (version not in first or day < first[version]):
            first[version] = day
    return first


def live_compare(stored: Stored, stable: str, candidate: str, gate: LiveThresholds = LiveThresholds(),
                 window: Mapping[str, Any] | None = None, partial_from: str | None = None,
                 why: Mapping[str, Any] | None = None) -> Report:
    """The live gate's report of `candidate` against `stable` over the stored rows given; days from
    `partial_from` on (ISO, today's as it is still counting) are left out of the material threshold.
    `why` says how the pair was chosen (`Pair.why`, or who named it), as the report's `versions.pair`."""
    settings = PairedSettings(resamples=gate.resamples, level=gate.level, seed=gate.seed)
    events = {v: sum(int(r["events"]) for (_, _, ver), r in stored.days.items() if ver == v) for v in (stable, candidate)}
    a, b = _queries(stored.queries, stable), _queries(stored.queries, candidate)
    both = sorted(set(a) & set(b))
    is_paired = _paired(len(both), len(a), len(b), gate)
    report: Report = {
        "thresholds": {"mode": "live", **gate.as_dict()},
        "versions": {"a": {"pipeline": stable, "events": events[stable], **(window or {})},
                     "b": {"pipeline": candidate, "events": events[candidate], **(window or {})},
                     **({"pair": dict(why)} if why else {})},
        "queries": {"compared": len(both) if is_paired else min(len(a), len(b)),
                    "pairing": "paired" if is_paired else "unpaired",
                    **{name: {"count": len(found), "sample": sorted(f"{app}/{q}" for app, q in found)[:SAMPLE]}
                       for name, found in (("onlyInBaseline", set(a) - set(b)), ("onlyInCandidate", set(b) - set(a)))}},
        "hardGates": _hard_gates(stored.days, stable, candidate, gate),
    }
    material: list[Row] = []
    metrics: list[Row] = []
    daily = _stable_daily(stored.queries, stable, gate, partial_from)
    for metric in SERVED:
        threshold = _material(daily.get(("", ""), {}).get(metric, []), gate)
        material.append({"metric": metric, "slice": "all", **threshold})
        metrics.append({**_figure(metric, _values(a, metric), _values(b, metric), is_paired, threshold, gate,
                                  gate.min_queries, settings), "gated": True})
    ja, jb = _judged(stored.judged, stable), _judged(stored.judged, candidate)
    judged_pairs = _paired(len(set(ja) & set(jb)), len(ja), len(jb), gate)
    for metric in JUDGED:
        threshold = _material(_judged_daily(stored.judged, stable, metric, partial_from), gate)
        material.append({"metric": metric, "slice": "all", **threshold})
        row = _figure(metric, _values(ja, metric), _values(jb, metric), judged_pairs, threshold, gate,
                      gate.min_queries, settings)
        metrics.append({**row, "gated": min(len(ja), len(jb)) >= gate.min_queries})
    report["metrics"] = metrics
    report["slices"] = _slices(daily, a, b, is_paired, gate, settings)
    report["material"] = material
    report["verdict"], report["reasons"] = _verdict(report, gate, events, stable, candidate)
    return report


def _paired(shared: int, a: int, b: int, gate: LiveThresholds) -> bool:
    """Whether queries both versions served are compared in pairs: enough of them, and a large enough
    share of each version's, else the pairs would stand for a corner of the traffic. With each version
    cut on its own by the store, the share is that under the lower cut: the version cut there holds
    the larger count, all of it below the cut, and every pair is below it."""
    return shared >= gate.min_queries and shared >= gate.min_paired_share * max(a, b)


def _queries(rows: Mapping[QueryKey, Mapping[str, Any]], version: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(app, query) -> its rows over the window summed, with its labels, for one version."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (_, app, ver, query), row in sorted(rows.items()):
        if ver != version:
            continue
        held = out.setdefault((app, query), {"labels": {}})
        add_row(held, row, 0)
        held["labels"] = _labels(app, row)
    return out


def _value(held: Mapping[str, Any], metric: str) -> float:
    if metric == "zero_result_rate":
        return held["zero"] / held["events"] if held["events"] else np.nan
    if metric in JUDGED:
        return float(held[metric])
    s, n = held[metric]
    return s / n if n else np.nan


def _values(queries: Mapping[tuple[str, str], Mapping[str, Any]], metric: str) -> dict[tuple[str, str], float]:
    return {key: _value(held, metric) for key, held in queries.items()}


def _stable_daily(rows: Mapping[QueryKey, Mapping[str, Any]], version: str, gate: LiveThresholds,
                  partial_from: str | None) -> dict[tuple[str, str], dict[str, list[float]]]:
    """The version's daily means over queries (a query's value on a day is its mean over that day's
    events, as the figure is a mean over queries), before `partial_from`: {("", ""): {metric: means}}
    for all queries and {(dimension, label): {metric: means}} per slice, in one pass over the rows."""
    sums: dict[tuple[str, str], dict[str, dict[str, list[float]]]] = {}
    for (day, app, ver, _), row in rows.items():
        if ver != version or (partial_from is not None and day >= partial_from):
            continue
        labels = _labels(app, row)
        groups = [(("", ""), SERVED), *(((dim, labels[dim]), gate.slice_metrics) for dim in gate.slice_dimensions)]
        for group, metrics in groups:
            held = sums.setdefault(group, {})
            for metric in metrics:
                value = _value(row, metric)
                if np.isfinite(value):
                    acc = held.setdefault(metric, {}).setdefault(day, [0.0, 0])
                    acc[0] += value
                    acc[1] += 1
    return {group: {metric: [s / n for _, (s, n) in sorted(by_day.items())] for metric, by_day in held.items()}
            for group, held in sums.items()}


def _judged(rows: Sequence[JudgedQuery], version: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(app, query) -> its judged figures averaged, with its labels, for one version."""
    grouped: dict[tuple[str, str], list[JudgedQuery]] = defaultdict(list)
    for row in rows:
        if row.version == version:
            grouped[(row.app, row.query)].append(row)
    return {key: {m: float(np.mean([r.values[m] for r in found])) for m in JUDGED}
            for key, found in sorted(grouped.items())}


def _judged_daily(rows: Sequence[JudgedQuery], version: str, metric: str, partial_from: str | None) -> list[float]:
    by_day: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.version == version and (partial_from is None or row.day < partial_from):
            by_day[row.day].append(row.values[metric])
    return [float(np.mean(found)) for _, found in sorted(by_day.items())]


def _material(daily: Sequence[float], gate: LiveThresholds) -> dict[str, Any]:
    """The material threshold from the stable version's daily means (see the module docstring)."""
    x = np.asarray(daily, dtype=float)
    if x.size < gate.min_days:
        return {"days": int(x.size), "day_sd": None, "threshold": None,
                "rule": f"{x.size} days with data, {gate.min_days} needed"}
    rest = (x.sum() - x) / (x.size - 1)
    strays = np.abs(x - rest)
    found = gate.material_factor * quantile(strays, "deviation", gate.false_alarm_rate)  # larger is worse
    return {"days": int(x.size), "day_sd": float(x.std(ddof=1)), "threshold": max(gate.min_margin, float(found)),
            "rule": f"{gate.material_factor:g} x the {1 - gate.false_alarm_rate:.4g} quantile of {x.size} "
                    "leave-one-day-out deviations of the stable version's daily mean over queries, "
                    f"at least {gate.min_margin:g}"}


def _figure(metric: str, a: Mapping[tuple[str, str], float], b: Mapping[tuple[str, str], float], is_paired: bool,
            material: Mapping[str, Any], gate: LiveThresholds, min_queries: int, settings: PairedSettings) -> Row:
    direction = -1 if metric in LOWER_IS_BETTER else 1
    row: Row = {"metric": metric, "direction": "lower" if direction < 0 else "higher",
                "interval": "paired" if is_paired else "unpaired"}
    if is_paired:
        keys = [k for k in sorted(set(a) & set(b)) if np.isfinite(a[k]) and np.isfinite(b[k])]
        va, vb = np.array([a[k] for k in keys]), np.array([b[k] for k in keys])
    else:
        va = np.array([x for _, x in sorted(a.items()) if np.isfinite(x)])
        vb = np.array([x for _, x in sorted(b.items()) if np.isfinite(x)])
    if va.size == 0 or vb.size == 0:
        return {**row, "n": 0, "outcome": NOT_MEASURED}
    delta = paired_interval(va, vb, settings) if is_paired else two_sample_interval(va, vb, settings)
    n = int(min(va.size, vb.size))
    row.update(n=n, a=float(va.mean()), b=float(vb.mean()), delta=delta.estimate, low=delta.low, high=delta.high,
               margin=material["threshold"])
    if material["threshold"] is None:
        return {**row, "outcome": TOO_FEW if n < min_queries else TOO_FEW_DAYS}
    found = Paired(n=n, mean_a=row["a"], mean_b=row["b"], delta=delta, margin=material["threshold"])
    return {**row, "outcome": found.outcome(direction, min_queries)}


def _slices(daily: Mapping[tuple[str, str], Mapping[str, list[float]]], a: Mapping[tuple[str, str], Mapping[str, Any]],
            b: Mapping[tuple[str, str], Mapping[str, Any]], is_paired: bool, gate: LiveThresholds,
            settings: PairedSettings) -> list[Row]:
    """Every slice's figures, worst first: failures, then by how far the delta goes the worse way
    measured in material thresholds."""
    labels: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for held in (*a.values(), *b.values()):
        for dim, label in held["labels"].items():
            if dim in gate.slice_dimensions:
                labels[dim, label] = set()
    for side in (a, b):
        for key, held in side.items():
            for dim, label in held["labels"].items():
                if (dim, label) in labels:
                    labels[dim, label].add(key)
    rows = []
    for (dim, label), keys in sorted(labels.items()):
        in_a = {k: v for k, v in a.items() if k in keys}
        in_b = {k: v for k, v in b.items() if k in keys}
        for metric in gate.slice_metrics:
            threshold = _material(daily.get((dim, label), {}).get(metric, []), gate)
            rows.append({"dimension": dim, "label": label,
                         **_figure(metric, _values(in_a, metric), _values(in_b, metric), is_paired, threshold, gate,
                                   gate.min_slice_queries, settings)})
    return sorted(rows, key=_worst_first)


def _worst_first(row: Row) -> tuple[int, float]:
    if row.get("delta") is None:
        return _SEVERITY[row["outcome"]], 0.0
    sign = -1 if row["direction"] == "lower" else 1
    scale = row["margin"] or 1.0
    return _SEVERITY[row["outcome"]], sign * row["delta"] / scale


def _labels(app: str, row: Mapping[str, Any]) -> dict[str, str]:
    """A query row's slice labels."""
    return {"app": app, "query_type": str(row.get("query_type") or "unknown"),
            "language": str(row.get("language") or "unknown")}


def _hard_gates(days: Mapping[DayKey, Mapping[str, Any]], stable: str, candidate: str,
                gate: LiveThresholds) -> list[Row]:
    totals = {v: {"events": 0, "unauthorized": 0, "stale_conflict": 0, "filter_zero": 0} for v in (stable, candidate)}
    examples: dict[str, set[str]] = defaultdict(set)
    for (_, _, version), row in days.items():
        if version in totals:
            for name in totals[version]:
                totals[version][name] += int(row[name])
            if version == candidate:
                for name, ids in row.get("examples", {}).items():
                    examples[name].update(ids)
    a, b = totals[stable], totals[candidate]

    def shown(name: str) -> list[dict[str, str]]:
        return [{"event": e} for e in sorted(examples[name])[:SAMPLE]]

    rows: list[Row] = []
    for name, limit in (("unauthorized", gate.max_unauthorized), ("stale_conflict", gate.max_stale_conflicts)):
        rows.append({"gate": name, "max": limit, "baseline": a[name], "candidate": b[name], "counted": b[name],
                     "examples": shown(name) if b[name] > limit else [],
                     "outcome": FAIL if b[name] > limit else PASS})
    rate = a["filter_zero"] / a["events"] if a["events"] else None
    k, n = b["filter_zero"], b["events"]
    p = filter_zero_p(a["filter_zero"], a["events"], k, n)
    excess = 0.0 if rate is None else max(0.0, k - n * rate)
    failed = p is not None and p < gate.filter_zero_alpha and excess > 0
    rows.append({"gate": "filter_zero_rise", "max": f"p < {gate.filter_zero_alpha:g}", "baseline": a["filter_zero"],
                 "candidate": k, "counted": round(excess, 1), "p": p, "stable_rate": rate,
                 "examples": shown("filter_zero") if failed else [],
                 "outcome": NOT_MEASURED if p is None else FAIL if failed else PASS})
    return rows


def filter_zero_p(k_a: int, n_a: int, k_b: int, n_b: int) -> float | None:
    """One-sided p of the candidate's (b) filter-caused zeros being more frequent than the stable
    version's (a), both rates estimated: given the k = k_a + k_b seen, k_b is binomial with
    p = n_b / (n_a + n_b) when the rates are equal (the conditional test of two Poisson rates,
    close to Fisher's exact test at these rates). None without events of either version."""
    if not n_a or not n_b:
        return None
    k = k_a + k_b
    if k == 0:
        return 1.0
    return float(binomtest(k_b, k, n_b / (n_a + n_b), alternative="greater").pvalue)


def _verdict(report: Report, gate: LiveThresholds, events: Mapping[str, int], stable: str,
             candidate: str) -> tuple[str, list[str]]:
    failed: list[str] = []
    unsure: list[str] = []
    for row in report["hardGates"]:
        if row["outcome"] == FAIL:
            failed.append(f"{row['gate']}: {row['counted']} in the candidate"
                          + (f" (max {row['max']})" if isinstance(row["max"], int) else
                             f" beyond the stable rate {row['stable_rate']:.4f}, p = {row['p']:.2g}")
                          + (f", e.g. {', '.join(e['event'] for e in row['examples'])}" if row["examples"] else ""))
    for version in (stable, candidate):
        if not events[version]:
            unsure.append(f"pipeline version {version} has no events in the window")
    for row in report["metrics"]:
        if row["gated"]:
            if row["outcome"] == TOO_FEW_DAYS:
                unsure.append(f"{row['metric']}: the stable version's day-to-day variation needs "
                              f"{gate.min_days} days with data")
            else:
                judge(row, row["metric"], failed, unsure)
    for row in report["slices"]:
        if row["outcome"] == FAIL:
            judge(row, f"slice {row['dimension']}={row['label']}: {row['metric']}", failed, [])
    compared = report["queries"]["compared"]
    if compared < gate.min_queries:
        unsure.append(f"{compared} queries compared, fewer than min_queries {gate.min_queries}")
    if failed:
        return FAILED, failed
    return (NOT_ENOUGH, unsure) if unsure else (PASSED, [])
