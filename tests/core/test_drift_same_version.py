"""A baseline's version is the same on every machine: what feeds it (grid edges, bin centres, calibrated
thresholds) is computed with libm's scalar functions and exactly rounded sums, not with numpy's vector
kernels, whose last bits follow the CPU. A fixed set of days gives the version recorded here."""

from __future__ import annotations

from agent.core.drift import DEFAULT_GRIDS, freeze
from agent.core.drift.baseline import Counts
from agent.core.drift.features import CONTENT_AGE, LANGUAGE, LATENCY, TOP1_SCORE

# Recorded once; a change means the same days freeze into another baseline (and every replica's and
# operator's stored version of them differs), which only a change of the baseline's format may do.
VERSION = "65f11c789d1269a8"


def days() -> dict[str, dict[str, Counts]]:
    """Nine days of two apps: scores, content ages and latencies on their default grids (asinh cells of three
    scales), and a language mix; whole-number arithmetic only, so the input is the same everywhere."""
    out = {}
    for d in range(9):
        apps = {}
        for a, app in enumerate(("docs", "shop")):
            n = 120 + 17 * d + 40 * a
            values = {
                TOP1_SCORE: [0.3 + 0.6 * ((i * 37 + d * 11 + a) % 101) / 101 for i in range(n)],
                CONTENT_AGE: [((i * 53 + d * 7) % 400) / 3 for i in range(n)],
                LATENCY: [0.05 + ((i * 29 + d * 5 + a) % 97) / 40 for i in range(n)],
            }
            numeric = {f: {int(c): int(k) for c, k in enumerate(DEFAULT_GRIDS[f].histogram(v)) if k}
                       for f, v in values.items()}
            apps[app] = Counts(numeric, {LANGUAGE: {"en": n - 9 - d % 4, "de": 6 + d % 4, "fr": 3}})
        out[f"2026-03-{d + 1:02d}"] = apps
    return out


def test_the_same_days_freeze_into_the_recorded_version():
    baseline = freeze(days(), "machine")
    assert any(t.calibrated for a in baseline.apps.values() for r in a.numeric.values() for t in r.thresholds.values())
    assert baseline.version == VERSION
