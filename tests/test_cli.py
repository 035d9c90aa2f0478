"""The `ragdrift` command: help, generate, replay (against an independent
oracle written from the per-event definitions), check-config, and exit status 2
with one line for every usage or input error."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.cli import main

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ["generate", "replay", "run", "check-config", "demo"]
INCIDENTS = ["leak@0.5", "stale@0.5", "filter-outage@0.5", "new-terms@0.5"]
# The summary keys the replay contract requires.
REQUIRED = {
    "events", "zero_result_rate", "filter_zero_rate", "unauthorized_results", "unauthorized_events",
    "unauthorized_risk_events", "stale_results", "stale_conflict_events", "source_hhi", "top_source_share",
    "mean_top1_score", "mean_admitted_score", "mean_content_age_days", "mean_parent_diversity",
    "duplicate_fingerprint_results", "query_type_share", "new_term_rate", "filters",
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No RAGDRIFT_* variable of the caller's may leak into configuration."""
    for name in list(os.environ):
        if name.startswith(("RAGDRIFT_", "OTEL_")):
            monkeypatch.delenv(name)


def ragdrift(*args: str, input: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m agent.cli ARGS` as a child process, as a user would run it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("RAGDRIFT_", "OTEL_"))}
    environ.update(PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], input=input, capture_output=True,
                          env=environ, cwd=ROOT, timeout=120)


def run(capsys, *args: str) -> tuple[int, str, str]:
    """`main(ARGS)` in-process: (status, stdout, stderr)."""
    try:
        status = main(list(args))
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("ragdrift: error: "), err
    return lines[0]


def generate(tmp_path: Path, name: str, *args: str) -> Path:
    path = tmp_path / name
    status = main(["generate", *args, "-o", str(path)])
    assert status == 0
    return path


# -- help and usage -------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=["ragdrift", *COMMANDS])
def test_help_for_every_command(capsys, command):
    status, out, _ = run(capsys, *command, "--help")
    assert status == 0
    assert out.startswith(f"usage: ragdrift{' ' + command[0] if command else ''}")
    if not command:
        for name in COMMANDS:
            assert name in out


def test_help_as_a_process():
    done = ragdrift("--help")
    assert done.returncode == 0 and b"usage: ragdrift" in done.stdout


def test_version_names_the_release_and_every_stored_format(capsys):
    from agent import __version__
    from agent.core.state import STATE_VERSION

    status, out, _ = run(capsys, "--version")
    lines = out.splitlines()
    assert status == 0 and lines[:2] == [f"ragdrift {__version__}", "stored and exchanged formats:"]
    named = {line.split("  ")[1].strip(): line.rsplit("  ", 1)[1] for line in lines[2:]}
    assert named["checkpoint state"] == f"v{STATE_VERSION} (reads v1 to v{STATE_VERSION})"
    assert {"drift day rows", "live-gate rows", "baselines", "judgment batches", "events"} <= set(named)


def test_no_command_is_a_usage_error(capsys):
    status, _, err = run(capsys)
    assert status == 2 and "COMMAND" in err


# -- generate ---------------------------------------------------------------------------


def test_generate_is_deterministic(tmp_path):
    a = generate(tmp_path, "a.jsonl", "--events", "300", "--seed", "5").read_bytes()
    b = generate(tmp_path, "b.jsonl", "--events", "300", "--seed", "5").read_bytes()
    c = generate(tmp_path, "c.jsonl", "--events", "300", "--seed", "6").read_bytes()
    assert a == b and a != c
    assert a.count(b"\n") == 300 and a.endswith(b"\n")
    # Standard output carries the same bytes.
    done = ragdrift("generate", "--events", "300", "--seed", "5")
    assert done.returncode == 0 and done.stdout == a


def test_generate_zero_events(tmp_path):
    assert generate(tmp_path, "empty.jsonl", "--events", "0").read_bytes() == b""


def _times(path: Path) -> list[datetime]:
    return [datetime.fromisoformat(json.loads(line)["ts"]) for line in path.read_text().splitlines()]


def test_generate_start_and_rate(tmp_path):
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    slow = _times(generate(tmp_path, "slow.jsonl", "--events", "200", "--start", "2026-03-01T12:00:00Z", "--rate", "1"))
    fast = _times(generate(tmp_path, "fast.jsonl", "--events", "200", "--start", "2026-03-01T14:00:00+02:00",
                           "--rate", "1000"))
    for times, rate in ((slow, 1), (fast, 1000)):
        assert min(times) >= start
        assert max(times).timestamp() <= start.timestamp() + 200 / rate
    assert (max(slow) - start).total_seconds() > 150  # 200 events at 1/s of event time
    assert (max(fast) - start).total_seconds() < 1  # 200 events at 1000/s


def test_generate_incident(tmp_path):
    clean = _docs(generate(tmp_path, "clean.jsonl", "--events", "1000", "--seed", "3"))
    leak = _docs(generate(tmp_path, "leak.jsonl", "--events", "1000", "--seed", "3", "--incident", "leak@0"))
    assert sum(map(_unauthorized_count, clean)) == 0
    assert sum(map(_unauthorized_count, leak)) > 0
    assert len(leak) == len(clean)


def test_generate_invalid_rate(tmp_path):
    def rejected(rate: str) -> Counter:
        return Counter(_classify(line)[0] for line in generate(tmp_path, f"{rate}.jsonl", "--events", "400",
                                                                "--seed", "8", "--invalid-rate", rate)
                       .read_bytes().splitlines())

    assert rejected("0") == Counter({"valid": 400})
    everything = rejected("1")
    assert everything["valid"] == 0 and set(everything) == {"invalid_json", "invalid_field", "unsupported_schema",
                                                            "pii_suspected"}
    some = rejected("0.1")
    assert 0 < 400 - some["valid"] < 400


@pytest.mark.parametrize("args", [
    ["--incident", "oops@3"],
    ["--incident", "leak@soon"],
    ["--incident", "leak"],
    ["--invalid-rate", "2"],
    ["--rate", "0"],
    ["--events", "-1"],
])
def test_generate_bad_arguments_exit_2_with_one_line(capsys, tmp_path, args):
    status, out, err = run(capsys, "generate", "--events", "5", *args, "-o", str(tmp_path / "x.jsonl"))
    assert status == 2 and out == ""
    line = one_line_error(err)
    assert args[0].lstrip("-").split("-")[0] in line or args[1].split("@")[0] in line


def test_generate_bad_start_is_a_usage_error(capsys):
    status, _, err = run(capsys, "generate", "--events", "5", "--start", "2026-03-01T12:00:00")
    assert status == 2 and "--start" in err and "offset" in err


def test_generate_unwritable_output(capsys, tmp_path):
    status, _, err = run(capsys, "generate", "--events", "5", "-o", str(tmp_path / "no-dir" / "x.jsonl"))
    assert status == 2 and "no-dir" in one_line_error(err)


# -- an independent oracle: the per-event definitions in plain Python -------------------------

STALE_STATUSES = {"superseded", "draft", "tombstoned"}


def _when(text: str) -> float:
    """RFC 3339 date-time, or a date as midnight UTC, in epoch seconds."""
    value = datetime.fromisoformat(text.upper())
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _looks_raw(value) -> bool:
    return isinstance(value, str) and (len(value) > 128 or "@" in value or any(c.isspace() for c in value))


def _classify(line: bytes) -> tuple[str, dict | None]:
    """The dead-letter kind of a generated line by the event contract, or 'valid'."""
    try:
        doc = json.loads(line)
    except ValueError:
        return "invalid_json", None
    hashed = [doc["query"].get("id"), *doc["query"].get("terms", []), *doc["principal"]["groups"]]
    hashed += [g for r in doc["results"] for g in r.get("acl", [])]
    if any(_looks_raw(v) for v in hashed):
        return "pii_suspected", None
    if doc["schema"] != "retrieval.v1":
        return "unsupported_schema", None
    if doc["cutoff_k"] < 1 or any(r["rank"] < 1 for r in doc["results"]):
        return "invalid_field", None
    return "valid", doc


def _docs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _ranked(doc: dict) -> list[dict]:
    return sorted(doc["results"], key=lambda r: r["rank"])


def _admitted(doc: dict) -> list[dict]:
    return [r for r in _ranked(doc) if (r["rank"] <= doc["cutoff_k"] if r.get("packed") is None else r["packed"])]


def _unauthorized_count(doc: dict) -> int:
    tenant, groups = doc["principal"]["tenant"], set(doc["principal"]["groups"])
    return sum(1 for r in doc["results"]
               if (r.get("tenant") is not None and r["tenant"] != tenant) or (r.get("acl") and groups.isdisjoint(r["acl"])))


def _stale(result: dict, ts: float) -> bool:
    return (result.get("status") in STALE_STATUSES
            or (result.get("expires_at") is not None and _when(result["expires_at"]) <= ts)
            or (result.get("effective_date") is not None and _when(result["effective_date"]) > ts))


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def oracle(docs: list[dict], rejected: Counter) -> dict:
    n = len(docs)
    sources: Counter = Counter()
    top1, admitted_scores, ages, diversity = [], [], [], []
    unauthorized = unauthorized_events = risk = stale = conflicts = duplicates = zero = filter_zero = 0
    types: Counter = Counter()
    filters: dict = defaultdict(lambda: {"applied": 0, "skipped": 0, "error": 0, "removed": 0})
    vocabulary: set = set()
    terms = new_terms = 0
    for doc in docs:
        ts = _when(doc["ts"])
        ranked, admitted = _ranked(doc), _admitted(doc)
        zero += not ranked
        stages = doc.get("stages") or {}
        filter_zero += (stages.get("candidates") or 0) > 0 and stages.get("after_filter") == 0
        bad = _unauthorized_count(doc)
        unauthorized += bad
        unauthorized_events += bad > 0
        risk += doc["principal"].get("claims_present", True) is False and bool(ranked)
        stale_parents, fresh_parents = set(), set()
        for r in admitted:
            (stale_parents if _stale(r, ts) else fresh_parents).add(r["parent_id"])
            stale += _stale(r, ts)
        conflicts += bool(stale_parents & fresh_parents)
        if ranked:
            top1.append(ranked[0]["score"])
        if admitted:
            admitted_scores.append(math.fsum(r["score"] for r in admitted) / len(admitted))
            diversity.append(len({r["parent_id"] for r in admitted}) / len(admitted))
        seen_fingerprints = set()
        for r in admitted:
            sources[r["source"]] += 1
            if r.get("effective_date") is not None and _when(r["effective_date"]) <= ts:
                ages.append((ts - _when(r["effective_date"])) / 86400)
            if r.get("fingerprint") is not None:
                fingerprint = r["fingerprint"].lower()
                duplicates += fingerprint in seen_fingerprints
                seen_fingerprints.add(fingerprint)
        types[doc["query"].get("type") or "unknown"] += 1
        for f in doc.get("filters", []):
            filters[f["name"]][f["status"]] += 1
            filters[f["name"]]["removed"] += f.get("removed", 0)
        for term in doc["query"].get("terms", []):
            terms += 1
            new_terms += term not in vocabulary
            vocabulary.add(term)
    admitted_total = sum(sources.values())
    shares = [count / admitted_total for count in sources.values()]
    return {
        "events": {"processed": n, "rejected": dict(rejected)},
        "zero_result_rate": zero / n,
        "filter_zero_rate": filter_zero / n,
        "unauthorized_results": unauthorized,
        "unauthorized_events": unauthorized_events,
        "unauthorized_risk_events": risk,
        "stale_results": stale,
        "stale_conflict_events": conflicts,
        "source_hhi": sum(s * s for s in shares),
        "top_source_share": max(shares),
        "mean_top1_score": _mean(top1),
        "mean_admitted_score": _mean(admitted_scores),
        "mean_content_age_days": _mean(ages),
        "mean_parent_diversity": _mean(diversity),
        "duplicate_fingerprint_results": duplicates,
        "query_type_share": {t: c / n for t, c in types.items()},
        "new_term_rate": new_terms / terms,
        "filters": dict(filters),
    }


def _approx(expected):
    """Floats to 1e-9 relative (sums may be added in another order), the rest exactly."""
    if isinstance(expected, dict):
        return {k: _approx(v) for k, v in expected.items()}
    if isinstance(expected, float):
        return pytest.approx(expected, rel=1e-9)
    return expected


# -- replay ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def traffic(tmp_path_factory) -> Path:
    """Three thousand events with incidents and invalid lines."""
    path = tmp_path_factory.mktemp("traffic") / "traffic.jsonl"
    args = ["generate", "--events", "3000", "--seed", "7", "--invalid-rate", "0.02", "-o", str(path)]
    for incident in INCIDENTS:
        args += ["--incident", incident]
    assert main(args) == 0
    return path


def test_generate_piped_into_replay_equals_the_oracle(traffic):
    args = ["--events", "3000", "--seed", "7", "--invalid-rate", "0.02"]
    for incident in INCIDENTS:
        args += ["--incident", incident]
    command = " ".join([f"{sys.executable} -m agent.cli generate", *args,
                        f"| {sys.executable} -m agent.cli replay --format json -"])
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("RAGDRIFT_", "OTEL_"))}
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, cwd=ROOT,
                          env={**environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    summary = json.loads(done.stdout)

    kinds, docs = Counter(), []
    for line in traffic.read_bytes().splitlines():
        kind, doc = _classify(line)
        if doc is None:
            kinds[kind] += 1
        else:
            docs.append(doc)
    expected = oracle(docs, kinds)

    assert set(summary) >= REQUIRED, REQUIRED - set(summary)
    assert set(summary["events"]) >= {"processed", "rejected"}
    for name, value in summary["filters"].items():
        assert set(value) == {"applied", "skipped", "error", "removed"}, name
    # Every figure equals the oracle's; the incidents make each one non-trivial.
    for key in sorted(REQUIRED - {"events"}):
        assert summary[key] == _approx(expected[key]), key
    assert summary["events"]["processed"] == expected["events"]["processed"]
    assert summary["events"]["rejected"] == expected["events"]["rejected"]
    assert set(kinds) == {"invalid_json", "invalid_field", "unsupported_schema", "pii_suspected"}
    for key in ("unauthorized_results", "unauthorized_events", "unauthorized_risk_events", "stale_results",
                "stale_conflict_events", "duplicate_fingerprint_results"):
        assert expected[key] > 0, key
    assert 0 < expected["filter_zero_rate"] < expected["zero_result_rate"] < 1


def test_replay_never_stops_on_bad_lines(capsys, tmp_path):
    good = generate(tmp_path, "good.jsonl", "--events", "20", "--seed", "2").read_bytes().splitlines()
    base = json.loads(good[0])
    bad = [
        b"{not json",
        b"\xff\xfe not utf-8",
        b"[1, 2]",
        json.dumps({**base, "cutoff_k": 0}).encode(),
        json.dumps({**base, "results": [{**base["results"][0], "rank": 0}]}).encode() if base["results"] else b"{}",
        json.dumps({**base, "schema": "retrieval.v2"}).encode(),
        json.dumps({**base, "query": {**base["query"], "id": "jane.doe@example.com"}}).encode(),
        json.dumps({**base, "principal": {**base["principal"], "groups": ["raw group name"]}}).encode(),
        b'{"schema": "retrieval.v1", "padding": "' + b"x" * 30000 + b'"}',
    ]
    lines = good[:10] + bad + [b"", b"   "] + good[10:]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\r\n".join(lines) + b"\r\n")
    status, out, _ = run(capsys, "replay", str(path), "--format", "json", "--max-bytes", "20000")
    assert status == 0
    events = json.loads(out)["events"]
    assert events["processed"] == 20  # blank lines are not messages
    assert events["rejected"] == {"invalid_json": 2, "invalid_field": 3, "unsupported_schema": 1,
                                  "pii_suspected": 2, "too_large": 1}


def test_replay_of_several_files_equals_replay_of_their_concatenation(capsys, traffic, tmp_path):
    lines = traffic.read_bytes().splitlines(keepends=True)
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    first.write_bytes(b"".join(lines[:1234]))
    second.write_bytes(b"".join(lines[1234:]))
    _, split, _ = run(capsys, "replay", str(first), str(second), "--format", "json")
    _, whole, _ = run(capsys, "replay", str(traffic), "--format", "json")
    assert json.loads(split) == json.loads(whole)


def test_replay_reads_standard_input(traffic, capsys):
    done = ragdrift("replay", "-", "--format", "json", input=traffic.read_bytes())
    assert done.returncode == 0, done.stderr
    _, direct, _ = run(capsys, "replay", str(traffic), "--format", "json")
    assert json.loads(done.stdout) == json.loads(direct)


@pytest.mark.parametrize("files", [["absent.jsonl"], ["present.jsonl", "absent.jsonl"]])
def test_replay_missing_file_exits_2_with_one_line(capsys, tmp_path, files):
    (tmp_path / "present.jsonl").write_bytes(b"")
    status, out, err = run(capsys, "replay", *(str(tmp_path / f) for f in files))
    assert status == 2 and out == ""
    line = one_line_error(err)
    assert "absent.jsonl" in line


def test_replay_of_nothing(capsys, tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    status, out, _ = run(capsys, "replay", str(tmp_path / "empty.jsonl"), "--format", "json")
    summary = json.loads(out)
    assert status == 0
    assert summary["events"]["processed"] == 0 and summary["events"]["rejected"] == {}
    assert summary["zero_result_rate"] is None and summary["source_hhi"] is None
    assert summary["query_type_share"] == {} and summary["filters"] == {}
    status, out, _ = run(capsys, "replay", str(tmp_path / "empty.jsonl"))
    assert status == 0 and "events processed" in out


def test_replay_table(capsys, traffic):
    status, out, _ = run(capsys, "replay", str(traffic))
    assert status == 0
    expected = json.loads(run(capsys, "replay", str(traffic), "--format", "json")[1])
    rows = {}
    for line in out.splitlines():
        label, _, value = line.rpartition("  ")
        rows[label.strip()] = value.strip()
    assert rows["events processed"] == str(expected["events"]["processed"])
    for reason, count in expected["events"]["rejected"].items():
        assert rows[f"rejected: {reason}"] == str(count)
    assert rows["unauthorized results"] == str(expected["unauthorized_results"])
    assert float(rows["zero result rate"]) == pytest.approx(expected["zero_result_rate"], abs=1e-4)
    assert float(rows["query type: lexical"]) == pytest.approx(expected["query_type_share"]["lexical"], abs=1e-4)
    assert rows["filter status"].startswith("applied ")


@pytest.fixture(scope="module")
def versioned(tmp_path_factory) -> Path:
    """Events of three apps, a canary pipeline beside one app's stable one, and events naming no version."""
    path = tmp_path_factory.mktemp("versioned") / "traffic.jsonl"
    assert main(["generate", "--events", "600", "--seed", "5", "--incident", "score-drift@0", "-o", str(path)]) == 0
    lines = []
    for i, line in enumerate(path.read_bytes().splitlines()):
        doc = json.loads(line)
        if i % 7 == 0:
            doc.pop("pipeline", None)
        lines.append(json.dumps(doc).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_replay_split_by_pipeline_version(capsys, tmp_path, versioned):
    config = tmp_path / "ragdrift.yaml"
    config.write_text("windows: {by_pipeline_version: true, max_pipeline_versions: 1}\n")  # replay keeps every version
    status, out, _ = run(capsys, "replay", str(versioned), "--format", "json", "--config", str(config))
    assert status == 0
    summary = json.loads(out)
    whole = json.loads(run(capsys, "replay", str(versioned), "--format", "json")[1])
    versions = summary.pop("pipeline_versions")
    assert summary == _approx(whole)  # the whole input's figures, as without the split
    docs = [json.loads(line) for line in versioned.read_bytes().splitlines()]
    named = Counter(d.get("pipeline", {}).get("version", "none") for d in docs)
    assert len(named) >= 5 and named["none"] > 0 and any(v.endswith("-canary") for v in named)
    assert {v: part["events"]["processed"] for v, part in versions.items()} == named
    # A version's figures are those of a replay of its events alone (but for the figures not split,
    # and the new-term rate: a term is new to the vocabulary of every event before, of any version).
    for version in ("none", next(v for v in named if v.endswith("-canary"))):
        alone = tmp_path / f"{version}.jsonl"
        alone.write_text("".join(json.dumps(d) + "\n" for d in docs
                                 if d.get("pipeline", {}).get("version", "none") == version))
        expected = json.loads(run(capsys, "replay", str(alone), "--format", "json")[1])
        del expected["language_share"], expected["filters"], expected["new_term_rate"]
        expected["events"] = {"processed": expected["events"]["processed"]}
        assert 0 < versions[version].pop("new_term_rate") < 1
        assert versions[version] == _approx(expected), version
    status, out, _ = run(capsys, "replay", str(versioned), "--config", str(config))
    assert status == 0 and "pipeline none: events processed" in out.replace("  ", " ")


def test_replay_refuses_a_bad_split_setting(capsys, tmp_path, versioned):
    config = tmp_path / "ragdrift.yaml"
    config.write_text("windows: {by_pipeline_version: maybe}\n")
    status, out, err = run(capsys, "replay", str(versioned), "--config", str(config))
    assert status == 2 and out == ""
    assert one_line_error(err).startswith("ragdrift: error: windows.by_pipeline_version: expected bool")


# -- check-config --------------------------------------------------------------------------------


def test_check_config_ok_masks_secrets(capsys, monkeypatch, tmp_path):
    secret_file = tmp_path / "kafka-password"
    secret_file.write_text("file-secret-value\n")
    config = tmp_path / "ragdrift.yaml"
    config.write_text(
        "kafka:\n"
        "  bootstrap_servers: kafka-0:9092\n"
        "  client:\n"
        "    sasl_plain_username: ragdrift\n"
        f"    sasl_plain_password_file: {secret_file}\n"
        "metrics: {port: 9200}\n"
    )
    monkeypatch.setenv("RAGDRIFT_KAFKA__CLIENT__SSL_PASSWORD", "env-secret-value")
    monkeypatch.setenv("RAGDRIFT_KAFKA__GROUP_ID", "from-env")
    monkeypatch.setenv("RAGDRIFT_JUDGMENT__SALT", "env-salt-value")  # without one, a warning (tests/io/test_feature_warnings.py)
    status, out, err = run(capsys, "check-config", str(config))
    assert status == 0 and err == ""
    assert out.splitlines()[0] == f"{config}: ok"
    assert "  kafka.bootstrap_servers = kafka-0:9092" in out
    assert "  kafka.group_id = from-env" in out
    assert "  metrics.port = 9200" in out
    assert "file-secret-value" not in out and "env-secret-value" not in out and "env-salt-value" not in out

    status, out, _ = run(capsys, "check-config", str(config), "--format", "json")
    doc = json.loads(out)
    assert status == 0
    assert doc["kafka"]["client"] == {"sasl_plain_username": "ragdrift", "sasl_plain_password": "***",
                                      "ssl_password": "***"}
    assert doc["metrics"]["port"] == 9200 and doc["kafka"]["group_id"] == "from-env"


def test_check_config_writes_each_value_on_its_line(capsys, tmp_path):
    config = tmp_path / "ragdrift.yaml"
    config.write_text('kafka: {group_id: "a\\n  kafka.topics = forged\\x1b[2J"}\n')
    status, out, _ = run(capsys, "check-config", str(config))
    assert status == 0 and "\x1b" not in out and "\n  kafka.topics = forged" not in out
    assert "  kafka.group_id = a\\n  kafka.topics = forged\\x1b[2J\n" in out


def test_check_config_masks_a_password_in_the_store_url(capsys, monkeypatch, tmp_path):
    # operations.md: RAGDRIFT_STORE__URL=... carries the PostgreSQL credentials.
    config = tmp_path / "ragdrift.yaml"
    config.write_text("{}\n")
    monkeypatch.setenv("RAGDRIFT_STORE__URL", "postgresql+psycopg://ragdrift:pg-secret-value@db:5432/ragdrift")
    for fmt in ("table", "json"):
        status, out, _ = run(capsys, "check-config", str(config), "--format", fmt)
        assert status == 0 and "db:5432/ragdrift" in out
        assert "pg-secret-value" not in out, fmt


@pytest.mark.parametrize(("text", "key"), [
    ("kafka: {nope: 1}\n", "kafka.nope"),
    ("metrics: {port: high}\n", "metrics.port"),
    ("kafka: {topics: [a], dead_letter_topic: a}\n", "kafka.dead_letter_topic"),
    ("- a list\n", "top level"),
    ("judgment: {thresholds: {rerank_shift: .inf}}\n", "judgment.thresholds.rerank_shift"),
    ("judgment: {resolver: {timeout_seconds: -1}}\n", "judgment.resolver.timeout_seconds"),
    ("judgment: {export_dir: ''}\n", "judgment.export_dir"),
])
def test_check_config_error_exits_2_naming_the_key(capsys, tmp_path, text, key):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    status, out, err = run(capsys, "check-config", str(config))
    assert status == 2 and out == ""
    assert key in one_line_error(err)


def test_check_config_error_does_not_echo_a_secret(capsys, monkeypatch, tmp_path):
    config = tmp_path / "ragdrift.yaml"
    config.write_text("{}\n")
    monkeypatch.setenv("RAGDRIFT_KAFKA__CLIENT__SASL_PLAIN_PASSWORD", "env-secret-value")
    monkeypatch.setenv("RAGDRIFT_METRICS__PORT", "not-a-port")
    status, _, err = run(capsys, "check-config", str(config))
    assert status == 2 and "metrics.port" in one_line_error(err)
    assert "env-secret-value" not in err


def test_check_config_missing_file(capsys, tmp_path):
    status, _, err = run(capsys, "check-config", str(tmp_path / "absent.yaml"))
    assert status == 2 and "absent.yaml" in one_line_error(err)


def test_run_with_a_bad_config_exits_2_before_starting(capsys, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("store: {url: 'mysql://db/x'}\n")
    status, _, err = run(capsys, "run", "--config", str(config))
    assert status == 2 and "store.url" in one_line_error(err)
