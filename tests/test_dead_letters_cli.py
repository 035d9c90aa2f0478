"""`ragdrift dead-letters` against a real broker: the letters a real agent wrote, summed by reason
with safe event ids and never a payload's text; and a topic anyone wrote to (no headers, bytes that
are not UTF-8, escape sequences, more reasons than are shown), an unknown topic and no broker."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
import yaml
from kafka import KafkaProducer

from agent import synth
from agent.core.dead_letter_summary import SHOWN
from agent.demo.process import free_port, wait_until
from tests.agentctl import AgentProcess, agent_config, new_port, produce, read_partitions
from tests.test_cli import clean_environment, one_line_error, ragdrift, run  # noqa: F401 - clean_environment is autouse

pytestmark = pytest.mark.broker


def _config(tmp_path, bootstrap: str, dlq: str, **kafka) -> str:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap, "dead_letter_topic": dlq, **kafka}}))
    return str(path)


def test_the_letters_of_a_real_agent_by_reason_with_safe_event_ids_and_no_payload(broker, make_topic, group_id,
                                                                                   tmp_path):
    topic, dlq = make_topic(1, "retrievals"), make_topic(1, "dlq")
    marker = f"MARKER{uuid.uuid4().hex}"  # in every bad payload; never in the command's output
    good = list(synth.generate(100, seed=5, start=datetime.now(UTC) - timedelta(minutes=3)))
    base = orjson.loads(good[0])
    marked = dict(base, pipeline=dict(base["pipeline"], version=marker))

    def score(event: str, position: int) -> bytes:
        results = [dict(r) for r in base["results"]]
        results[position]["score"] = "high"
        return orjson.dumps(dict(marked, event_id=event, results=results))

    bad = [
        b'{"note": "' + marker.encode() + b'", ',  # invalid_json, forwarded
        orjson.dumps(dict(marked, event_id="pii-1", query=dict(base["query"], id=f"jane {marker}@example.com"))),
        score("bad-score-1", 3),
        score("bad-score-2", 0),
        orjson.dumps(dict(marked, event_id="old-schema-1", schema="retrieval.v2")),
        orjson.dumps(dict(marked, event_id="555-123-4567", cutoff_k=0)),  # a phone number is never shown
    ]
    produce(broker.bootstrap, topic, good[:50] + bad + good[50:])
    agent = AgentProcess(agent_config(broker.bootstrap, topic, dlq, group_id, f"sqlite:///{tmp_path}/s.db", new_port()))
    try:
        agent.start()
        wait_until(lambda: agent.value("ragdrift_events_total") >= len(good) + len(bad), 60, 0.2, "every event handled")
        read_partitions(broker.bootstrap, dlq, len(bad))  # every letter delivered
    finally:
        agent.stop()

    done = ragdrift("dead-letters", "--config", str(agent.config_path), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["topic"] == dlq and report["total"] == len(bad)
    assert report["without_reason"] == report["without_source"] == 0
    assert {k["kind"]: k["count"] for k in report["kinds"]} == {
        "invalid_field": 3, "invalid_json": 1, "pii_suspected": 1, "unsupported_schema": 1}
    reasons = {r["reason"]: r for r in report["reasons"]}
    assert {name: r["count"] for name, r in reasons.items()} == {
        "invalid_field:results[].score": 2, "invalid_field:cutoff_k": 1, "invalid_json": 1, "pii_suspected": 1,
        "unsupported_schema": 1}
    def examples(reason: str) -> list[tuple[str | None, int]]:
        return [(e["event_id"], e["source"]["offset"]) for e in reasons[reason]["examples"]
                if e["source"]["topic"] == topic and e["source"]["partition"] == 0]

    assert examples("invalid_field:results[].score") == [("bad-score-1", 52), ("bad-score-2", 53)]
    assert examples("unsupported_schema") == [("old-schema-1", 54)]
    assert examples("invalid_json") == [(None, 50)]
    assert examples("pii_suspected") == [(None, 51)]  # withheld: its event id is never read
    assert examples("invalid_field:cutoff_k") == [(None, 55)]  # an event id like a phone number is not shown
    assert report["sources"] == [{"topic": topic, "partition": 0, "count": 6, "first_offset": 50, "last_offset": 55}]
    (part,) = report["partitions"]
    assert (part["count"], part["first_offset"], part["last_offset"]) == (6, 0, 5)

    table = ragdrift("dead-letters", "--config", str(agent.config_path), "--examples", "1")
    assert table.returncode == 0, table.stderr
    shown = table.stdout.decode()
    assert f"dead letters in {dlq}: 6" in shown
    assert "invalid_field:results[].score" in shown and f"{topic}/0: 6 letters for offsets 50-55" in shown
    assert f"e.g. bad-score-1 ({topic}/0@52)\n" in shown and f"e.g. {topic}/0@51\n" in shown
    for output in (done.stdout, done.stderr, table.stdout, table.stderr):
        for text in (marker, "jane", "pii-1", "555-123"):
            assert text.encode() not in output


class _Undecodable(str):
    """A header name whose bytes are not UTF-8 (kafka-python's producer encodes names with `encode`)."""

    def encode(self, *args, **kwargs) -> bytes:
        return b"\xff\xfe"


def test_a_topic_anyone_wrote_to(broker, make_topic, tmp_path, capsys):
    dlq = make_topic(2, "dlq")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    payload = b'{"event_id": "SECRET-ID", "text": "SECRET"}'
    producer.send(dlq, payload, partition=0)  # no headers at all
    hostile = [("ragdrift-reason", b"\xff\xfeinvalid_field:\x1b[31mred\n"), ("ragdrift-source-topic", b"src\n\x1b]0;x\x07"),
               ("ragdrift-source-partition", b"-1"), ("ragdrift-source-offset", b"12")]
    producer.send(dlq, payload, partition=1, headers=hostile)
    producer.send(dlq, payload, partition=1, headers=hostile)
    producer.send(dlq, payload, partition=1, headers=[("ragdrift-reason", b"invalid_field:results[1].score"),
                                                      ("ragdrift-payload", b"withheld"),
                                                      ("ragdrift-source-topic", b"src\x1b[2J"),
                                                      ("ragdrift-source-partition", b"0"),
                                                      ("ragdrift-source-offset", b"7")])
    for n in range(SHOWN + 5):
        producer.send(dlq, payload, partition=0, headers=[("ragdrift-reason", f"kind{n}:p".encode() * 100)])
    producer.flush()
    producer.close()
    config = _config(tmp_path, broker.bootstrap, dlq)

    status, out, err = run(capsys, "dead-letters", "--config", config)
    assert status == 0, err
    assert err == "" and "\x1b" not in out and "SECRET" not in out
    assert f"dead letters in {dlq}: {SHOWN + 9}" in out
    assert "without a reason header: 1" in out and f"without source headers: {SHOWN + 8}" in out
    assert "\\x1b[31mred\\n" in out and "src\\x1b[2J/0: 1 letters for offsets 7-7" in out
    assert "others: 7 letters under 7 more reasons" in out

    status, out, err = run(capsys, "dead-letters", "--config", config, "--format", "json")
    report = json.loads(out)
    assert "\x1b" not in out and "SECRET" not in out
    assert report["other_kinds"] == {"count": 7, "distinct": 7, "untracked": 0}
    assert all(len(r["reason"]) <= 200 for r in report["reasons"])
    assert {"reason": "\ufffd\ufffdinvalid_field:\x1b[31mred\n", "count": 2}.items() <= \
        next(r for r in report["reasons"] if r["kind"].endswith("invalid_field")).items()

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send(dlq, b"", partition=0, headers=[(_Undecodable("x"), b"y")])
    producer.flush()
    producer.close()
    status, _, err = run(capsys, "dead-letters", "--config", config, "--timeout", "5")
    assert status == 2 and f"topic {dlq} holds a record kafka-python cannot parse" in one_line_error(err)


def test_an_unknown_topic_no_broker_and_bad_arguments_are_one_line_each(broker, tmp_path, capsys):
    config = _config(tmp_path, broker.bootstrap, "retrieval.v1.dlq")
    cases = {
        "does not exist on the broker": ["--topic", f"missing_{uuid.uuid4().hex[:8]}"],
        "no answer from the Kafka broker at 127.0.0.1:": ["--bootstrap-servers", f"127.0.0.1:{free_port()}",
                                                          "--timeout", "1"],
        "expected an RFC 3339 time": ["--since", "yesterday\x1b[2J"],
        "the time needs an offset": ["--since", "2026-12-01T00:00:00"],
        "--examples must be at least 0": ["--examples", "-1"],
        "--examples must be at most 1000": ["--examples", "99999999999999999999"],
        "comma-separated list of host:port": ["--bootstrap-servers", "a:1,,b:2"],
    }
    for expected, args in cases.items():
        status, out, err = run(capsys, "dead-letters", "--config", config, *args)
        assert status == 2 and out == "", err
        line = one_line_error(err)
        assert expected in line and "\x1b" not in line
    librdkafka = _config(tmp_path, broker.bootstrap, "d", library="confluent-kafka",
                         client={"security.protocol": "plaintext"})
    status, _, err = run(capsys, "dead-letters", "--config", librdkafka)
    assert status == 2 and "reads with kafka-python" in one_line_error(err)


def test_since_leaves_older_letters_out(broker, make_topic, tmp_path, capsys):
    dlq = make_topic(1, "dlq")
    produce(broker.bootstrap, dlq, [b""] * 3, headers=[("ragdrift-reason", b"invalid_json")])
    config = _config(tmp_path, broker.bootstrap, dlq)
    status, out, _ = run(capsys, "dead-letters", "--config", config, "--since", "2000-01-01T00:00:00Z",
                         "--format", "json")
    assert status == 0 and json.loads(out)["total"] == 3
    status, out, _ = run(capsys, "dead-letters", "--config", config, "--since", "2999-01-01T00:00:00+01:00",
                         "--format", "json")
    assert status == 0 and json.loads(out)["total"] == 0
