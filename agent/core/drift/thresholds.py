"""Drift thresholds derived from the baseline itself, for a target false-alarm rate.

"Calibration" is the word for score calibrations (agent/core/judgments/calibration.py);
here the words are thresholds and their settings. Names kept, each for a reason:
- `Baseline.calibration` and `freeze(calibration=...)`: a frozen baseline stores its
  `ThresholdSettings` under the key `calibration`, and stored keys never change.
- `Threshold.calibrated`: a stored key of every threshold, and the `calibrated` field
  of `ragdrift baseline show`'s and `ragdrift drift`'s output.
- `drift.false_alarm_rate` (the setting) and `ragdrift_drift_expected_false_alarm_rate`
  (the metric) never said calibration, and stay.

The null is "a window looks like one more day of the baseline period": for
each baseline day d, the statistic between day d and the rest of the baseline
(the other days summed) is one draw of what an undrifted window scores. The
threshold is the quantile 1 - rate of those leave-one-day-out values (the
quantile `rate` for a p-value, which alarms when small). Default rate 1/30:
about one false alarm per feature, statistic and 30 daily windows.

Quantile rule, small samples: the Weibull plotting position (numpy's
`method="weibull"`): with m sorted values the threshold is read at position
(m + 1) * level, interpolated linearly between neighbours, so the chance that a
fresh null value exceeds the k-th largest is k / (m + 1) on average. With
m + 1 < 1 / rate the position falls beyond the largest value (for the default
1/30: a 7-day baseline's day rung; also a rung that few days reach, or every
rung when `min_days` is below 28). There the values are taken as log-normal
(for a p-value, -log p is: log(-log p) normal, where log p normal was too light
a tail), and the threshold is the predictive 1 - rate quantile of the m logs:
mean + t(m - 1, 1 - rate) * sd * sqrt(1 + 1/m), Student's t because the mean
and the spread are estimated from the same m values. A value near 0 is
harmless but its log is far out, and one would blow the spread up (and a
threshold with it, out of reach): values below `TAIL_FLOOR` of the extreme
enter the fit at that share. The threshold is never inside the sample's
extreme, and is the extreme itself with fewer than `TAIL_MIN_VALUES` values.
The extreme alone would alarm about once in m + 1 windows, not at `rate`; the
fitted tail is a model, and `Threshold.reason` says so. Why this rule, and
the false-alarm rates it was measured at: docs/drift.md, "How the threshold
rule was chosen".

Sample size: a 1 h window holds far fewer events than a day, so its statistics
are noisier and a day-sized threshold would false-alarm on it. So thresholds
are calibrated on a ladder of sizes: rungs n = min_events * 2^j below the
median day, where each day is thinned to n events (a seeded draw without
replacement, multivariate hypergeometric, `draws` times per day) before it is
compared with the rest; then the day rung, whole days, at the median day size.
Thinning keeps the baseline's day-to-day variation (weekdays, releases) and
adds the sampling noise of n events, so neither needs a model.
- A window of n events between rungs: a power law between the two (linear in
  log threshold against log n, as sampling noise goes: PSI about 1/n, the
  others about 1/sqrt(n)); linear in log n where a value is 0.
- Below the smallest rung: no threshold, too few events to judge.
- Above the day rung: the day rung's. Longer windows are outside the
  calibration; the day threshold is conservative for them (averaging days
  shrinks the day-to-day spread), except the p-value's, which gets stricter
  as n grows.
- The day rung mixes days of different sizes, so for a window of the median
  size it is a little conservative when sizes vary (docs/drift.md).

Fallback: with fewer than `min_days` days holding data (default 7), no
calibration: `DEFAULT_THRESHOLDS`, flagged `calibrated=False` with the reason.
They are rules of thumb, each about what a shift of half a standard deviation
of a normal feature scores on 10 quantile bins (0.24, 0.20, 0.20, 0.47 sd):
PSI 0.25 (the classic "significant shift"), JS distance 0.2 (base 2), KS 0.2,
Wasserstein-1 0.5 baseline standard deviations; chi-square p-value 0.001.
They do not scale with the window's size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import stdtrit  # Student's t quantile

from agent.core.drift.stats import LOWER_IS_WORSE, fsum_rows, log_each, statistic

P_FLOOR = 1e-300  # p-values are floored here before -log p
TAIL_FLOOR = 0.1  # values below this share of the extreme enter the tail fit as this share
TAIL_MIN_VALUES = 5  # positive values needed to fit the log-normal tail beyond the extreme

# wasserstein: in baseline standard deviations (it has the feature's units)
DEFAULT_THRESHOLDS = MappingProxyType({"psi": 0.25, "js": 0.2, "ks": 0.2, "wasserstein": 0.5, "chi2_p": 0.001})


@dataclass(frozen=True, kw_only=True)
class ThresholdSettings:
    """How thresholds are derived; stored in the baseline (key `calibration`) for the record."""

    rate: float = 1 / 30  # target false alarms per feature and statistic, per window
    min_days: int = 7  # days with data needed to calibrate; fewer: the defaults
    min_events: int = 32  # smallest window judged (the ladder's first rung)
    draws: int = 8  # thinned samples per day and rung
    seed: int = 0  # the thinning's seed: the same days give the same thresholds
    defaults: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))

    def __post_init__(self) -> None:
        if not 0 < self.rate < 0.5:
            raise ValueError("rate must be in (0, 0.5)")
        if self.min_days < 3 or self.min_events < 2 or self.draws < 1:
            raise ValueError("need min_days >= 3, min_events >= 2 and draws >= 1")
        unknown = set(self.defaults) - set(DEFAULT_THRESHOLDS)
        if unknown:
            raise ValueError(f"unknown drift statistics in defaults: {sorted(unknown)}")
        object.__setattr__(self, "rate", float(self.rate))
        merged = {k: float(v) for k, v in sorted({**DEFAULT_THRESHOLDS, **self.defaults}.items())}
        object.__setattr__(self, "defaults", MappingProxyType(merged))

    def to_dict(self) -> dict[str, Any]:
        return {"rate": self.rate, "min_days": self.min_days, "min_events": self.min_events,
                "draws": self.draws, "seed": self.seed, "defaults": dict(self.defaults)}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ThresholdSettings:
        return cls(rate=float(data["rate"]), min_days=int(data["min_days"]), min_events=int(data["min_events"]), draws=int(data["draws"]),
                   seed=int(data["seed"]), defaults=dict(data["defaults"]))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Threshold:
    """One statistic's threshold by window size: values at `sizes` (events), a power law between them."""

    sizes: tuple[int, ...]  # increasing; the last is the median baseline day
    values: tuple[float, ...]
    samples: tuple[int, ...]  # leave-one-out values behind each (0: a default)
    calibrated: bool
    reason: str

    def __post_init__(self) -> None:
        if not self.sizes or len(self.values) != len(self.sizes) or len(self.samples) != len(self.sizes):
            raise ValueError("a threshold needs one value and sample count per size")
        if any(b <= a for a, b in zip(self.sizes, self.sizes[1:])) or self.sizes[0] < 1:
            raise ValueError("threshold sizes must be increasing and >= 1")

    def at(self, n: float) -> float | None:
        """The threshold for a window of n events; None below the smallest size."""
        if n < self.sizes[0]:
            return None
        if n >= self.sizes[-1]:
            return self.values[-1]
        j = int(np.searchsorted(self.sizes, n, side="right"))  # sizes[j - 1] <= n < sizes[j]
        (n0, n1), (v0, v1) = self.sizes[j - 1 : j + 1], self.values[j - 1 : j + 1]
        x = math.log(n / n0) / math.log(n1 / n0)
        if v0 > 0 and v1 > 0:  # a power law between rungs, as sampling noise is
            return float(math.exp(math.log(v0) + x * math.log(v1 / v0)))
        return float(v0 + x * (v1 - v0))

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "values": list(self.values), "samples": list(self.samples),
                "calibrated": self.calibrated, "reason": self.reason}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Threshold:
        return cls(sizes=tuple(int(s) for s in data["sizes"]), values=tuple(float(v) for v in data["values"]),
                   samples=tuple(int(s) for s in data["samples"]), calibrated=bool(data["calibrated"]), reason=str(data["reason"]))  # fmt: skip


def expected_rate(threshold: Threshold, settings: ThresholdSettings) -> float | None:
    """The share of undrifted windows expected to alarm at this threshold: the rate it was calibrated for
    (a window bigger than the day rung: at most that, except for the p-value); None for a default threshold,
    whose rate nothing measured."""
    return settings.rate if threshold.calibrated else None


def alarm(stat: str, value: float, threshold: float | None) -> bool:
    """Beyond the threshold, in the statistic's bad direction (strictly)."""
    if threshold is None:
        return False
    return value < threshold if stat in LOWER_IS_WORSE else value > threshold


def quantile(values: npt.ArrayLike, stat: str, rate: float) -> float:
    """The Weibull-position quantile at the bad tail: 1 - rate, or rate for a p-value;
    beyond the sample's extreme, the predictive log-normal tail of its positive values
    (of -log p for a p-value)."""
    values = np.asarray(values, dtype=float)
    lower = stat in LOWER_IS_WORSE
    if (len(values) + 1) * rate >= 1:
        return float(np.quantile(values, rate if lower else 1 - rate, method="weibull"))
    bad = -log_each(np.maximum(values, P_FLOOR)) if lower else values  # larger is worse
    extreme = float(bad.max())
    if not extreme > 0:
        return float(values.min() if lower else extreme)
    logs = log_each(np.maximum(bad, extreme * TAIL_FLOOR))
    m = len(logs)
    tail = extreme
    if m >= TAIL_MIN_VALUES:  # the predictive quantile: the mean and spread of the logs are estimates from m values
        mean = float(fsum_rows(logs)) / m
        sd = math.sqrt(float(fsum_rows((logs - mean) ** 2)) / (m - 1))
        if sd > 0:
            z = stdtrit(m - 1, 1 - rate) * math.sqrt(1 + 1 / m)
            tail = max(math.exp(mean + z * sd), extreme)
    return max(math.exp(-tail), P_FLOOR) if lower else tail  # a p of 0 still alarms


def derive_thresholds(
    days: npt.ArrayLike,
    stats: Sequence[str],
    centres: npt.ArrayLike | None = None,
    settings: ThresholdSettings = ThresholdSettings(),
    key: Sequence[int] = (),
) -> dict[str, Threshold]:
    """Thresholds per statistic from per-day coarse counts (D x k integers, one row per day).

    `key` (e.g. a hash of app and feature) joins `settings.seed` to seed the
    thinning, so each feature draws its own stream whatever the order of calls.
    """
    counts = np.asarray(days, dtype=np.int64)
    if counts.ndim != 2 or (counts < 0).any():
        raise ValueError("days must be a D x k array of counts >= 0")
    counts = counts[counts.sum(axis=1) > 0]
    d = len(counts)
    if d < settings.min_days:
        return fallback(stats, counts.sum(axis=0), centres, settings, f"{d} days with data, {settings.min_days} needed")
    sizes, rows, rests = ladder(counts, settings, np.random.default_rng([settings.seed, *key]))
    out = {}
    for stat in stats:
        values, kept_sizes, samples = [], [], []
        for n, sample, rest in zip(sizes, rows, rests):
            if len(sample) < settings.min_days:
                continue
            values.append(quantile(statistic(stat, rest, sample, centres), stat, settings.rate))
            kept_sizes.append(n)
            samples.append(len(sample))
        reason = f"calibrated on {d} days"
        tailed = [n for n, k in zip(kept_sizes, samples) if (k + 1) * settings.rate < 1]
        if tailed:
            reason += (f"; at {', '.join(map(str, tailed))} events the threshold extrapolates a log-normal tail "
                       "beyond the extreme of too few values")
        out[stat] = Threshold(sizes=tuple(kept_sizes), values=tuple(values), samples=tuple(samples), calibrated=True, reason=reason)
    return out


def ladder(
    counts: np.ndarray, settings: ThresholdSettings, rng: np.random.Generator
) -> tuple[list[int], list[np.ndarray], list[np.ndarray]]:
    """(sizes, samples per size, rest of the baseline per sample): the thinned rungs, then whole days."""
    totals = counts.sum(axis=1)
    rest = counts.sum(axis=0) - counts  # row d: the baseline without day d
    day = int(np.median(totals))
    sizes: list[int] = []
    rows: list[np.ndarray] = []
    rests: list[np.ndarray] = []
    n = settings.min_events
    while n < day:
        big = np.flatnonzero(totals >= n)
        drawn = [rng.multivariate_hypergeometric(counts[i], n, size=settings.draws) for i in big]
        sizes.append(n)
        rows.append(np.concatenate(drawn) if drawn else np.zeros((0, counts.shape[1]), dtype=np.int64))
        rests.append(np.repeat(rest[big], settings.draws, axis=0))
        n *= 2
    sizes.append(day)
    rows.append(counts)
    rests.append(rest)
    return sizes, rows, rests


def fallback(stats: Sequence[str], total: npt.ArrayLike, centres: npt.ArrayLike | None, settings: ThresholdSettings,
             why: str) -> dict[str, Threshold]:
    """The default thresholds, flagged uncalibrated (wasserstein scaled by the baseline's standard deviation)."""
    out = {}
    for stat in stats:
        value = float(settings.defaults[stat])
        if stat == "wasserstein":
            value *= spread(total, centres)
        out[stat] = Threshold(sizes=(settings.min_events,), values=(value,), samples=(0,), calibrated=False, reason=f"{why}: default threshold")
    return out


def spread(counts: npt.ArrayLike, centres: npt.ArrayLike | None) -> float:
    """Standard deviation of the binned distribution (mass at the centres); 0 without data."""
    w = np.asarray(counts, dtype=float)
    total = float(fsum_rows(w))
    if total <= 0:
        return 0.0
    c = np.asarray(centres, dtype=float)
    mean = float(fsum_rows(w * c)) / total
    return math.sqrt(float(fsum_rows(w * (c - mean) ** 2)) / total)
