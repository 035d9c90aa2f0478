"""The live release gate in a real agent on a real broker: two versions' events in, the verdict and
figures on /metrics from the periodic evaluation, and `ragdrift compare --live` over the same store."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.demo.process import wait_until
from tests import gate_traffic as traffic
from tests.agentctl import AgentProcess, agent_config, new_port, produce
from tests.test_cli import run

pytestmark = pytest.mark.broker


def test_a_leaking_canary_fails_on_metrics_and_in_compare_live(broker, make_topic, group_id, tmp_path, capsys):
    topic, dlq = make_topic(3, "retrievals"), make_topic(1, "dlq")
    config = agent_config(broker.bootstrap, topic, dlq, group_id, f"sqlite:///{tmp_path}/state.db", new_port())
    # the generated days lie in November 2026: a window wide enough to hold them whatever today is
    config["live_gate"] = {"enabled": True, "stable": traffic.STABLE, "candidate": traffic.CANDIDATE,
                           "window_days": 3650, "retention_days": 3650, "refresh_seconds": 0.5}
    lines = traffic.lines("leak")
    leaks: Counter[str] = Counter()
    for line in lines:
        event = decode(line).event
        if event.pipeline.version == traffic.CANDIDATE and facts_of(event).unauthorized:
            leaks[event.app] += 1
    agent = AgentProcess(config).start()
    try:
        produce(broker.bootstrap, topic, lines)
        wait_until(lambda: agent.value("ragdrift_events_total") >= len(lines), 90, 0.2, "all events processed")

        def every_leak_counted() -> bool:
            return all(agent.value("ragdrift_live_gate_hard_failures", app=app, gate="unauthorized") == n
                       for app, n in leaks.items())

        wait_until(every_leak_counted, 60, 0.2, "the stored rows of every checkpoint evaluated")
        for app in leaks:
            pair = {"app": app, "stable": traffic.STABLE, "candidate": traffic.CANDIDATE}
            assert agent.value("ragdrift_live_gate_verdict", verdict="fail", **pair) == 1
            assert agent.value("ragdrift_live_gate_verdict", verdict="pass", **pair) == 0
            assert agent.value("ragdrift_live_gate_material", metric="top1_score", **pair) > 0
            assert agent.value("ragdrift_live_gate_events", app=app, pipeline_version=traffic.STABLE) > 0
        assert agent.value("ragdrift_live_gate_last_evaluation_timestamp_seconds") > 0
        status, out, err = run(capsys, "compare", "--live", "--pipeline", traffic.STABLE, "--pipeline",
                               traffic.CANDIDATE, "--config", str(agent.config_path), "--format", "json")
        assert status == 1, err
        report = json.loads(out)
        gate = next(row for row in report["hardGates"] if row["gate"] == "unauthorized")
        assert report["verdict"] == "fail" and gate["candidate"] == sum(leaks.values())
        assert report["versions"]["b"]["events"] == len(lines) // 2
    finally:
        agent.stop()
