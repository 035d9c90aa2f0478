"""The judging loop closed end to end: an app sends its retrievals through the
producer library, which keeps their texts in a JSON Lines recorder on the
app's side; a real agent samples them; `ragdrift batch build`, reading that
file through the `file` resolver, gives judges the real query and chunk
texts. Kafka and the agent's store never see a word of them."""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from agent.core.sampling import iso_week
from agent.demo.process import wait_until
from ragdrift_producer import HashKey, JsonLinesRecorder, Producer, Result, User
from tests.agentctl import ROOT, AgentProcess, agent_config, caught_up, new_port, read_partitions
from tests.services import unique_name

pytestmark = pytest.mark.broker
TOPICS = ("badge renewal", "parental leave", "the VPN client", "expense reports", "password resets", "travel")
TYPES = ("lexical", "paraphrase", "follow_up")


def _corpus(marker: str) -> dict[str, tuple[str, str, str]]:
    """chunk id -> (parent id, source, text): each text holds a marker of its own."""
    chunks = {}
    for d, topic in enumerate(TOPICS):
        source = "hr-policies" if d % 2 else "it-handbook"
        for part in range(3):
            chunk_id = f"{source}/doc-{d}#c{part}"
            chunks[chunk_id] = (f"{source}/doc-{d}", source,
                                f"Part {part} of the guide to {topic}: ask your manager first. {marker}c{d}x{part}")
    return chunks


def test_judges_get_the_apps_own_texts_and_nothing_else_sees_them(broker, tmp_path):
    marker = f"zq{secrets.token_hex(5)}"  # in every text, and nowhere a hash could put it by chance
    chunks = _corpus(marker)
    ids = sorted(chunks)
    topic, dlq, group = broker.create_topic(unique_name("retrievals")), broker.create_topic(unique_name("dlq")), \
        unique_name("g")
    texts = tmp_path / "texts.jsonl"
    store = f"sqlite:///{tmp_path}/state.db"
    config = agent_config(broker.bootstrap, topic, dlq, group, store, new_port())
    config["judgment"] = {"export_dir": str(tmp_path / "batches"), "budget": 2, "uniform_budget": 4,
                          "salt": secrets.token_hex(16), "resolver": {"kind": "file", "path": str(texts)}}
    agent = AgentProcess(config).start()
    try:
        producer = Producer(app="handbook-bot", key=HashKey(secrets.token_hex(32).encode()),
                            kafka={"bootstrap_servers": broker.bootstrap}, topic=topic, cutoff_k=3,
                            recorder=JsonLinesRecorder(texts), registry=None, strict=True)
        user = User(tenant="acme", groups=["employees", "engineering"])
        asked: dict[str, str] = {}  # event id -> query text
        for i in range(36):
            query = f"How do I handle {TOPICS[i % len(TOPICS)]} when travelling? {marker}q{i}"
            picked = [ids[(i * 5 + j * 7) % len(ids)] for j in range(4)]
            results = [Result(chunk_id=c, parent_id=chunks[c][0], source=chunks[c][1], score=0.9 - 0.1 * j,
                              text=chunks[c][2], tenant="acme", acl=["employees"], status="current",
                              effective_date=datetime.now(UTC) - timedelta(days=30))
                       for j, c in enumerate(dict.fromkeys(picked))]
            event_id = producer.retrieval(query=query, user=user, results=results, query_type=TYPES[i % 3])
            assert event_id is not None
            asked[event_id] = query
        stats = producer.close()
        assert stats.sent == len(asked) and not stats.dropped, stats

        records = read_partitions(broker.bootstrap, topic, len(asked))
        wait_until(lambda: caught_up(store, group, topic, records), 60, 0.1, "the agent's checkpoint of every event")
        wait_until(lambda: agent.value("ragdrift_events_total", outcome="processed") == len(asked), 30, 0.1,
                   "every event processed, none dead-lettered")

        values = [r.value for recs in records.values() for r in recs]
        assert marker.encode() not in b"".join(values)
        query_text = {}  # hashed query id -> the text the app asked
        for value in values:
            event = json.loads(value)
            query_text[event["query"]["id"]] = asked[event["event_id"]]
        assert len(query_text) == len(asked)

        built = subprocess.run(
            [sys.executable, "-m", "agent.cli", "batch", "build", "--config", str(agent.config_path),
             "--week", iso_week(time.time()), "--partial"],
            capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120,
        )
        assert built.returncode == 0, built.stderr
        assert marker not in built.stdout + built.stderr
    finally:
        agent.stop()

    (batch,) = (tmp_path / "batches").iterdir()
    items = [json.loads(line) for line in (batch / "items.jsonl").read_text().splitlines()]
    assert 0 < len(items) < len(asked), "the budgets should sample some queries, not all"
    for item in items:
        assert item["query"]["text"] == query_text[item["query"]["id"]]
        assert item["chunks"] and all(c["text"] == chunks[c["chunk_id"]][2] for c in item["chunks"])
    csv = (batch / "items.csv").read_text()
    assert all(item["query"]["text"] in csv for item in items)
    key = [json.loads(line) for line in (batch / "key.jsonl").read_text().splitlines()]
    assert {k["event_id"] for k in key} <= set(asked)
    assert marker not in (batch / "key.jsonl").read_text() + (batch / "manifest.json").read_text()

    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    with sqlite3.connect(tmp_path / "state.db") as db:
        dumped = "\n".join(db.iterdump())
    assert marker.encode() not in stored and marker not in dumped
    assert marker not in agent.log_path.read_text(errors="replace")
