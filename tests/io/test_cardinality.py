"""Many app names (a producer bug or an attack) stay within the bounded label set everywhere:
in the daily drift counts, the judgment strata and every exported family."""

from __future__ import annotations

from collections import defaultdict

import orjson
from prometheus_client import CollectorRegistry

from agent import synth
from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig
from agent.core.judgment import JudgmentConfig
from agent.core.labels import OTHER
from agent.core.snapshot import Exposition, Health
from agent.core.state import PartitionState
from agent.core.tally import total
from agent.io.prometheus.collectors import HealthCollector, Latest, RetrievalCollector

LIMIT, TOP_N = 20, 5


def _attack(seed: int, events: int = 400) -> list[bytes]:
    """Generated traffic whose every event names an app and a source of its own."""
    out = []
    for n, line in enumerate(synth.generate(events, seed, rate=0.5)):
        event = orjson.loads(line)
        event["app"] = f"app-{seed}-{n}"
        for result in event.get("results", ()):
            result["source"] = f"source-{seed}-{n}"
        out.append(orjson.dumps(event))
    return out


def _partitions() -> list[PartitionState]:
    config = CoreConfig(max_label_values=LIMIT)
    parts = []
    for seed in (1, 2, 3):  # three partitions, each keeping other apps by name
        state = PartitionState(config, judgment=JudgmentConfig(), drift=DriftConfig())
        for line in _attack(seed):
            state.process(line)
        parts.append(state)
    return parts


def test_drift_days_and_strata_fold_apps_into_the_label_set():
    for state in _partitions():
        kept = set(state.labels["app"]) | {OTHER}
        days = {app for _, app, _ in state.feature("drift").take()}
        strata = {c.stratum.split("|")[0] for c in state.feature("judgment").take()[0].added if "|" in c.stratum}
        assert OTHER in days and days <= kept and len(days) <= LIMIT + 1
        assert strata <= kept and len(strata) <= LIMIT + 1


def test_every_exported_family_shows_at_most_top_n_apps_and_other():
    parts = _partitions()
    config = parts[0].config
    now = max(p.windows.watermark for p in parts)
    windows = {name: total(p.windows.window(seconds, now) for p in parts) for name, seconds in config.windows}
    latest = Latest()
    latest.publish(Exposition(config, TOP_N).snapshot(total(p.totals() for p in parts), windows, now, None, Health()))
    registry = CollectorRegistry()
    registry.register(RetrievalCollector(config, latest))
    registry.register(HealthCollector(latest))
    apps = defaultdict(set)
    for family in registry.collect():
        for sample in family.samples:
            if "app" in sample.labels:
                apps[family.name].add(sample.labels["app"])
    assert {"window_zero_result_ratio", "window_new_term_ratio", "calibration_status"} <= {
        name.removeprefix("ragdrift_") for name in apps}
    too_many = {name: len(values) for name, values in apps.items() if len(values) > TOP_N + 1}
    assert not too_many
