"""What a scrape shows, decided in the core; the collectors (agent/io/prometheus/collectors.py)
only render it, and the endpoint (agent/io/prometheus/endpoint.py) serves it.

The agent builds a `Snapshot` every second or so from its process-wide
counters (monotone: every event adds to them, nothing regroups them), its
partitions' windows and its own health. Label values are folded here to the
top N by volume plus `other`, and the per-window ratios and source
concentration are computed here: per app shown (the other apps together as
`other`), over every source. Split by pipeline version, the families carry
its label, folded per app (`versions_shown`): each app names at most
`CoreConfig.pipeline_versions_named` versions, `none` and `other` besides, a
stopped version giving its place up to one that has started, its counter
series ending; the ratios stay per app, over every version.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.core import calibrated
from agent.core.access import UNAUTHORIZED_RESULTS, UNAUTHORIZED_RETRIEVALS
from agent.core.calibrated import CALIBRATED, ESTIMATED_RELEVANT, UNCALIBRATED
from agent.core.citations import CITABLE, CITED
from agent.core.config import PIPELINE_VERSION, CoreConfig
from agent.core.families import FAMILIES
from agent.core.filters import OUTCOMES
from agent.core.freshness import STALE_RESULTS
from agent.core.labels import OTHER
from agent.core.pipelines import NO_VERSION, conform, end_series, of_versions, relabel
from agent.core.query_mix import LANGUAGES, NEW_TERMS, QUERY_TYPES, TERMS
from agent.core.reasons import REASONS
from agent.core.sources import ADMITTED_RESULTS, concentration
from agent.core.tally import Key, Tally, total
from agent.core.zero_results import RETRIEVALS, ZERO_RESULTS

# Which family ranks the values of each label dimension.
VOLUME = {
    "app": RETRIEVALS.name,
    "source": ADMITTED_RESULTS.name,
    "filter": OUTCOMES.name,
    "query_type": QUERY_TYPES.name,
    "language": LANGUAGES.name,
}
_VERSION = (PIPELINE_VERSION,)
EXEMPLAR_FAMILIES = frozenset((UNAUTHORIZED_RESULTS.name, UNAUTHORIZED_RETRIEVALS.name, STALE_RESULTS.name))
_SUFFIXES = ("_bucket", "_sum", "_count")

Shown = Mapping[str, frozenset[str]]  # label dimension -> values with their own series
Labels = Mapping[str, tuple[str, ...]]  # family name -> its labels as its keys carry them (CoreConfig.labels_of)


@dataclass(frozen=True)
class Gauge:
    """A gauge derived from the windows, rendered as `ragdrift_<name>`."""

    name: str
    labels: tuple[str, ...]
    help: str


ZERO_RATIO = Gauge("window_zero_result_ratio", ("app", "window"), "Zero-result events / events, per replica.")
NEW_TERM_RATIO = Gauge("window_new_term_ratio", ("app", "window"),
                       "New-term occurrences / term occurrences, per replica.")
SOURCE_HHI = Gauge("window_source_hhi_ratio", ("window",), "Herfindahl index of admitted results over sources.")
TOP_SOURCE = Gauge("window_top_source_share_ratio", ("window",), "Largest source's share of admitted results.")
CITATION_RATIO = Gauge("window_citation_ratio", ("app", "window"),
                       "Cited admitted results / admitted results of events reporting citations, per replica.")
ESTIMATED_PRECISION = Gauge("estimated_precision", ("app", "window"),
                            "Mean calibrated probability of relevance of admitted results, per replica "
                            "(window_estimated_relevant_results / window_calibrated_results).")
CALIBRATION_STATUS = Gauge("calibration_status", ("app", "window", "status"),
                           "1 for the app's calibration status in the window: ok (estimated_precision exported), "
                           "too_few_labels, error_too_high, pipeline_changed or none.")
GAUGES = (ZERO_RATIO, NEW_TERM_RATIO, SOURCE_HHI, TOP_SOURCE, CITATION_RATIO, ESTIMATED_PRECISION, CALIBRATION_STATUS)

# Why a replica leaves an assigned partition unread: its checkpoint was written by a newer release.
NEWER_RELEASE = "newer_release"
UNREADABLE = (NEWER_RELEASE,)


@dataclass(frozen=True, kw_only=True)
class Health:
    """The agent's own state at one moment of its loop."""

    rejected: dict[str, int] = field(default_factory=dict)  # dead letters by reason kind
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    assigned: int = 0
    last_checkpoint: float | None = None
    checkpoints: dict[str, int] = field(default_factory=dict)
    resets: int = 0  # partitions started afresh (log recreated)
    set_aside: int = 0  # damaged checkpoints set aside, their partitions started afresh
    unreadable: dict[tuple[str, int], str] = field(default_factory=dict)  # paused partitions: why, of UNREADABLE
    last_contact: float | None = None  # epoch s of Kafka's last answer
    unreachable_since: float | None = None  # set while Kafka does not answer
    paused: bool = False  # consumption paused while checkpoints keep failing


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Everything a scrape shows, frozen at one moment of the agent loop."""

    counters: Tally = field(default_factory=dict)  # process-local totals, folded
    windows: dict[str, Tally] = field(default_factory=dict)  # folded
    gauges: Tally = field(default_factory=dict)  # (gauge name, *labels) -> value
    exemplars: dict[Key, tuple[str, float]] = field(default_factory=dict)  # (family, *lead) -> (trace id, time)
    # The leading label values with traffic, the app's (and its pipeline version's, when split):
    # the counters labelled by these alone are zero-filled for each.
    leads: tuple[tuple[str, ...], ...] = ()
    processed: float = 0  # events processed by this process
    rejected: dict[str, int] = field(default_factory=dict)  # every reason kind, zero-filled
    health: Health = field(default_factory=Health)
    checkpoint_age: float | None = None
    unreachable_seconds: float = 0.0


def shown_values(volume: Tally, shown: Shown, top_n: int, labels: Labels) -> dict[str, frozenset[str]]:
    """The values each dimension shows: those shown before (sticky, so a counter
    series never moves into `other` and back, which would read as a reset),
    then the largest by volume until there are `top_n`."""
    by_dim: dict[str, dict[str, float]] = {dim: defaultdict(float) for dim in VOLUME}
    for key, value in volume.items():
        dims = labels.get(key[0])
        if dims is None:
            continue
        for position, dim in enumerate(dims, start=1):
            if VOLUME.get(dim) == key[0]:
                by_dim[dim][key[position]] += value
    return {dim: _top(sorted(values, key=lambda v: (-values[v], v)), set(shown.get(dim, ())), top_n)
            for dim, values in by_dim.items()}


def versions_shown(volume: Tally, live: Tally, shown: Shown, named: int) -> dict[str, frozenset[str]]:
    """Per app, the pipeline versions with their own series (`none` always,
    and at most `named` others): those it showed that have not stopped (with
    events in `live`, the last `pipeline_version_idle_seconds` of event time),
    then the most events in `live`, then those it showed, then
    the most events over `volume`. Per app, so that a small app's canary is
    not outranked by a large app's versions; a stopped version keeps its place
    until a started one needs it, as in the partitions (agent/core/metrics.py)."""
    by_app, live_by_app = _by_app_version(volume), _by_app_version(live)
    out = {}
    for app, values in by_app.items():
        recent = live_by_app.get(app, {})
        before = shown.get(app, frozenset())
        kept = {version for version in before - {NO_VERSION} if recent.get(version)}
        ranked = sorted(values.keys() - {NO_VERSION}, key=lambda v: (-recent.get(v, 0), v not in before, -values[v], v))
        out[app] = _top(ranked, kept, named) | ({NO_VERSION} & values.keys())
    return out


def _by_app_version(tally: Tally) -> dict[str, dict[str, float]]:
    """Events per app and pipeline version label, from a split tally."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, value in tally.items():
        if key[0] == RETRIEVALS.name:
            out[key[1]][key[2]] += value
    return out


def _top(ranked: list[str], kept: set[str], top_n: int) -> frozenset[str]:
    """`kept`, then the values of `ranked` in order until there are `top_n` (`other` is none of them)."""
    for label in ranked:
        if len(kept) >= top_n:
            break
        if label != OTHER:
            kept.add(label)
    return frozenset(kept)


def fold(tally: Tally, shown: Shown, labels: Labels, versions: Shown | None = None) -> Tally:
    """Each label value not shown becomes `other`; what it counted is kept there.
    With `versions` (per app, `versions_shown`), the pipeline version label
    right after the app is shown for the app as folded; an app folded into
    `other` shows none of its own (its versions are `other`)."""
    out: Tally = {}
    for key, value in tally.items():
        dims = labels.get(_family_name(key[0]))
        if dims is None:
            continue
        values = list(key[1:])
        for i, dim in enumerate(dims):
            if dim in shown and values[i] not in shown[dim]:
                values[i] = OTHER
        if versions is not None and dims[1:2] == _VERSION and (
                values[0] != key[1] or values[1] not in versions.get(values[0], ())):
            values[1] = OTHER
        folded = (key[0], *values)
        out[folded] = out.get(folded, 0) + value
    return out


def derived(windows: Mapping[str, Tally]) -> Tally:
    """Ratios and source concentration per window, from windows whose sources are unfolded."""
    out: Tally = {}
    for window, tally in windows.items():
        by_source: dict[str, float] = defaultdict(float)
        uncalibrated: dict[str, dict[str, float]] = defaultdict(dict)
        for key, value in tally.items():
            if key[0] == UNCALIBRATED.name:
                uncalibrated[key[1]][key[2]] = value
        for key, value in tally.items():
            name = key[0]
            if name == RETRIEVALS.name and value:
                app = key[1]
                out[(ZERO_RATIO.name, app, window)] = tally.get((ZERO_RESULTS.name, app), 0) / value
                calibrated_results = tally.get((CALIBRATED.name, app), 0)
                if calibrated_results:
                    out[(ESTIMATED_PRECISION.name, app, window)] = (
                        tally.get((ESTIMATED_RELEVANT.name, app), 0) / calibrated_results)
                status = calibrated.status(calibrated_results, uncalibrated.get(app, {}))
                out[(CALIBRATION_STATUS.name, app, window, status)] = 1
            elif name == CITABLE.name and value:
                out[(CITATION_RATIO.name, key[1], window)] = tally.get((CITED.name, key[1]), 0) / value
            elif name == TERMS.name and value:
                out[(NEW_TERM_RATIO.name, key[1], window)] = tally.get((NEW_TERMS.name, key[1]), 0) / value
            elif name == ADMITTED_RESULTS.name:
                by_source[key[2]] += value
        if by_source:
            out[(SOURCE_HHI.name, window)], out[(TOP_SOURCE.name, window)] = concentration(by_source)
    return out


class Exposition:
    """Builds snapshots, remembering which label values this process has shown."""

    def __init__(self, config: CoreConfig, top_n: int):
        self.config = config
        self.top_n = top_n
        self.shown: dict[str, frozenset[str]] = {}
        self.versions: dict[str, frozenset[str]] | None = {} if config.by_pipeline_version else None  # per app
        self.forgotten: float = 0  # events of the versions whose counter series ended
        self.exposed: Tally = {}  # the counters' keys of the versions shown, as the last snapshot showed them
        self.labels: Labels = {f.name: config.labels_of(f) for f in FAMILIES}
        self.unsplit: Labels = {f.name: f.labels for f in FAMILIES}

    def snapshot(self, counters: Tally, windows: Mapping[str, Tally], now: float,
                 exemplars: dict[Key, tuple[str, float]] | None = None, health: Health = Health(),
                 live: Tally | None = None) -> Snapshot:
        """Split by pipeline version, `live` is what the partitions counted in
        their last `pipeline_version_idle_seconds` of event time (`state.recent`),
        and `counters` and `exemplars` (the caller's, which only ever grow) keep
        the keys of the versions shown only (`_forget`)."""
        # Rank by this process's counts and the longest window, so that values
        # restored from a checkpoint keep their names after a restart.
        longest = max(self.config.windows, key=lambda window: window[1])[0]
        labels = self.labels
        volume = total([counters, windows.get(longest, {})])
        apps = self.shown.get("app", frozenset())  # named by the last snapshot
        self.shown = shown_values(volume, self.shown, self.top_n, labels)
        versions = self.versions
        if versions is not None:
            versions = versions_shown(volume, live or {}, versions, self.config.pipeline_versions_named)
            self._forget(counters, exemplars or {}, versions, apps)
            self.versions = versions
            self.exposed = of_versions(counters, versions)
        folded = fold(counters, self.shown, labels, versions)
        last = health.last_checkpoint
        since = health.unreachable_since
        return Snapshot(
            counters=folded,
            windows={name: fold(tally, self.shown, labels, versions) for name, tally in windows.items()},
            # Per-app ratios over the apps shown (the rest as one `other`), so that every app-labelled
            # family shows at most top_n apps whatever each partition's label set kept; sources stay
            # unfolded, since concentration is computed over all of them; pipeline versions summed.
            gauges=derived({name: fold(conform(tally, False), {"app": self.shown["app"]}, self.unsplit)
                            for name, tally in windows.items()}),
            exemplars={k: v for k, v in (exemplars or {}).items() if k[0] in EXEMPLAR_FAMILIES},
            leads=tuple(sorted({k[1:] for k in folded if k[0] == RETRIEVALS.name})),
            processed=self.forgotten + sum(v for k, v in counters.items() if k[0] == RETRIEVALS.name),
            rejected={reason: health.rejected.get(reason, 0) for reason in REASONS},
            health=health,
            checkpoint_age=None if last is None else max(0.0, now - last),
            unreachable_seconds=0.0 if since is None else max(0.0, now - since),
        )


    def _forget(self, counters: Tally, exemplars: dict[Key, tuple[str, float]], versions: Shown,
                apps: frozenset[str]) -> None:
        """Keep in the process's counters only the versions shown, so that `other`
        never goes down: one not shown moves its keys into `other`, where they
        were folded already; one that loses its own series loses its keys, the
        series ending at what the last snapshot showed, and only what it counted
        since moves into `other`. All of it moved there would count its events
        twice: `increase()` would read them as a burst of traffic."""
        before = self.versions or {}
        for app, values in _by_app_version(counters).items():
            for version in values:
                if version == OTHER or version in versions.get(app, ()):
                    continue
                if app in apps and version in before.get(app, ()):
                    self.forgotten += self.exposed.get((RETRIEVALS.name, app, version), 0)
                    end_series(counters, app, version, self.exposed)
                else:
                    relabel(counters, app, version, OTHER)
                for family in EXEMPLAR_FAMILIES:
                    exemplars.pop((family, app, version), None)


def _family_name(key_name: str) -> str:
    for suffix in _SUFFIXES:
        if key_name.endswith(suffix):
            return key_name[: -len(suffix)]
    return key_name
