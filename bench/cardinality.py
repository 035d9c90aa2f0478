"""The agent on normal traffic and under many app names, on one broker in one run.

A producer bug or an attack can send thousands of distinct app names and
sources. The agent folds them into its bounded label set (docs/metrics.md),
so it should keep its pace and its memory: target, under 20,000 apps and
20,000 sources, at least half the normal rate and at most 1.5x the normal
peak RSS. Each run is a process of its own (its peak RSS is its own), with
the defaults (drift counts on, checkpoints to SQLite), in a new consumer
group over a topic filled beforehand; its rate counts from the first record
received to the last, so the group join is not measured.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile

import orjson
from common import agent, consume, fill  # bench/ is the script's directory

from agent.demo.broker import Tansu
from agent.synth import generate

NORMAL, ATTACK = "bench.normal.v1", "bench.attack.v1"


def attack(lines: list[bytes], names: int) -> list[bytes]:
    """`lines` with the n-th event's app and its results' source named `app-{n % names}`, `source-{n % names}`."""
    out = []
    for n, line in enumerate(lines):
        event = orjson.loads(line)
        event["app"] = f"app-{n % names}"
        for result in event.get("results") or ():
            result["source"] = f"source-{n % names}"
        out.append(orjson.dumps(event))
    return out


def run_agent(bootstrap: str, topic: str, count: int) -> None:
    """Run the agent over `topic` until it has processed `count` records; print its rate and peak RSS."""
    with tempfile.TemporaryDirectory() as workdir:
        running = agent(bootstrap, topic, f"bench-{topic}", workdir)
        rate = consume(running, count)
        running.close()
    print(orjson.dumps({"rate": rate, "rss_mib": _peak_rss_mib()}).decode())


def _peak_rss_mib() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, not inherited from the parent across exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run(bootstrap: str, topic: str, count: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--consume", topic, "--bootstrap", bootstrap,
                          "--events", str(count)], check=True, capture_output=True, text=True).stdout
    return orjson.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40000)
    parser.add_argument("--names", type=int, default=20000, help="distinct app names and sources of the attack")
    parser.add_argument("--consume", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.consume:
        run_agent(args.bootstrap, args.consume, args.events)
        return
    with Tansu() as broker:
        lines = list(generate(args.events, seed=7))
        for topic, traffic in ((NORMAL, lines), (ATTACK, attack(lines, args.names))):
            broker.create_topic(topic, 3)
            broker.create_topic(topic + ".dlq", 1)
            fill(broker.bootstrap, traffic, topic)
        normal, attacked = run(broker.bootstrap, NORMAL, args.events), run(broker.bootstrap, ATTACK, args.events)
    print(f"{args.events} events per run on tansu; the attack names {args.names} apps and {args.names} sources")
    print(f"{'normal traffic':<26} {normal['rate']:>8,.0f} events/s   peak RSS {normal['rss_mib']:>6.0f} MiB")
    print(f"{'many apps and sources':<26} {attacked['rate']:>8,.0f} events/s   peak RSS {attacked['rss_mib']:>6.0f} MiB")
    print(f"{'attack / normal':<26} {attacked['rate'] / normal['rate']:>8.2f} x rate      "
          f"{attacked['rss_mib'] / normal['rss_mib']:>6.2f} x peak RSS")
    print("target: rate >= 0.5x, peak RSS <= 1.5x")


if __name__ == "__main__":
    main()
