"""What a baseline holds, as plain data a person or a tool can check: `ragdrift baseline show` prints it,
and `finding_record` puts beside each finding the counts its statistic was computed from.

Everything a statistic needs is there: per numeric feature the bins' finite
inner edges (the first bin reaches -inf, the last +inf), the baseline's counts
and the centres W1 puts each bin's mass at; per mix the categories (`other`
last) and counts. So PSI, JS, KS, W1 and the chi-square p-value of any window
can be recomputed from a `finding_record` alone (docs/drift.md,
"Statistics").
"""

from __future__ import annotations

import base64
import math
import zlib
from typing import Any

import numpy as np

from agent.core.drift.baseline import Baseline, FeatureReference, Finding
from agent.core.drift.bins import Bins
from agent.core.drift.queries import QueryModel
from agent.core.drift.thresholds import Threshold, expected_rate


def describe(baseline: Baseline) -> dict[str, Any]:
    """The baseline's name, version, days, settings, per app and feature its bins and thresholds,
    and its vocabulary and clusters."""
    return {
        "name": baseline.name,
        "version": baseline.version,
        "days": {"first": baseline.days[0], "last": baseline.days[-1], "count": len(baseline.days)},
        "n_bins": baseline.n_bins,
        "max_categories": baseline.max_categories,
        "calibration": baseline.calibration.to_dict(),
        "queries": None if baseline.queries is None else queries(baseline.queries),
        "apps": {app: {"numeric": {f: reference(r, baseline) for f, r in a.numeric.items()},
                       "mixes": {m: reference(r, baseline) for m, r in a.mixes.items()}}
                 for app, a in baseline.apps.items()},
    }  # fmt: skip


def reference(r: FeatureReference[Any], baseline: Baseline) -> dict[str, Any]:
    """One feature's bins (or categories), counts and thresholds."""
    return bins(r) | {"thresholds": {s: threshold(t, baseline) for s, t in sorted(r.thresholds.items())}}


def bins(r: FeatureReference[Any]) -> dict[str, Any]:
    """The baseline side of a statistic: edges, counts and centres (numeric) or categories and counts (mix)."""
    if isinstance(r.bins, Bins):
        grid = r.bins.grid
        return {"grid": grid.to_dict() | {"digest": grid.digest}, "edges": list(r.bins.edges),
                "centres": list(r.bins.centres), "counts": list(r.counts)}  # fmt: skip
    return {"categories": list(r.bins.labels), "counts": list(r.counts)}


def threshold(t: Threshold, baseline: Baseline) -> dict[str, Any]:
    """A threshold by window size, how it was fitted (`reason`) and its expected false-alarm rate."""
    return t.to_dict() | {"expected_false_alarm_rate": expected_rate(t, baseline.calibration)}


def queries(model: QueryModel) -> dict[str, Any]:
    """The vocabulary's size and false-positive rate, and the cluster count.

    A Bloom filter of m bits and k hashes with X bits set holds about
    -(m / k) ln(1 - X / m) distinct terms and answers "seen" for a term it never
    saw with probability (X / m)^k."""
    v = model.vocabulary.to_dict()
    m, k = int(v["bits"]), int(v["hashes"])
    array = np.frombuffer(zlib.decompress(base64.b64decode(v["array"])), dtype=np.uint8)
    fill = int(np.unpackbits(array).sum()) / m
    terms = None if fill >= 1 else round(-(m / k) * math.log1p(-fill))
    return {"clusters": len(model.centres), "features": model.n_features,
            "vocabulary": {"bits": m, "hashes": k, "bits_set": round(fill * m), "terms": terms,
                           "false_positive_rate": fill**k}}  # fmt: skip


def finding_record(baseline: Baseline, f: Finding) -> dict[str, Any]:
    """One finding with what its value was computed from: the window's counts in the baseline's bins,
    the baseline's counts (and edges and centres, or categories), and the expected false-alarm rate."""
    app = baseline.apps[f.app]
    r = app.numeric.get(f.feature) or app.mixes[f.feature]
    return {"app": f.app, "feature": f.feature, "stat": f.stat, "value": f.value, "threshold": f.threshold,
            "alarm": f.alarm, "n": f.n, "calibrated": f.calibrated, "expected_false_alarm_rate": f.rate,
            "counts": list(f.counts), "baseline": bins(r)}  # fmt: skip
