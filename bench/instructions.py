"""Instructions per event under callgrind, beside orjson.loads of the same lines.

Wall-clock ratios on a shared machine wander: on a 2-core VM, bench/core.py
gave the same code 0.17 one run and 0.21 the next, even with its runs paired
by round. Callgrind counts the
instructions a run executes, which repeat to about 0.01 % (with a fixed hash
seed) whatever else the machine is doing, so this tells whether a change made
the hot path cheaper. Instructions are not time (orjson's SIMD parsing does
more per instruction than the interpreter does), so the targets stay on
bench/core.py's ratios.

Each workload runs in its own process under `valgrind --tool=callgrind`,
counted only around its measured loop, after a warm-up on the first events
(memos and label sets start warm, as in a running agent). What switching
the count on and off costs is measured on an empty loop and taken off.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import orjson

from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig
from agent.core.judgment import JudgmentConfig
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState
from agent.synth import generate

WORKLOADS = {
    "(switching the count)": "none",
    "orjson.loads (baseline)": "orjson",
    "decode + core": "core",
    "  split by pipeline version": "split",
    "  + judgment queue": "judging",
    "  + drift days": "drift",
}
_REFS = re.compile(rb"I\s+refs:\s+([\d,]+)")  # valgrind's closing summary


def workload(name: str):
    """One event's work for each workload (a fresh state each)."""
    if name == "none":
        return lambda line: None
    if name == "orjson":
        return orjson.loads
    state = PartitionState(CoreConfig(by_pipeline_version=name == "split"),
                           judgment=JudgmentConfig() if name in ("judging", "drift") else None,
                           drift=DriftConfig() if name == "drift" else None)

    def process(line: bytes) -> None:
        try:
            state.process(line)
        except RejectedEvent:
            pass

    return process


def child(name: str, warm: int, events: int) -> None:
    """Run under callgrind: instrumentation is switched on for the measured events only."""
    lines = list(generate(warm + events, seed=7))
    run = workload(name)
    for line in lines[:warm]:
        run(line)
    toggle = ["callgrind_control", "--instr", "", str(os.getpid())]
    subprocess.run([*toggle[:2], "on", *toggle[3:]], check=True, capture_output=True)
    for line in lines[warm:]:
        run(line)
    subprocess.run([*toggle[:2], "off", *toggle[3:]], check=True, capture_output=True)


def count(name: str, warm: int, events: int) -> int:
    """Instructions executed while instrumentation was on."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={tmp}/callgrind.out",
             sys.executable, __file__, "--child", name, "--warm", str(warm), "--events", str(events)],
            check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = _REFS.search(done.stderr)
    assert found is not None, done.stderr
    return int(found[1].replace(b",", b""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="measured events")
    parser.add_argument("--warm", type=int, default=1000, help="events before counting starts")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.warm, args.events)
        return
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("bench/instructions.py: not run, valgrind is not installed (Debian: apt-get install valgrind)")
        return
    counts = {label: count(name, args.warm, args.events) for label, name in WORKLOADS.items()}
    switching = counts.pop("(switching the count)")
    per_event = {label: (n - switching) / args.events for label, n in counts.items()}
    baseline = per_event["orjson.loads (baseline)"]
    print(f"{args.events} generated events after {args.warm} warm-up events, instructions under callgrind"
          f" ({switching:,} for switching the count, taken off)")
    for label, n in per_event.items():
        print(f"{label:<26} {n:>10,.0f} instructions/event   ratio {baseline / n:.3f}")


if __name__ == "__main__":
    main()
