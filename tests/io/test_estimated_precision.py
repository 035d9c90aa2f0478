"""The estimated precision of live traffic, the calibration status and the
citation rate, from real partition states through the core's snapshot to the
Prometheus collector (no Kafka: it would prove nothing here)."""

from __future__ import annotations

import orjson
import pytest

from agent.core.calibrated import Active, ServingRule, status
from agent.core.config import CoreConfig
from agent.core.judgments.calibration import ScoreFit
from agent.core.state import PartitionState
from tests.io.test_collectors import by_key, collector, snapshot_of

CONFIG = CoreConfig()
TS = "2026-11-25T12:00:00Z"
STEP = dict(x=(0.1, 0.2, 0.3, 0.4), y=(0.0, 0.5, 0.5, 1.0), relevant=500, brier=0.1)


def calibration(app: str, version: str | None, n: int = 1000, ece: float = 0.01, fitted_at: float = 1.0):
    return ScoreFit(app=app, pipeline_version=version, n=n, ece=ece, fitted_at=fitted_at, **STEP)


def event(n: int, app: str, version: str | None, scores: list[float], cutoff: int, **extra) -> bytes:
    doc = {
        "schema": "retrieval.v1", "event_id": f"e{n}", "ts": TS, "app": app, "query": {"id": f"q{n:07d}"},
        "principal": {"tenant": "t", "groups": []}, "cutoff_k": cutoff,
        "results": [{"chunk_id": f"c{r}", "parent_id": "p", "source": "s", "rank": r, "score": s}
                    for r, s in enumerate(scores, 1)],
        **({"pipeline": {"version": version}} if version else {}), **extra,
    }  # fmt: skip
    return orjson.dumps(doc)


GATE = ServingRule(max_ece=0.05, min_labels=300)
ACTIVE = Active([
    calibration("alpha", "v1"),
    calibration("alpha", "v1", ece=0.5, fitted_at=0.5),  # an older fit: the newest is in force
    calibration("beta", "v1", ece=0.08),
    calibration("gamma", None, n=100),
    calibration("delta", "v1"),
], GATE)
EVENTS = [
    event(1, "alpha", "v1", [0.4, 0.25, 0.1], 2, feedback={"cited": ["c1"]}),  # p 1 and 0.5; one of two cited
    event(2, "alpha", "v1", [0.35], 1),  # p 0.75; reports no citations
    event(3, "alpha", "v2", [0.4, 0.4], 2),  # another version: not calibrated, alpha still ok
    event(4, "beta", "v1", [0.4], 1),
    event(5, "gamma", None, [0.4], 1),
    event(6, "delta", "v2", [0.4, 0.3], 2, feedback={"cited": ["c9"]}),  # cites a chunk not admitted
    event(7, "omega", "v1", [0.4], 1),
    event(8, "delta", "v2", [], 1),  # nothing admitted: nothing to count
]


@pytest.fixture(scope="module")
def scrape():
    state = PartitionState(CONFIG)
    state.supply("calibration", calibrations=ACTIVE)
    for line in EVENTS:
        state.process(line)
    snap = snapshot_of([state], CONFIG)
    c, registry = collector(CONFIG, clock=lambda: state.windows.watermark)
    c.publish(snap.counters, snap.windows)
    return by_key(registry)


def value(scrape, name: str, **labels):
    return scrape.get((f"ragdrift_{name}", frozenset(labels.items())))


@pytest.mark.parametrize("window", ["5m", "1h", "24h"])
def test_the_estimated_precision_is_the_mean_calibrated_probability(scrape, window):
    assert value(scrape, "window_estimated_relevant_results", app="alpha", window=window) == 2.25
    assert value(scrape, "window_calibrated_results", app="alpha", window=window) == 3
    assert value(scrape, "estimated_precision", app="alpha", window=window) == pytest.approx(0.75)
    assert value(scrape, "calibration_status", app="alpha", window=window, status="ok") == 1
    assert value(scrape, "window_uncalibrated_results", app="alpha", reason="pipeline_changed", window=window) == 2


@pytest.mark.parametrize(("app", "status"), [("beta", "error_too_high"), ("gamma", "too_few_labels"),
                                             ("delta", "pipeline_changed"), ("omega", "none")])
def test_otherwise_nothing_is_estimated_and_the_status_says_why(scrape, app, status):
    assert value(scrape, "estimated_precision", app=app, window="1h") is None
    assert value(scrape, "window_calibrated_results", app=app, window="1h") is None
    statuses = {dict(labels)["status"] for (name, labels), v in scrape.items()
                if name == "ragdrift_calibration_status" and dict(labels)["app"] == app and dict(labels)["window"] == "1h"}
    assert statuses == {status}
    assert value(scrape, "calibration_status", app=app, window="1h", status=status) == 1


def test_the_counters_add_up_for_replicas(scrape):
    assert value(scrape, "estimated_relevant_results_total", app="alpha") == 2.25
    assert value(scrape, "calibrated_results_total", app="alpha") == 3
    assert value(scrape, "uncalibrated_results_total", app="beta", reason="error_too_high") == 1


def test_the_citation_rate_counts_events_that_report_citations(scrape):
    assert value(scrape, "window_cited_results", app="alpha", window="1h") == 1
    assert value(scrape, "window_citable_results", app="alpha", window="1h") == 2
    assert value(scrape, "window_citation_ratio", app="alpha", window="1h") == 0.5
    assert value(scrape, "window_citation_ratio", app="delta", window="1h") == 0.0
    assert value(scrape, "window_citation_ratio", app="beta", window="1h") is None


def test_without_calibrations_every_app_is_none_and_nothing_is_counted():
    state = PartitionState(CONFIG)
    for line in EVENTS:
        state.process(line)
    assert not [k for k in state.totals() if "calibrated" in k[0]]
    snap = snapshot_of([state], CONFIG)
    c, registry = collector(CONFIG, clock=lambda: state.windows.watermark)
    c.publish(snap.counters, snap.windows)
    scraped = by_key(registry)
    for app in ("alpha", "beta", "omega"):
        assert value(scraped, "calibration_status", app=app, window="5m", status="none") == 1


def test_a_state_restored_from_its_checkpoint_keeps_the_counts_not_the_calibrations():
    state = PartitionState(CONFIG)
    state.supply("calibration", calibrations=ACTIVE)
    state.process(EVENTS[0])
    restored = PartitionState.from_dict(CONFIG, orjson.loads(orjson.dumps(state.to_dict())))
    assert restored.context.calibrations is None
    assert restored.totals()[("calibrated_results", "alpha")] == 2


def test_the_gate_bounds_and_the_newest_fit():
    gate = ServingRule(max_ece=0.05, min_labels=300)
    active = Active([calibration("a", "v", n=300, ece=0.0499), calibration("b", "v", n=299),
                     calibration("c", "v", ece=0.05), calibration("d", "v", ece=None),
                     calibration("e", "v", fitted_at=2.0), calibration("e", "v", ece=0.9, fitted_at=3.0)], gate)
    assert {app: (v if isinstance(v, str) else "ok") for (app, _), v in active.by_pair.items()} == {
        "a": "ok", "b": "too_few_labels", "c": "error_too_high", "d": "too_few_labels", "e": "error_too_high"}
    assert not Active() and Active([calibration("a", "v")])


def test_the_status_of_a_window():
    assert status(1, {"pipeline_changed": 5}) == "ok"
    assert status(0, {"pipeline_changed": 5, "too_few_labels": 7}) == "too_few_labels"
    assert status(0, {"pipeline_changed": 5, "too_few_labels": 5}) == "too_few_labels"  # ties: the list's order
    assert status(0, {}) == "none"
