"""From a team's app to the agent's figures: real LangChain and Haystack retrievers,
instrumented by OpenInference, turned into events by RetrievalSpanProcessor,
and the plain library call, into one real broker and one real `ragdrift run`.

Each app (tests/apps/retrieval_app.py, run in the frameworks venv) prints what
its framework returned; the agent's /metrics must equal the figures computed by
hand from that. Then privacy: the personal data and the marker the app's corpus,
queries, metadata and user id hold appear nowhere in what reached Kafka or what
the agent stored, exported or logged.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import orjson
import pytest
from kafka import KafkaConsumer

from agent.demo.process import free_port, wait_until
from tests.agentctl import AgentProcess, agent_config
from tests.services import http_get, poll_records, unique_name

APP = Path(__file__).resolve().parent / "apps" / "retrieval_app.py"
PATHS = ("plain", "langchain", "haystack")
STALE = ("superseded", "draft", "tombstoned")
CUTOFF_K = 2
# What tests/apps/retrieval_app.py plants; kept here as text, not imported (it runs in another venv).
PLANTED = ("zq7-marker-5f1e", "jane.doe@example.com", "+1 415 555 0134", "Jane Doe", "jane.doe", "555 0134")


@pytest.fixture(scope="module")
def deployment(broker, frameworks_python, tmp_path_factory):
    """One topic, one agent, and each app run once against them."""
    directory = tmp_path_factory.mktemp("frameworks")
    topic = broker.create_topic(unique_name("apps"), 2)
    dlq = broker.create_topic(unique_name("apps-dlq"), 1)
    store = directory / "state.db"
    agent = AgentProcess(agent_config(broker.bootstrap, topic, dlq, unique_name("g"), f"sqlite:///{store}",
                                      free_port())).start()
    key = secrets.token_hex(32)
    runs = {}
    try:
        for path in PATHS:
            done = frameworks_python.run(APP, path, broker.bootstrap, topic, f"{path}-app",
                                         env={"RAGDRIFT_HASH_KEY": key}, timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]
            runs[path] = (json.loads(done.stdout), done.stdout + done.stderr)
        total = sum(len(run["retrievals"]) for run, _ in runs.values())
        wait_until(lambda: agent.value("ragdrift_retrievals_total") >= total, 60, 0.2, "the agent counting every event")
        yield {"agent": agent, "runs": runs, "topic": topic, "dlq": dlq, "broker": broker, "store": store}
    finally:
        agent.stop()


def expected(retrievals: list[dict]) -> dict:
    """The agent's figures for these retrievals, by the definitions in docs/metrics.md."""
    figures: Counter = Counter()
    for r in retrievals:
        ts = datetime.fromtimestamp(r["ts"], UTC)
        results, admitted = r["results"], r["results"][:CUTOFF_K]
        figures["retrievals"] += 1
        figures["zero"] += not results
        if results:
            figures["top1_sum"] += results[0]["score"]
            figures["top1_count"] += 1
        for res in results:
            denied = bool(res["acl"]) and not set(res["acl"]) & set(r["user_groups"])
            figures["unauthorized"] += denied or res["tenant"] != r["user_tenant"]
        for res in admitted:
            effective = datetime.combine(date.fromisoformat(res["effective_date"]), datetime.min.time(), UTC)
            expires = res["expires_at"] and datetime.combine(date.fromisoformat(res["expires_at"]),
                                                             datetime.min.time(), UTC)
            figures[("source", res["source"])] += 1
            figures["stale"] += bool(expires and expires <= ts) or effective > ts
            if effective <= ts:
                figures["age_sum"] += (ts - effective).total_seconds() / 86400
                figures["age_count"] += 1
    return figures


@pytest.mark.parametrize("path", PATHS)
def test_the_agents_figures_equal_a_hand_computation_from_what_the_framework_returned(deployment, path):
    agent, (run, _) = deployment["agent"], deployment["runs"][path]
    want, app = expected(run["retrievals"]), f"{path}-app"
    assert run["dropped"] == {} and run["failed"] == 0 and run["sent"] == want["retrievals"]
    assert want["unauthorized"] >= 1 and want["stale"] >= 1 and want["zero"] == 1  # the corpus makes each happen

    def value(name: str, **labels) -> float:
        return agent.value(name, app=app, **labels)

    assert value("ragdrift_retrievals_total") == want["retrievals"]
    assert value("ragdrift_zero_result_retrievals_total") == want["zero"]
    assert value("ragdrift_top1_score_count") == want["top1_count"]
    assert value("ragdrift_top1_score_sum") == pytest.approx(want["top1_sum"], rel=1e-9)
    assert value("ragdrift_content_age_days_count") == want["age_count"]
    assert value("ragdrift_content_age_days_sum") == pytest.approx(want["age_sum"], abs=1e-5)  # the app noted ts within a ms of the span's
    assert value("ragdrift_unauthorized_results_total") == want["unauthorized"]
    assert value("ragdrift_stale_results_total") == want["stale"]
    sources = {key[1]: n for key, n in want.items() if isinstance(key, tuple)}
    assert {source: value("ragdrift_admitted_results_total", source=source) for source in sources} == sources
    assert value("ragdrift_admitted_results_total") == sum(sources.values())


def test_no_dead_letters_and_the_same_query_hashes_alike_through_every_path(deployment):
    agent = deployment["agent"]
    assert agent.value("ragdrift_dead_letters_total") == 0
    assert agent.value("ragdrift_events_total", outcome="rejected") == 0
    events = [orjson.loads(record.value) for record in _records(deployment["broker"], deployment["topic"])]
    by_app: dict[str, dict[str, dict]] = {}
    for event in events:
        by_app.setdefault(event["app"], {})[event["event_id"]] = event["query"]
    queries = {app: sorted((q["id"], tuple(q["terms"])) for q in found.values()) for app, found in by_app.items()}
    assert set(queries) == {f"{path}-app" for path in PATHS}
    assert queries["plain-app"] == queries["langchain-app"] == queries["haystack-app"]


def test_no_planted_text_leaves_the_app(deployment):
    """Every byte produced to Kafka, the agent's store, its /metrics and its log: no planted text."""
    agent, broker = deployment["agent"], deployment["broker"]
    places = {
        "topic": b"".join(_raw(r) for r in _records(broker, deployment["topic"])),
        "dead letters": b"".join(_raw(r) for r in _records(broker, deployment["dlq"], until_empty=True)),
        "/metrics": http_get(f"http://127.0.0.1:{agent.port}/metrics"),
        "agent log": agent.log_path.read_bytes(),
        "store": b"".join(p.read_bytes() for p in deployment["store"].parent.glob("state.db*")),
    }
    assert len(places["topic"]) > 1000 and len(places["store"]) > 1000  # the places were really read
    for _, output in deployment["runs"].values():
        assert "zq7-marker-5f1e" in output  # the apps did retrieve the planted text (in their own output)
    found = {(place, text) for place, data in places.items() for text in PLANTED
             if text.lower().encode() in data.lower()}
    assert found == set()
    assert agent.value("ragdrift_dead_letters_total", reason="pii_suspected") == 0


def _records(broker, topic: str, until_empty: bool = False) -> list:
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=500)
    try:
        if until_empty:
            return list(consumer)
        return poll_records(consumer, until=lambda records: len(records) >= 12)
    finally:
        consumer.close()


def _raw(record) -> bytes:
    return (record.value or b"") + (record.key or b"") + b"".join(k.encode() + (v or b"") for k, v in record.headers)
