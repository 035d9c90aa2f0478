"""The Prometheus collector over snapshots of real partition states, and the
metrics server (text, OpenMetrics, health, readiness, TLS)."""

from __future__ import annotations

import dataclasses
import re
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections import defaultdict
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest as text_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from agent import synth
from agent.core.config import CoreConfig
from agent.core.families import FAMILIES
from agent.core.snapshot import Exposition, Health
from agent.core.state import PartitionState, recent
from agent.core.tally import Counter, Histogram, add, total
from agent.io.prometheus.collectors import HealthCollector, Latest, RetrievalCollector
from agent.io.prometheus.endpoint import MetricsServer
from tests.core.test_pipelines import DAY, T0, doc, releases

APPS = ("docs-search", "hr-assistant", "support-bot")
REASONS = ("invalid_json", "invalid_field", "unsupported_schema", "too_large", "pii_suspected")
CONFIG = CoreConfig(
    buckets={"score": (0.0, 0.25, 0.5, 0.75, 1.0)},
    score_buckets_by_app={"docs-search": (0.0, 5.0, 10.0, 20.0, 40.0)},  # BM25 scale
)
TRACE = "0af7651916cd43dd8448eb211c80319c"


def states(config: CoreConfig, incidents=("leak@2", "stale@4", "new-terms@0")) -> list[PartitionState]:
    """Two partitions of about 20 minutes of traffic each, with incidents."""
    out = []
    for seed in (1, 2):
        state = PartitionState(config)
        lines = synth.generate(600, seed, rate=0.5, incidents=[synth.parse_incident(i) for i in incidents])
        for line in lines:
            state.process(line)
        out.append(state)
    return out


def snapshot_of(parts: list[PartitionState], config: CoreConfig) -> SimpleNamespace:
    """What the agent would hand the core: counters and windows, not yet folded."""
    now = max(p.windows.watermark for p in parts)  # event time, not the wall clock
    windows = {name: total(p.windows.window(seconds, now) for p in parts) for name, seconds in config.windows}
    return SimpleNamespace(counters=total(p.totals() for p in parts), windows=windows)


class Harness:
    """The agent's side of the exposition: the core builds, the collectors render."""

    def __init__(self, config: CoreConfig, top_n: int, clock):
        self.exposition = Exposition(config, top_n)
        self.latest = Latest()
        self.clock = clock

    def publish(self, counters=None, windows=None, exemplars=None, live=None, **health) -> None:
        snapshot = self.exposition.snapshot(counters or {}, windows or {}, self.clock(), exemplars, Health(**health),
                                            live)
        self.latest.publish(snapshot)


def collector(config: CoreConfig = CONFIG, top_n: int = 50, clock=lambda: 1000.0) -> tuple[Harness, CollectorRegistry]:
    c = Harness(config, top_n, clock)
    registry = CollectorRegistry()
    registry.register(RetrievalCollector(config, c.latest))
    registry.register(HealthCollector(c.latest))
    return c, registry


def samples(registry: CollectorRegistry) -> list:
    return [s for family in registry.collect() for s in family.samples]


def by_key(registry: CollectorRegistry) -> dict[tuple[str, frozenset], float]:
    """One scrape as {(name, labels): value}, for many lookups."""
    return {(s.name, frozenset(s.labels.items())): s.value for s in samples(registry)}


@pytest.fixture(scope="module")
def published():
    parts = states(CONFIG)
    snap = snapshot_of(parts, CONFIG)
    c, registry = collector()
    c.publish(snap.counters, snap.windows)
    return snap, registry


# -- counters and histograms ----------------------------------------------------------


def test_counters_equal_the_tally(published):
    snap, registry = published
    checked = 0
    for family in FAMILIES:
        if not isinstance(family, Counter):
            continue
        for key, value in snap.counters.items():
            if key[0] == family.name:
                labels = dict(zip(family.labels, key[1:]))
                assert registry.get_sample_value(f"ragdrift_{family.name}_total", labels) == value, key
                checked += 1
    assert checked > 50
    # The incidents make these non-zero, so the loop above covered them.
    for name in ("unauthorized_results", "stale_results", "query_new_terms"):
        assert registry.get_sample_value(f"ragdrift_{name}_total", {"app": "hr-assistant"}) > 0, name
    assert registry.get_sample_value("ragdrift_unknown_fields_total") > 0


def test_counters_without_labels_are_exported_at_zero(published):
    # Prometheus instrumentation practice: a counter without labels exists
    # from the first scrape, so `rate()` and alerts read 0, not "no data".
    snap, registry = published
    assert not any(k[0] == "late_events" for k in snap.counters)  # no late event in this traffic
    assert registry.get_sample_value("ragdrift_late_events_total") == 0


def test_every_counter_series_comes_from_the_tally_or_is_zero_filled(published):
    snap, registry = published
    counters = {f.name: f for f in FAMILIES if isinstance(f, Counter)}
    for s in samples(registry):
        name = s.name.removeprefix("ragdrift_").removesuffix("_total")
        if name not in counters or not s.name.endswith("_total"):
            continue
        key = (name, *(s.labels[label] for label in counters[name].labels))
        assert s.value == snap.counters.get(key, 0), key
        if key not in snap.counters:
            assert counters[name].labels in (("app",), ()) and s.value == 0, key


def test_app_counters_are_zero_filled_for_apps_with_traffic():
    parts = states(CONFIG, incidents=())
    snap = snapshot_of(parts, CONFIG)
    c, registry = collector()
    c.publish(snap.counters, snap.windows)
    apps = {k[1] for k in snap.counters if k[0] == "retrievals"}
    assert apps == set(APPS)
    zero_filled = 0
    for family in FAMILIES:
        if isinstance(family, Counter) and family.labels == ("app",):
            for app in apps:
                value = registry.get_sample_value(f"ragdrift_{family.name}_total", {"app": app})
                assert value == snap.counters.get((family.name, app), 0), (family.name, app)
                zero_filled += (family.name, app) not in snap.counters
    assert zero_filled > 0  # clean traffic: some app has no unauthorized results, say
    # An app without traffic gets no series.
    assert registry.get_sample_value("ragdrift_retrievals_total", {"app": "no-such-app"}) is None


def _tally_histogram(counters, name: str, app: str) -> tuple[dict[str, float], float, float]:
    buckets = {k[2]: v for k, v in counters.items() if k[0] == f"{name}_bucket" and k[1] == app}
    return buckets, counters.get((f"{name}_count", app), 0), counters.get((f"{name}_sum", app), 0)


def test_histograms_are_cumulative_with_inf_equal_to_count(published):
    snap, registry = published
    checked = 0
    for family in FAMILIES:
        if not isinstance(family, Histogram):
            continue
        for app in APPS:
            raw, count, total_ = _tally_histogram(snap.counters, family.name, app)
            if not count:
                continue
            series = sorted(
                ((s.labels["le"], s.value) for s in samples(registry)
                 if s.name == f"ragdrift_{family.name}_bucket" and s.labels["app"] == app),
                key=lambda pair: float(pair[0]),
            )
            values = [v for _, v in series]
            assert values == sorted(values), family.name  # cumulative: never decreasing
            assert series[-1] == ("+Inf", count)
            for le, value in series:  # each bucket counts every observation at or below it
                assert value == sum(v for bound, v in raw.items() if float(bound) <= float(le))
            assert registry.get_sample_value(f"ragdrift_{family.name}_count", {"app": app}) == count
            assert registry.get_sample_value(f"ragdrift_{family.name}_sum", {"app": app}) == pytest.approx(total_)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("family", ["top1_score", "admitted_score"])
def test_score_histograms_take_their_buckets_per_app_from_config(published, family):
    _, registry = published
    for app in APPS:
        les = {s.labels["le"] for s in samples(registry) if s.name == f"ragdrift_{family}_bucket" and s.labels["app"] == app}
        assert les == set(CONFIG.buckets_for("score", app).labels)
    assert CONFIG.buckets_for("score", "docs-search").labels == ("0.0", "5.0", "10.0", "20.0", "40.0", "+Inf")
    assert CONFIG.buckets_for("score", "support-bot").labels == ("0.0", "0.25", "0.5", "0.75", "1.0", "+Inf")


# -- rolling windows ------------------------------------------------------------------


def test_window_gauges_per_window(published):
    snap, registry = published
    assert set(snap.windows) == {"5m", "1h", "24h"}
    five = sum(v for k, v in snap.windows["5m"].items() if k[0] == "retrievals")
    hour = sum(v for k, v in snap.windows["1h"].items() if k[0] == "retrievals")
    assert 0 < five < hour  # the windows really hold different events
    scrape = by_key(registry)
    checked = 0
    for window, tally in snap.windows.items():
        for family in FAMILIES:
            if isinstance(family, Counter):
                names, labels = ([family.name], family.labels) if family.windowed else ([], ())
            else:
                names, labels = [f"{family.name}_sum", f"{family.name}_count"], family.labels
            for name in names:
                for key, value in tally.items():
                    if key[0] == name:
                        found = scrape.get(
                            (f"ragdrift_window_{name}", frozenset({**dict(zip(labels, key[1:])), "window": window}.items())))
                        assert found == pytest.approx(value), (window, key)
                        checked += 1
    assert checked > 100
    names = {name for name, _ in scrape}
    assert "ragdrift_window_late_events" not in names and "ragdrift_window_unknown_fields" not in names


def test_window_ratios(published):
    snap, registry = published
    for window, tally in snap.windows.items():
        by_source: dict[str, float] = defaultdict(float)
        for key, value in tally.items():
            if key[0] == "admitted_results":
                by_source[key[2]] += value
        admitted = sum(by_source.values())
        shares = [v / admitted for v in by_source.values()]
        assert registry.get_sample_value("ragdrift_window_source_hhi_ratio", {"window": window}) == pytest.approx(
            sum(s * s for s in shares))
        assert registry.get_sample_value("ragdrift_window_top_source_share_ratio", {"window": window}) == pytest.approx(
            max(shares))
        for app in APPS:
            events = tally.get(("retrievals", app), 0)
            zero = tally.get(("zero_result_retrievals", app), 0)
            ratio = registry.get_sample_value("ragdrift_window_zero_result_ratio", {"app": app, "window": window})
            assert ratio == (pytest.approx(zero / events) if events else None)
            terms = tally.get(("query_terms", app), 0)
            new = tally.get(("query_new_terms", app), 0)
            ratio = registry.get_sample_value("ragdrift_window_new_term_ratio", {"app": app, "window": window})
            assert ratio == (pytest.approx(new / terms) if terms else None)
    assert any(v for k, v in snap.windows["1h"].items() if k[0] == "query_new_terms")


# -- bookkeeping and health -------------------------------------------------------------


def test_dead_letters_by_reason_are_all_present_and_zero_filled(published):
    snap, _ = published
    c, registry = collector()
    c.publish(counters=snap.counters, rejected={"invalid_json": 2, "pii_suspected": 1})
    for reason in REASONS:
        expected = {"invalid_json": 2, "pii_suspected": 1}.get(reason, 0)
        assert registry.get_sample_value("ragdrift_dead_letters_total", {"reason": reason}) == expected
    processed = sum(v for k, v in snap.counters.items() if k[0] == "retrievals")
    assert registry.get_sample_value("ragdrift_events_total", {"outcome": "processed"}) == processed == 1200
    assert registry.get_sample_value("ragdrift_events_total", {"outcome": "rejected"}) == 3


def test_health_families():
    c, registry = collector(clock=lambda: 1000.0)
    c.publish(assigned=3, lag={("retrievals", 0): 5, ("retrievals", 2): 0}, last_checkpoint=990.0,
                       checkpoints={"ok": 7, "error": 1})
    assert registry.get_sample_value("ragdrift_assigned_partitions") == 3
    assert registry.get_sample_value("ragdrift_consumer_lag_messages", {"topic": "retrievals", "partition": "0"}) == 5
    assert registry.get_sample_value("ragdrift_consumer_lag_messages", {"topic": "retrievals", "partition": "2"}) == 0
    assert registry.get_sample_value("ragdrift_last_checkpoint_timestamp_seconds") == 990.0
    assert registry.get_sample_value("ragdrift_checkpoint_age_seconds") == 10.0
    assert registry.get_sample_value("ragdrift_checkpoints_total", {"outcome": "ok"}) == 7
    assert registry.get_sample_value("ragdrift_checkpoints_total", {"outcome": "error"}) == 1
    info = [s for s in samples(registry) if s.name == "ragdrift_build_info"]
    assert len(info) == 1 and info[0].value == 1 and set(info[0].labels) == {"version", "python"}


# -- bounded labels: top N plus "other", sticky --------------------------------------------


def _apps_tally(volumes: dict[str, int]) -> dict:
    out = {}
    for app, n in volumes.items():
        out[("retrievals", app)] = n
        out[("results", app)] = 10 * n
    return out


def _series(registry, name: str) -> dict[str, float]:
    return {s.labels["app"]: s.value for s in samples(registry) if s.name == name}


def test_values_beyond_the_top_n_fold_into_other():
    c, registry = collector(CoreConfig(), top_n=3)
    c.publish(counters=_apps_tally({"a": 40, "b": 30, "c": 20, "d": 5, "e": 1}))
    shown = _series(registry, "ragdrift_retrievals_total")
    assert sum(shown.values()) == 96  # nothing lost in folding
    assert "other" in shown
    named = set(shown) - {"other"}
    # The largest values are the ones shown (at most N); everything else is in "other".
    assert 1 <= len(named) <= 3 and named == set("abcde"[: len(named)])
    assert shown["other"] == 96 - sum(shown[v] for v in named)
    assert _series(registry, "ragdrift_results_total")["other"] == 10 * shown["other"]  # every family folds alike


def test_top_n_shows_n_values_besides_other():
    # metrics.md: "the top N values seen (default 50) with the rest folded into `other`".
    c, registry = collector(CoreConfig(), top_n=2)
    c.publish(counters=_apps_tally({"a": 10, "b": 5, "c": 1}))
    assert _series(registry, "ragdrift_retrievals_total") == {"a": 10, "b": 5, "other": 1}


def test_a_value_once_shown_keeps_its_own_series():
    c, registry = collector(CoreConfig(), top_n=2)
    c.publish(counters=_apps_tally({"a": 10, "b": 1}))
    assert _series(registry, "ragdrift_retrievals_total")["a"] == 10
    # "c" now outgrows "a": "a" still keeps its series, so its counter never
    # jumps into "other" and back (which would read as a reset).
    c.publish(counters=_apps_tally({"a": 11, "b": 1, "c": 500}))
    shown = _series(registry, "ragdrift_retrievals_total")
    assert shown["a"] == 11
    assert "c" not in shown and shown["other"] >= 500
    assert sum(shown.values()) == 512


# -- exemplars and stale series ----------------------------------------------------------------


def test_exemplars_in_openmetrics_for_unauthorized_and_stale_counters(published):
    snap, _ = published
    c, registry = collector()
    exemplars = {
        ("unauthorized_results", "hr-assistant"): (TRACE, 1767225600.0),
        ("stale_results", "support-bot"): ("1" * 32, 1767225601.0),
        ("retrievals", "hr-assistant"): ("2" * 32, 1767225602.0),  # not an exemplar family
    }
    c.publish(counters=snap.counters, exemplars=exemplars)
    text = openmetrics_latest(registry).decode()
    line = next(x for x in text.splitlines() if x.startswith('ragdrift_unauthorized_results_total{app="hr-assistant"}'))
    assert f'# {{trace_id="{TRACE}"}} 1.0 1767225600' in line
    line = next(x for x in text.splitlines() if x.startswith('ragdrift_stale_results_total{app="support-bot"}'))
    assert f'trace_id="{"1" * 32}"' in line
    assert "2" * 32 not in text
    # The OpenMetrics output is valid as a whole and the exemplar parses back.
    found = {}
    for family in parse_openmetrics(text):
        for s in family.samples:
            if s.exemplar is not None:
                found[(s.name, s.labels.get("app"))] = s.exemplar.labels["trace_id"]
    assert found == {("ragdrift_unauthorized_results_total", "hr-assistant"): TRACE,
                     ("ragdrift_stale_results_total", "support-bot"): "1" * 32}
    # The classic text format carries no exemplars.
    assert TRACE not in text_latest(registry).decode()


def test_no_series_outlives_the_snapshot_that_held_it(published):
    snap, _ = published
    c, registry = collector(clock=lambda: 1000.0)
    c.publish(counters=snap.counters, windows=snap.windows, rejected={"invalid_json": 1},
                       exemplars={("unauthorized_results", "hr-assistant"): (TRACE, 1.0)},
                       lag={("retrievals", 0): 3}, assigned=1, last_checkpoint=999.0)
    before = {s.name for s in samples(registry)}
    assert {"ragdrift_window_retrievals", "ragdrift_consumer_lag_messages", "ragdrift_checkpoint_age_seconds"} <= before
    assert any(s.labels.get("app") == "docs-search" for s in samples(registry))

    # The next snapshot: only hr-assistant traffic (say, a rebalance took the
    # rest), no windows, no lag, no checkpoint yet, no exemplar.
    only = {k: v for k, v in snap.counters.items() if k[0] in ("retrievals", "results") and k[1] == "hr-assistant"}
    c.publish(counters=only)
    after = samples(registry)
    assert not [s for s in after if s.labels.get("app") in ("docs-search", "support-bot")]
    assert not [s for s in after if s.name.startswith("ragdrift_window_")]
    assert not [s for s in after if s.name in ("ragdrift_consumer_lag_messages", "ragdrift_checkpoint_age_seconds",
                                               "ragdrift_last_checkpoint_timestamp_seconds")]
    assert registry.get_sample_value("ragdrift_unauthorized_results_total", {"app": "hr-assistant"}) == 0
    assert TRACE not in openmetrics_latest(registry).decode()
    assert registry.get_sample_value("ragdrift_dead_letters_total", {"reason": "invalid_json"}) == 0


# -- the metrics server ---------------------------------------------------------------------------


class Checks:
    """Health and readiness answers a test can flip."""

    def __init__(self):
        self.healthy, self.ready_ = True, True

    def health(self):
        return self.healthy, "polled 0.1s ago" if self.healthy else "stalled for 90s"

    def ready(self):
        return self.ready_, "3 partitions, lag 0" if self.ready_ else "no partitions assigned"


@pytest.fixture
def served(published):
    snap, _ = published
    c, registry = collector()
    c.publish(counters=snap.counters, exemplars={("unauthorized_results", "hr-assistant"): (TRACE, 1.0)})
    checks = Checks()
    server = MetricsServer(registry, "127.0.0.1", 0, health=checks.health, ready=checks.ready).start()
    yield server, checks
    server.stop()


def get(url: str, accept: str | None = None, context=None):
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status, response.headers.get("Content-Type"), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read().decode()


def test_metrics_in_text_format(served):
    server, _ = served
    status, content_type, body = get(f"http://127.0.0.1:{server.port}/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert 'ragdrift_events_total{outcome="processed"} 1200.0' in body
    assert TRACE not in body and "# EOF" not in body


def test_metrics_in_openmetrics_when_asked(served):
    server, _ = served
    status, content_type, body = get(f"http://127.0.0.1:{server.port}/metrics",
                                     accept="application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    assert body.endswith("# EOF\n")
    assert f'trace_id="{TRACE}"' in body


def test_healthz_and_readyz_follow_the_callables(served):
    server, checks = served
    base = f"http://127.0.0.1:{server.port}"
    assert get(f"{base}/healthz")[0::2] == (200, "polled 0.1s ago\n")
    assert get(f"{base}/readyz")[0::2] == (200, "3 partitions, lag 0\n")
    checks.healthy, checks.ready_ = False, False
    assert get(f"{base}/healthz")[0::2] == (503, "stalled for 90s\n")
    assert get(f"{base}/readyz")[0::2] == (503, "no partitions assigned\n")
    checks.ready_ = True
    assert get(f"{base}/readyz")[0] == 200


@pytest.fixture
def certificate(tmp_path):
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_server(published, certificate):
    snap, _ = published
    c, registry = collector()
    c.publish(counters=snap.counters)
    checks = Checks()
    cert, key = certificate
    server = MetricsServer(registry, "127.0.0.1", 0, health=checks.health, ready=checks.ready, cert_file=str(cert),
                           key_file=str(key)).start()
    yield server, ssl.create_default_context(cafile=str(cert))
    server.stop()


def test_tls(tls_server):
    server, context = tls_server
    status, _, body = get(f"https://127.0.0.1:{server.port}/metrics", context=context)
    assert status == 200 and "ragdrift_retrievals_total" in body
    assert get(f"https://127.0.0.1:{server.port}/healthz", context=context)[0] == 200
    # Plain HTTP on the TLS port gets no metrics, and the server keeps serving.
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
    assert get(f"https://127.0.0.1:{server.port}/metrics", context=context)[0] == 200


def test_tls_an_idle_connection_does_not_block_other_scrapes(tls_server):
    # A TCP connection that never starts its handshake (a load-balancer or
    # kubelet TCP probe, a port scanner) must not stall /metrics and /healthz.
    server, context = tls_server
    with socket.create_connection(("127.0.0.1", server.port)):
        assert get(f"https://127.0.0.1:{server.port}/healthz", context=context)[0] == 200


# -- split by pipeline version ------------------------------------------------------------------

SPLIT = dataclasses.replace(CONFIG, by_pipeline_version=True)
CANARY = "hr-rag-2026.01.0-canary"  # the synthetic hr-assistant's canary, in traffic during score-drift


@pytest.fixture(scope="module")
def split_published():
    """The same traffic with and without the split, each published: a canary beside a stable pipeline."""
    incidents = ("leak@2", "stale@4", "score-drift@0")
    out = []
    for config in (SPLIT, CONFIG):
        snap = snapshot_of(states(config, incidents), config)
        c, registry = collector(config)
        c.publish(snap.counters, snap.windows)
        out += [snap, registry]
    return out


def _by_app(registry: CollectorRegistry) -> dict[tuple[str, frozenset], float]:
    """One scrape with the pipeline version summed away."""
    out: dict[tuple[str, frozenset], float] = defaultdict(float)
    for s in samples(registry):
        out[(s.name, frozenset((k, v) for k, v in s.labels.items() if k != "pipeline_version"))] += s.value
    return out


def test_metrics_carry_the_pipeline_version_after_the_app(split_published):
    snap, registry, _, _ = split_published
    checks = Checks()
    server = MetricsServer(registry, "127.0.0.1", 0, health=checks.health, ready=checks.ready).start()
    try:
        status, _, body = get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        server.stop()
    assert status == 200
    canary = snap.counters[("retrievals", "hr-assistant", CANARY)]
    stable = snap.counters[("retrievals", "hr-assistant", "hr-rag-2025.12.3")]
    assert canary > 0 and stable > canary
    lines = set(body.splitlines())
    assert f'ragdrift_retrievals_total{{app="hr-assistant",pipeline_version="{CANARY}"}} {float(canary)}' in lines
    assert any(x.startswith(f'ragdrift_top1_score_bucket{{app="hr-assistant",le="0.5",pipeline_version="{CANARY}"}}')
               for x in lines)  # the text format sorts the labels
    assert any(x.startswith('ragdrift_admitted_results_total{app="hr-assistant",pipeline_version="hr-rag-2025.12.3",'
                            'source="') for x in lines)
    assert any(x.startswith(f'ragdrift_window_retrievals{{app="hr-assistant",pipeline_version="{CANARY}",window="1h"}}')
               for x in lines)
    # Families without an app label, and the per-app ratios, are not split.
    for name in ("ragdrift_query_language_retrievals_total{", "ragdrift_filter_outcomes_total{",
                 "ragdrift_window_zero_result_ratio{", "ragdrift_window_source_hhi_ratio{"):
        found = [x for x in lines if x.startswith(name)]
        assert found and not any("pipeline_version" in x for x in found), name
    # Histograms keep the app's score buckets.
    les = {s.labels["le"] for s in samples(registry)
           if s.name == "ragdrift_top1_score_bucket" and s.labels["app"] == "docs-search"}
    assert les == set(SPLIT.buckets_for("score", "docs-search").labels)


def test_the_split_sums_to_the_unsplit_series(split_published):
    _, split_registry, _, registry = split_published
    summed, plain = _by_app(split_registry), by_key(registry)
    assert summed.keys() == plain.keys()
    for key, value in plain.items():
        assert summed[key] == pytest.approx(value), key


def test_app_counters_are_zero_filled_per_app_and_pipeline_version(split_published):
    snap, registry, _, _ = split_published
    leads = {k[1:] for k in snap.counters if k[0] == "retrievals"}
    assert ("hr-assistant", CANARY) in leads and len(leads) == 5  # three apps, two of them with a canary
    zero_filled = 0
    for family in FAMILIES:
        if isinstance(family, Counter) and family.labels == ("app",):
            for app, version in leads:
                value = registry.get_sample_value(f"ragdrift_{family.name}_total",
                                                  {"app": app, "pipeline_version": version})
                assert value == snap.counters.get((family.name, app, version), 0), (family.name, app, version)
                zero_filled += (family.name, app, version) not in snap.counters
    assert zero_filled > 0
    assert registry.get_sample_value("ragdrift_retrievals_total", {"app": "docs-search", "pipeline_version": CANARY}) \
        is None  # a pair without traffic gets no series


def test_pipeline_versions_beyond_the_bound_fold_into_other():
    c, registry = collector(dataclasses.replace(SPLIT, max_pipeline_versions=2))
    volumes = {"v1": 40, "v2": 30, "v3": 5, "none": 2}
    c.publish(counters={("retrievals", "app", version): n for version, n in volumes.items()})
    shown = {s.labels["pipeline_version"]: s.value for s in samples(registry) if s.name == "ragdrift_retrievals_total"}
    assert shown == {"v1": 40, "v2": 30, "none": 2, "other": 5}  # `none` besides the bound, as `other`


def retrievals_by_version(registry) -> dict[tuple[str, str], float]:
    return {(s.labels["app"], s.labels["pipeline_version"]): s.value for s in samples(registry)
            if s.name == "ragdrift_retrievals_total"}


def test_each_app_shows_its_own_top_versions():
    # Ranked over all apps, the two largest (v1, v2 of search) would leave the bot's canary in `other`.
    c, registry = collector(dataclasses.replace(SPLIT, max_pipeline_versions=2))
    volumes = {("search", "v1"): 1000, ("search", "v2"): 900, ("search", "v3"): 800,
               ("bot", "stable"): 20, ("bot", "canary"): 3}
    counters = {("retrievals", app, version): n for (app, version), n in volumes.items()}
    c.publish(counters=counters, windows={"24h": dict(counters)})
    assert retrievals_by_version(registry) == {("search", "v1"): 1000, ("search", "v2"): 900,
                                               ("search", "other"): 800, ("bot", "stable"): 20,
                                               ("bot", "canary"): 3}


def test_a_stopped_version_gives_its_place_to_a_started_one_and_its_series_ends():
    c, registry = collector(dataclasses.replace(SPLIT, max_pipeline_versions=2))
    counters = {("retrievals", "a", "v1"): 50, ("retrievals", "a", "v2"): 40}
    c.publish(counters=counters, live={("retrievals", "a", "v1"): 5, ("retrievals", "a", "v2"): 4})
    # v3 waits in `other` while both have events in the idle time; its keys move there for good.
    counters[("retrievals", "a", "v3")] = 100
    c.publish(counters=counters, live={("retrievals", "a", "v1"): 5, ("retrievals", "a", "v2"): 4,
                                       ("retrievals", "a", "v3"): 100})
    assert retrievals_by_version(registry) == {("a", "v1"): 50, ("a", "v2"): 40, ("a", "other"): 100}
    assert counters == {("retrievals", "a", "v1"): 50, ("retrievals", "a", "v2"): 40, ("retrievals", "a", "other"): 100}
    # v1 has stopped: v3 takes its place with what it counted since, `other` keeps what it had,
    # v1's series ends at the value last shown, its keys and exemplars gone (moved into `other`
    # they would count its 50 events a second time there).
    counters[("retrievals", "a", "v3")] = 10
    exemplars = {("unauthorized_results", "a", "v1"): (TRACE, 1.0), ("unauthorized_results", "a", "v3"): (TRACE, 2.0)}
    c.publish(counters=counters, live={("retrievals", "a", "v2"): 4, ("retrievals", "a", "v3"): 10},
              exemplars=exemplars)
    assert retrievals_by_version(registry) == {("a", "v2"): 40, ("a", "v3"): 10, ("a", "other"): 100}
    assert list(exemplars) == [("unauthorized_results", "a", "v3")]
    assert c.latest.snapshot.processed == 200  # v1's 50 still counted as processed
    # v2 has stopped, though it counted a late event since it was last shown: v4 takes its place,
    # v2's series ends at the 40 it showed, and the late event counts in `other`.
    counters[("retrievals", "a", "v2")] = 41
    counters[("retrievals", "a", "v4")] = 3
    c.publish(counters=counters, live={("retrievals", "a", "v3"): 10, ("retrievals", "a", "v4"): 3})
    assert retrievals_by_version(registry) == {("a", "v3"): 10, ("a", "v4"): 3, ("a", "other"): 101}
    assert counters == {("retrievals", "a", "v3"): 10, ("retrievals", "a", "v4"): 3, ("retrievals", "a", "other"): 101}
    assert c.latest.snapshot.processed == 204


def test_the_fifth_release_is_exported_under_its_own_name():
    # One release a day (tests/core/test_pipelines.py `releases`), published daily as the agent does:
    # at day 4 v1..v3 have stopped, so v5 counts, and is shown, as itself; one of the stopped versions
    # (of as many events, the last by name: v3) gives its place up and its series ends.
    config = dataclasses.replace(SPLIT, windows=(("24h", 86400),))
    state, counters = PartitionState(config), {}
    c, registry = collector(config)
    for raw in releases():
        state.process(raw)
        counters = total([counters, state.take_added()])
        now = state.windows.watermark
        c.publish(counters=counters, windows={"24h": state.windows.window(DAY, now)}, live=recent(config, [state]))
    assert now == T0 + 4 * DAY
    assert retrievals_by_version(registry) == {("alpha", "v1"): 2, ("alpha", "v2"): 2, ("alpha", "v4"): 2,
                                               ("alpha", "v5"): 1}


def test_forty_releases_over_two_days_keep_the_series_bounded_and_current_traffic_named():
    # Release k starts at k * 72 minutes and serves for 268 minutes: at most four versions serve at
    # once, and each has stopped 20 minutes (more than the 15 minutes of idle time) before the one
    # four releases on starts. Two partitions share the traffic; /metrics is rendered every ten
    # minutes of event time.
    config = SPLIT
    parts = [PartitionState(config), PartitionState(config)]
    c, registry = collector(config)
    counters, events, series, last = {}, 0, [], {}
    published = 0  # events when /metrics was last rendered
    for tick in range(2 * DAY // 120):
        t = T0 + 120 * tick
        serving = [k for k in range(40) if k * 4320 <= t - T0 < k * 4320 + 268 * 60]
        assert len(serving) <= 4
        for k in serving:
            state = parts[(tick + k) % 2]
            state.process(doc(events, f"r{k}", t=t), now=t)
            events += 1
            add(counters, state.take_added())
        if tick % 5:
            continue
        published = events
        windows = {name: total(p.windows.window(seconds, t) for p in parts) for name, seconds in config.windows}
        c.publish(counters=counters, windows=windows, live=recent(config, parts))
        text = text_latest(registry).decode()  # what a scrape reads: name{labels} value
        scrape = {name: float(value) for name, value in (x.rsplit(" ", 1) for x in text.splitlines() if x[0] != "#")}
        versions = set(re.findall(r'pipeline_version="([^"]*)"', text))
        assert len(versions - {"other"}) <= config.max_pipeline_versions
        assert {f"r{k}" for k in serving} <= versions, t  # current traffic is named, never `other`:
        assert not any('_total{' in name and 'pipeline_version="other"' in name for name in scrape)
        for name, value in scrape.items():
            assert value >= last.get(name, value) or "_total{" not in name, name  # counters never go down
        last = scrape
        series.append(len(scrape))
    assert events > 5000 and c.latest.snapshot.processed == published
    assert max(series[len(series) // 2:]) <= max(series[: len(series) // 2])  # the second day adds no series


def test_exemplars_name_the_pipeline_version(split_published):
    snap, _, _, _ = split_published
    c, registry = collector(SPLIT)
    c.publish(counters=snap.counters, exemplars={("unauthorized_results", "hr-assistant", "hr-rag-2025.12.3"): (TRACE, 1.0)})
    line = next(x for x in openmetrics_latest(registry).decode().splitlines()
                if x.startswith('ragdrift_unauthorized_results_total{app="hr-assistant",pipeline_version="hr-rag-2025.12.3"}'))
    assert TRACE in line
