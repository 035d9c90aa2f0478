"""bench/families.py, the per-event function every peer of bench/peers.py calls, against the agent's own facts."""

import sys
from collections import Counter
from pathlib import Path

import orjson

from agent.core.decoder import decode
from agent.core.facts import facts_of
from agent.synth import INCIDENT_KINDS, ScheduledIncident, generate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import families  # bench/ is a directory of scripts, not a package


def _lines():
    incidents = [ScheduledIncident(kind, minute) for minute, kind in enumerate(INCIDENT_KINDS)]
    return list(generate(400, seed=3, rate=2.0, incidents=incidents))


def test_each_event_contributes_what_the_agent_derives():
    for line in _lines():
        facts = facts_of(decode(line).event)
        zero, top1, ages, sources, filters, unauthorized = families.observe(orjson.loads(line))
        assert (zero, top1, ages) == (facts.zero, facts.top1, facts.ages)
        assert Counter(sources) == facts.sources
        assert filters == [f"{f.name}/{f.status}" for f in facts.event.filters]
        assert unauthorized == len(facts.unauthorized)


def test_totals_see_the_incidents_and_merge_like_one_fold():
    lines = _lines()
    whole, first, second = families.empty(), families.empty(), families.empty()
    for n, line in enumerate(lines):
        observed = families.observe(orjson.loads(line))
        families.add(whole, observed)
        families.add(first if n % 2 else second, observed)
    assert families.differences(whole, families.merge(first, second)) == []
    assert whole["retrievals"] == len(lines)
    assert whole["unauthorized_results"] > 0 and whole["zero_result_retrievals"] > 0
    assert any(label.endswith(("/error", "/skipped")) for label in whole["filter_outcomes"])
    worse = families.merge(families.empty(), whole)
    worse["unauthorized_results"] -= 1
    n = whole["unauthorized_results"]
    assert families.differences(whole, worse) == [f"unauthorized_results: {n - 1} where the agent has {n}"]
