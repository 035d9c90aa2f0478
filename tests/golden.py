"""Golden artefacts: what ragdrift does today with one fixed traffic, so that a
refactor that promises no change in behaviour can prove it.

One run (`record`) generates traffic with incidents and invalid lines (fixed
seed, fixed event times, fixed Kafka timestamps), and writes:

- ``traffic.txt``: the traffic's line count and sha256 (the input itself);
- ``replay.json``, ``replay-sample.json``: `ragdrift replay --format json`,
  without and with ``--sample`` (a fixed judgment salt);
- ``store/<table>.jsonl``: every ``ragdrift_*`` table of the SQLite store
  a real agent filled from the traffic on a 3-partition topic (records put
  on partitions by their line number), after a clean stop, the batches and
  the baseline: its columns, then its rows, one a line, sorted;
- ``batches/<week>/<file>``: `ragdrift batch build` of each week, and
  ``batches/files.txt`` with each file's mode;
- ``metrics.txt``: the agent's /metrics once everything is consumed and
  checkpointed;
- ``baseline.json``, ``drift.json``: `ragdrift baseline show` of a baseline
  frozen from the first day's stored counts, `ragdrift drift` of the second.

The section "normalization" below names every change made to what the code
wrote (wall-clock times, the run's directory, the broker's topic id, metrics
of the process or its timing); everything else is compared byte for byte.

Re-record (only when behaviour is meant to change, and say so in the commit)::

    .venv/bin/python -m tests.golden --write

tests/test_golden.py runs the same in a temporary directory and compares.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from kafka import KafkaProducer

from agent import synth
from agent.demo.broker import Tansu, tansu_bin
from agent.demo.process import wait_until
from tests.agentctl import ROOT, AgentProcess, agent_config, new_port
from tests.services import http_get

GOLDEN = ROOT / "tests" / "data" / "golden"
INVALID = ROOT / "tests" / "data" / "events" / "invalid"

# -- the traffic -------------------------------------------------------------
SEED = 20260301
EVENTS = 2000
START = datetime(2026, 3, 1, 23, 52, tzinfo=UTC)  # a Sunday: the traffic spans two ISO weeks and two days
RATE = 2.0  # events per second of event time: 17 minutes
INCIDENTS = ("leak@1", "stale@3", "score-drift@5", "filter-outage@7", "source-dominance@9", "new-terms@11")
INVALID_RATE = 0.02
FIXTURE_EVERY = 16  # one line of tests/data/events/invalid every this many lines
MAX_BYTES = 1 << 16  # the replay's and the agent's message limit: one line is made larger
WRITE_DELAY_MS = 2000  # a record's Kafka timestamp: its line's nominal time plus this
EARLY_EVERY, EARLY_MS = 211, 2 * 3600 * 1000  # every 211th record is written 2 h before its event: a future event
LATE_EVENTS, LATE_FROM, LATE_EVERY = 20, 1000, 40  # events of 10 minutes before the start, inserted late
WEEKS = ("2026-W09", "2026-W10")
DAYS = ("2026-03-01", "2026-03-02")

# -- the agent ---------------------------------------------------------------
TOPIC, DLQ, GROUP = "retrievals", "retrievals.dlq", "golden"
PARTITIONS = 3
JUDGMENT = {"salt": "golden-salt", "budget": 3, "uniform_budget": 6}
WAIT_SECONDS = 90


def traffic() -> list[bytes]:
    """The synthetic traffic, with every one-message invalid fixture, one too-large line and late events mixed in."""
    lines = list(synth.generate(EVENTS, SEED, START, RATE, [synth.parse_incident(i) for i in INCIDENTS], INVALID_RATE))
    extra = [_one_line(p.read_bytes()) for p in sorted(INVALID.glob("*.json")) if p.name != "expected.json"]
    extra = [line for line in extra if line.strip()]  # an empty message is no JSON Lines line
    (valid,) = synth.generate(1, SEED + 1, START, RATE)
    extra.append(valid[:-1] + b', "padding": "' + b"x" * MAX_BYTES + b'"}')
    for n, line in enumerate(extra, 1):
        lines.insert(n * FIXTURE_EVERY, line)
    late = synth.generate(LATE_EVENTS, SEED + 2, START - timedelta(minutes=10), RATE)
    for n, line in enumerate(late):
        lines.insert(LATE_FROM + n * LATE_EVERY, line)
    return lines


def _one_line(message: bytes) -> bytes:
    """A fixture on one line: its newlines stand between JSON tokens, where any whitespace does."""
    return message.rstrip(b"\n").replace(b"\r\n", b" ").replace(b"\n", b" ")


def partition_of(n: int) -> int:
    return n % PARTITIONS


def timestamp_ms(n: int) -> int:
    """A record's Kafka timestamp: its line's nominal time, or long before it for a few (future events)."""
    written = int(START.timestamp() * 1000) + WRITE_DELAY_MS + int(n * 1000 / RATE)
    return written - EARLY_MS if n % EARLY_EVERY == 0 else written


# -- normalization: every change to what the code wrote ------------------------

# Store blobs of JSON (states, candidates, drift counts) are decoded and dumped
# again with sorted keys, one row a line (`dump_table`).

# Store columns holding wall-clock times: dropped.
VOLATILE_COLUMNS = {
    "ragdrift_checkpoints": {"updated_at"},  # when the checkpoint was written
    "ragdrift_batches": {"built_at"},  # when `batch build` ran
    "ragdrift_partial_batches": {"built_at"},
    "ragdrift_batch_projects": {"pushed_at"},
    "ragdrift_baselines": {"created_at"},
    "ragdrift_qrels": {"imported_at"},
    "ragdrift_calibrations": {"fitted_at"},
}
# Store values that name one run's things: replaced by a placeholder.
VOLATILE_VALUES = {
    ("ragdrift_checkpoints", "topic_id"): "<topic id>",  # the broker's id of the topic: a new UUID for each topic
}
# Metric families that tell of the process, not of the events. (The rolling
# windows and this week's judgment candidates are relative to the clock's now:
# for traffic this old they are always empty, so their absence is kept.)
VOLATILE_FAMILIES = (
    re.compile(r"^(process|python)_"),  # the Python process
    re.compile(r"_timestamp_seconds\b"),  # wall-clock times (last checkpoint, last contact, last batch)
    re.compile(r"^ragdrift_checkpoint_age_seconds\b"),  # seconds since the last checkpoint
    re.compile(r"^ragdrift_kafka_unreachable_seconds\b"),  # seconds since Kafka answered
    re.compile(r"^ragdrift_checkpoints_total\b"),  # how many checkpoints the timer made
    re.compile(r"^ragdrift_consumer_lag_messages\b"),  # from a periodic probe of the log end: racy
    re.compile(r"^ragdrift_security_queue_events\b"),  # read from the store at start, then every minute
)
# The Python version in ragdrift_build_info: the interpreter's, not ragdrift's.
PYTHON_LABEL = re.compile(r'python="[^"]*"')
# A histogram's `_sum` of float observations: the agent adds each poll's
# additions to its totals, so the order of the float additions follows how the
# broker batched the records, and the last digits vary from run to run.
FLOAT_SUM = re.compile(r"^(ragdrift_\w+_sum(?:\{.*\})?) (\S+)$")
SUM_DIGITS = 10
# The run's temporary directory, in the store's paths (a batch's directory).
TMP = "<tmp>"


def normalize_metrics(text: str) -> str:
    kept = []
    for line in text.splitlines():
        name = line.split(" ", 3)[2] if line.startswith("# ") else line
        if any(rule.search(name) for rule in VOLATILE_FAMILIES):
            continue
        line = PYTHON_LABEL.sub('python="<python>"', line)
        found = FLOAT_SUM.match(line)
        kept.append(f"{found[1]} {float(found[2]):.{SUM_DIGITS}g}" if found else line)
    return "\n".join(kept) + "\n"


def dump_table(db: sqlite3.Connection, table: str, tmp: str) -> str:
    drop = VOLATILE_COLUMNS.get(table, set())
    cursor = db.execute(f'SELECT * FROM "{table}"')
    columns = [c[0] for c in cursor.description]
    rows = []
    for values in cursor:
        row = {c: _value(v, tmp) for c, v in zip(columns, values) if c not in drop}
        for (where, column), placeholder in VOLATILE_VALUES.items():
            if where == table and row.get(column) is not None:
                row[column] = placeholder
        rows.append(row)
    lines = sorted(json.dumps(row, sort_keys=True, ensure_ascii=False) for row in rows)
    return "\n".join([json.dumps([c for c in columns if c not in drop]), *lines]) + "\n"


def _value(value, tmp: str):
    """A column's value as JSON: a blob of JSON decoded, the run's directory in a path as `TMP`."""
    if isinstance(value, bytes):
        try:
            return {"json": json.loads(value)}
        except ValueError:
            return {"hex": value.hex()}
    if isinstance(value, str):
        return value.replace(tmp, TMP)
    return value


# -- the run -----------------------------------------------------------------


def record(out: Path, work: Path, tansu: str) -> None:
    """Write every artefact into `out`, working in `work`."""
    out.mkdir(parents=True, exist_ok=True)
    lines = traffic()
    data = work / "traffic.jsonl"
    data.write_bytes(b"".join(line + b"\n" for line in lines))
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    (out / "traffic.txt").write_text(f"lines {len(lines)}\nsha256 {digest}\n")
    broker = Tansu(binary=tansu).start()
    try:
        broker.create_topic(TOPIC, PARTITIONS)
        broker.create_topic(DLQ, 1)
        config = agent_config(broker.bootstrap, TOPIC, DLQ, GROUP, f"sqlite:///{work}/store.db", new_port())
        config["kafka"]["max_message_bytes"] = MAX_BYTES
        config["judgment"] = {**JUDGMENT, "export_dir": str(work / "batches")}
        config_path = work / "ragdrift.yaml"
        config_path.write_text(yaml.safe_dump(config))
        _replays(out, data, config_path)
        ends = _produce(broker.bootstrap, lines)
        metrics = _run_agent(config, work / "store.db", ends, len(lines))
        (out / "metrics.txt").write_text(normalize_metrics(metrics))
    finally:
        broker.stop()
    _batches(out, work, config_path)
    _drift(out, config_path)
    db = sqlite3.connect(work / "store.db")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if r[0].startswith("ragdrift_")]
        (out / "store").mkdir(exist_ok=True)
        for table in sorted(tables):
            (out / "store" / f"{table}.jsonl").write_text(dump_table(db, table, str(work)))
    finally:
        db.close()


def _ragdrift(*args: str) -> str:
    # A fixed umask: the batch files' modes are then the code's own, whatever the shell's umask.
    done = subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=ROOT, capture_output=True, check=False,
                          umask=0o022)
    if done.returncode != 0:
        raise RuntimeError(f"ragdrift {' '.join(args)} exited {done.returncode}:\n{done.stderr.decode()}")
    return done.stdout.decode()


def _replays(out: Path, data: Path, config: Path) -> None:
    common = ("replay", str(data), "--format", "json", "--max-bytes", str(MAX_BYTES))
    (out / "replay.json").write_text(_ragdrift(*common))
    (out / "replay-sample.json").write_text(_ragdrift(*common, "--sample", "--config", str(config)))


def _produce(bootstrap: str, lines: list[bytes]) -> dict[int, int]:
    """Each line to its partition with its fixed timestamp, in order; the log end of each partition."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_in_flight_requests_per_connection=1,
                             max_request_size=4 * MAX_BYTES)
    try:
        sent = [producer.send(TOPIC, line, partition=partition_of(n), timestamp_ms=timestamp_ms(n))
                for n, line in enumerate(lines)]
        producer.flush()
        ends: dict[int, int] = {}
        for future in sent:
            meta = future.get(timeout=30)
            ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
        return ends
    finally:
        producer.close()


def _run_agent(config: dict, db: Path, ends: dict[int, int], count: int) -> str:
    """Run the agent until every record is processed and checkpointed; its /metrics then; stop it cleanly."""
    agent = AgentProcess(config).start()
    try:
        wait_until(lambda: _checkpointed(db) == ends, WAIT_SECONDS, 0.1, "every partition checkpointed at its end")
        wait_until(lambda: agent.value("ragdrift_events_total") == count, WAIT_SECONDS, 0.1, "every record counted")
        text = http_get(f"http://127.0.0.1:{agent.port}/metrics", timeout=5).decode()
        code = agent.terminate(30)
        if code != 0:
            raise RuntimeError(f"agent exited {code}:\n{agent.log()}")
        return text
    finally:
        agent.stop()


def _checkpointed(db: Path) -> dict[int, int]:
    if not db.exists():
        return {}
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        try:
            query = 'SELECT "partition", next_offset FROM ragdrift_checkpoints WHERE topic = ?'
            return dict(conn.execute(query, (TOPIC,)))
        except sqlite3.OperationalError:  # the agent has not created its tables yet
            return {}


def _batches(out: Path, work: Path, config: Path) -> None:
    """Build each week's batch; copy its files as they are, note their modes."""
    modes = []
    for week in WEEKS:
        built = work / "built" / week
        _ragdrift("batch", "build", "--config", str(config), "--week", week, "--out", str(built))
        (directory,) = built.iterdir()  # named by the batch id, which the manifest holds
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            name = path.relative_to(directory)
            target = out / "batches" / week / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
            modes.append(f"{week}/{name} {stat.filemode(path.stat().st_mode)}")
    (out / "batches" / "files.txt").write_text("\n".join(modes) + "\n")


def _drift(out: Path, config: Path) -> None:
    """Freeze the first day's counts into a baseline; judge the second day against it."""
    _ragdrift("baseline", "freeze", "--config", str(config), "--name", "golden", "--from", DAYS[0], "--to", DAYS[0])
    shown = _ragdrift("baseline", "show", "golden", "--config", str(config), "--format", "json")
    (out / "baseline.json").write_text(shown)
    (out / "drift.json").write_text(_ragdrift("drift", "--config", str(config), "--day", DAYS[1], "--format", "json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"re-record {GOLDEN.relative_to(ROOT)}")
    parser.add_argument("--out", type=Path, help="write the artefacts here instead")
    args = parser.parse_args(argv)
    if not args.write and args.out is None:
        parser.error("give --write or --out DIR")
    out = GOLDEN if args.write else args.out
    if args.write:
        shutil.rmtree(out, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="ragdrift-golden-") as work:
        record(out, Path(work), tansu_bin())
    return 0


if __name__ == "__main__":
    sys.exit(main())
