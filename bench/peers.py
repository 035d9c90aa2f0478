"""The agent beside what a team would otherwise build, on one broker in one run.

One tansu broker, one topic of generated events with every incident kind,
keyed by app and stamped with the event time (what the windowed peers
window on). Each tool reads the whole topic in a process of its own, in a
new consumer group, for `--rounds` rounds taken in turn, and keeps its best
rate (counted from the first record received to the last processed; a raw
consumer's first poll, received before its clock started, is not counted): the
raw consumers compute nothing; the others compute the seven families of
families.py, the agent all of its own. Rates are ratios against raw
kafka-python in the same run. After each run, a peer's family totals must
equal the agent's over the same events, or the script exits non-zero naming
the peer and the family: nobody is fast by being wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import orjson
from common import fill, interpreter  # bench/ is the script's directory
from families import DESCRIPTION, differences
from peer_runs import TOOLS

from agent.demo.broker import Tansu
from agent.synth import INCIDENT_KINDS, ScheduledIncident, generate

TOPIC = "bench.peers.v1"
RUNS = Path(__file__).with_name("peer_runs.py")
# whylogs needs numpy < 2, the agent numpy 2: its own environment (`make bench-whylogs`).
WHYLOGS_VENV = os.environ.get("RAGDRIFT_BENCH_WHYLOGS", Path.home() / ".cache/ragdrift/bench-whylogs")
WHYLOGS_PYTHON = Path(WHYLOGS_VENV) / "bin/python"
PEERS = ("by-hand", "quix-streams", "bytewax", "whylogs")  # what a team would build instead of the agent
SHOWN = {  # each tool's name in the table, and what it computes
    "kafka-python": ("raw kafka-python, poll and discard", "nothing"),
    "confluent-kafka": ("raw confluent-kafka, poll and discard", "nothing"),
    "agent": ("ragdrift agent", "everything, with validation, dead letters, exactly-once"),
    "agent-confluent": ("ragdrift agent, kafka.library: confluent-kafka", "everything, with validation, dead letters, exactly-once"),
    "by-hand": ("kafka-python + json + prometheus-client, by hand", "the 7 families, no windows, no validation"),
    "quix-streams": ("Quix Streams, 5-minute tumbling windows", "the 7 families"),
    "bytewax": ("Bytewax (its Kafka connector), 5-minute tumbling windows", "the 7 families"),
    "whylogs": ("whylogs, frames of 1,000 rows", "column profiles of the 7 families' values per event"),
}


def traffic(events: int, seed: int) -> tuple[list[bytes], list[bytes], list[int]]:
    """The events with every incident kind, their apps as keys, their times in ms."""
    incidents = [ScheduledIncident(kind, 1 + 3 * n) for n, kind in enumerate(INCIDENT_KINDS)]
    lines = list(generate(events, seed, incidents=incidents))
    parsed = [orjson.loads(line) for line in lines]
    keys = [event["app"].encode() for event in parsed]
    stamps = [int(datetime.fromisoformat(event["ts"].upper()).timestamp() * 1000) for event in parsed]
    return lines, keys, stamps


def run(tool: str, bootstrap: str, count: int, group: str) -> dict:
    """One tool's run in its own process: {"rate", "totals"} or {"error"}."""
    python = str(WHYLOGS_PYTHON) if tool == "whylogs" else sys.executable
    if not Path(python).exists():
        return {"error": f"not installed ({python}; make bench-whylogs)"}
    done = subprocess.run([python, str(RUNS), tool, bootstrap, TOPIC, str(count), group],
                          capture_output=True, text=True)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    best: dict[str, float] = {}
    errors: dict[str, str] = {}
    mismatches: list[str] = []
    lines, keys, stamps = traffic(args.events, args.seed)
    with Tansu() as broker:
        broker.create_topic(TOPIC, 3)
        broker.create_topic(TOPIC + ".dlq", 1)
        fill(broker.bootstrap, lines, TOPIC, keys, stamps)
        expected = None
        for i in range(args.rounds):
            for tool in TOOLS:  # the agent before the peers it checks
                if tool in errors:
                    continue
                out = run(tool, broker.bootstrap, args.events, f"bench-peers-{tool}-{i}")
                if "error" in out:
                    errors[tool] = out["error"]
                    print(f"{SHOWN[tool][0]}: {out['error']}", file=sys.stderr)
                    continue
                best[tool] = max(best.get(tool, 0.0), out["rate"])
                if tool == "agent":
                    expected = expected or out["totals"]
                if out["totals"] is None or expected is None:
                    continue
                for family in differences(expected, out["totals"]):
                    mismatches.append(f"{SHOWN[tool][0]} (round {i + 1}): {family}")
    baseline = best.get("kafka-python")
    print(f"{args.events:,} generated events with every incident kind on tansu, "
          f"{sum(map(len, lines)) // len(lines):,} bytes each on average, best of {args.rounds} rounds, "
          f"each tool in its own process on {interpreter()} (whylogs in its own environment); the 7 families: {DESCRIPTION}")
    print()
    print("| tool | events/s | / raw kafka-python | what it computes |")
    print("| --- | ---: | ---: | --- |")
    for tool, (name, computes) in SHOWN.items():
        if tool in best:
            ratio = f"{best[tool] / baseline:.2f}" if baseline else "-"
            print(f"| {name} | {best[tool]:,.0f} | {ratio} | {computes} |")
        else:
            print(f"| {name} | - | - | cannot run here: {errors[tool]} |")
    peers = {tool: rate for tool, rate in best.items() if tool in PEERS}
    if peers:
        fastest = max(peers, key=peers.__getitem__)
        for tool in ("agent", "agent-confluent"):
            if tool in best:
                print(f"\n{SHOWN[tool][0]} / the fastest peer ({SHOWN[fastest][0]}): {best[tool] / peers[fastest]:.2f}")
    if expected is not None and not mismatches:
        print("\nevery peer's family totals equal the agent's")
    for mismatch in mismatches:
        print(f"MISMATCH {mismatch}", file=sys.stderr)
    if mismatches or expected is None:
        sys.exit(1)


if __name__ == "__main__":
    main()
