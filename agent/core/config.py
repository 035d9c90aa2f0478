"""Configuration of the pure core: windows, lateness, label bounds, buckets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.core.tally import Buckets, Family

DEFAULT_BUCKETS: dict[str, tuple[float, ...]] = {
    "score": tuple(round(0.1 * i, 1) for i in range(11)),
    "gap": (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
    "age_days": (1, 7, 30, 90, 180, 365, 730, 1825),
    "ratio": tuple(round(0.1 * i, 1) for i in range(1, 11)),
    "latency_seconds": (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    "count": (0, 1, 2, 3, 5, 10, 20, 50, 100, 1000),
    "rank_shift": (0, 1, 2, 3, 5, 10, 20, 50),
}

LABEL_DIMENSIONS = ("app", "source", "filter", "query_type", "language")
# A label only when `CoreConfig.by_pipeline_version` is on, bounded by `max_pipeline_versions`.
PIPELINE_VERSION = "pipeline_version"


@dataclass(frozen=True, kw_only=True)
class CoreConfig:
    """Everything the core needs to know; time never comes from here."""

    windows: tuple[tuple[str, int], ...] = (("5m", 300), ("1h", 3600), ("24h", 86400))
    bucket_seconds: int = 60
    lateness_seconds: int = 300
    max_future_seconds: int = 3600  # events dated further ahead of their write time stay out of windows
    # Per dimension: a fixed list of allowed values, or None for "first N seen".
    label_values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_label_values: int = 200
    # Split every family with an app label by the event's pipeline version (agent/core/pipelines.py).
    by_pipeline_version: bool = False
    max_pipeline_versions: int = 4  # learned per app; versions beyond these fold into `other`
    # A version without an event in this much event time has stopped: its place can go to a new one.
    pipeline_version_idle_seconds: int = 900
    buckets: dict[str, tuple[float, ...]] = field(default_factory=dict)
    score_buckets_by_app: dict[str, tuple[float, ...]] = field(default_factory=dict)
    vocabulary_bits: int = 1 << 20
    vocabulary_hashes: int = 7
    if TYPE_CHECKING:  # set by __post_init__
        _buckets: dict[str, Buckets] = field(init=False)
        _score_by_app: dict[str, Buckets] = field(init=False)

    def __post_init__(self) -> None:
        if not self.windows:
            raise ValueError("at least one window is required")
        for name, seconds in self.windows:
            if seconds <= 0 or seconds % self.bucket_seconds:
                raise ValueError(f"window {name}: {seconds}s is not a positive multiple of {self.bucket_seconds}s")
        if self.lateness_seconds < 0:
            raise ValueError("lateness_seconds must be >= 0")
        if self.max_future_seconds < 0:
            raise ValueError("max_future_seconds must be >= 0")
        if self.max_label_values < 1:
            raise ValueError("max_label_values must be >= 1")
        if self.max_pipeline_versions < 1:
            raise ValueError("max_pipeline_versions must be >= 1")
        idle = self.pipeline_version_idle_seconds
        if idle <= 0 or idle % self.bucket_seconds:
            raise ValueError(f"pipeline_version_idle_seconds: {idle}s is not a positive multiple of "
                             f"{self.bucket_seconds}s")
        unknown = set(self.label_values) - {*LABEL_DIMENSIONS, PIPELINE_VERSION}
        if unknown:
            raise ValueError(f"unknown label dimensions: {sorted(unknown)}")
        merged = {**DEFAULT_BUCKETS, **self.buckets}
        object.__setattr__(self, "_buckets", {k: Buckets(tuple(v)) for k, v in merged.items()})
        object.__setattr__(
            self, "_score_by_app", {k: Buckets(tuple(v)) for k, v in self.score_buckets_by_app.items()}
        )

    def buckets_for(self, kind: str, app: str) -> Buckets:
        """One app's bounds of a bucket set. Retrievers score on different
        scales, so score buckets are per app; the other sets are shared."""
        if kind == "score":
            return self._score_by_app.get(app) or self._buckets["score"]
        return self._buckets[kind]

    def labels_of(self, family: Family) -> tuple[str, ...]:
        """A family's labels as its keys carry them: with the split by pipeline
        version, `pipeline_version` right after `app` (families without an app
        label are not split)."""
        labels = family.labels
        if self.by_pipeline_version and labels[:1] == ("app",):
            return ("app", PIPELINE_VERSION, *labels[1:])
        return labels

    @property
    def pipeline_versions_named(self) -> int:
        """How many pipeline versions of one app may carry their own name, `none` and `other` besides:
        the configured list's, or `max_pipeline_versions` learned."""
        fixed = self.label_values.get(PIPELINE_VERSION)
        return len(fixed) if fixed else self.max_pipeline_versions

    @property
    def horizon_buckets(self) -> int:
        """How many buckets a partition keeps: the longest window plus lateness."""
        longest = max(seconds for _, seconds in self.windows)
        return -(-(longest + self.lateness_seconds) // self.bucket_seconds) + 1
