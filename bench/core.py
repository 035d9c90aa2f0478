"""Decode + core throughput beside plain JSON decoding of the same lines.

Prints events per second for `orjson.loads`, `json.loads`, the agent's
decode + every metric family, and the same with the judgment queue (risk,
sampling, security incidents) and the daily drift counts as the agent runs
them, and each one's ratio
against orjson measured in the same run. Target: decode + core >= 0.25 of
orjson.loads (stretch 0.35).
"""

from __future__ import annotations

import argparse
import json
import time

import orjson

from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig
from agent.core.judging import JudgingConfig
from agent.core.state import PartitionState
from agent.synth import generate


CHECKPOINT_EVERY = 2000  # events between checkpoints (the agent's: 5 s)


def best_rate(run, lines: list[bytes], repeats: int) -> float:
    """Events per second of the fastest of `repeats` runs (least disturbed)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run(lines)
        best = min(best, time.perf_counter() - start)
    return len(lines) / best


def plain_orjson(lines: list[bytes]) -> None:
    for line in lines:
        orjson.loads(line)


def plain_json(lines: list[bytes]) -> None:
    for line in lines:
        json.loads(line)


def families(lines: list[bytes]) -> None:
    state = PartitionState(CoreConfig())
    for line in lines:
        state.process(line)


def with_judging(lines: list[bytes]) -> None:
    state = PartitionState(CoreConfig(), judging=JudgingConfig())  # as the agent runs it
    for i, line in enumerate(lines, 1):
        state.process(line)
        if i % CHECKPOINT_EVERY == 0:
            state.judging.take()  # the rows a checkpoint writes


def with_drift(lines: list[bytes]) -> None:
    state = PartitionState(CoreConfig(), judging=JudgingConfig(), drift=DriftConfig())  # as the agent runs it
    for i, line in enumerate(lines, 1):
        state.process(line)
        if i % CHECKPOINT_EVERY == 0:
            state.judging.take()
            state.drift.take()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    lines = list(generate(args.events, seed=7))
    size = sum(map(len, lines)) / len(lines)
    baseline = best_rate(plain_orjson, lines, args.repeats)
    rows = [
        ("orjson.loads (baseline)", baseline),
        ("json.loads", best_rate(plain_json, lines, args.repeats)),
        ("decode + core", best_rate(families, lines, args.repeats)),
        ("  + judgment queue", best_rate(with_judging, lines, args.repeats)),
        ("  + drift days", best_rate(with_drift, lines, args.repeats)),
    ]
    print(f"{len(lines)} generated events, {size:.0f} bytes each on average")
    for name, rate in rows:
        print(f"{name:<26} {rate:>10,.0f} events/s   ratio {rate / baseline:.2f}")
    print("target: decode + core >= 0.25 of orjson.loads (stretch 0.35)")


if __name__ == "__main__":
    main()
