"""`ragdrift compare` of large runs: a TREC run is read as it streams past, a JSON
run (plain or with facts) held as its text and read one query at a time, so the
command's peak memory beyond the interpreter's is at most 4 times the larger run
file (it was 15 times before for TREC, more for JSON: every line or result an
object or more)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

QUERIES, DEPTH, JUDGED = 600, 1000, 20  # TREC: 600,000 lines of about 40 bytes, 24 MB a run
DEPTHS = {"trec": DEPTH, "json": 2000, "facts": 1100}  # about 20 MB a run in each format

# The command in a fresh interpreter, which prints its own peak resident set (KiB) last.
PEAK = ("import resource, sys\n"
        "from agent.cli import main\n"
        "status = main(sys.argv[1:])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
        "sys.exit(status)\n")


def peak_kib(*args: Path | str) -> int:
    done = subprocess.run([sys.executable, "-c", PEAK, *map(str, args)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1], check=False)
    assert done.returncode in (0, 1), done.stderr  # pass or fail: the comparison was made
    return int(done.stderr.split()[-1])


def write_run(path: Path, seed: int, queries: int, depth: int, form: str = "trec") -> Path:
    """A run: every query ranks the same candidate docs, scored (TREC) or ordered (JSON) at
    random. A plain JSON run has one id a line; one with facts is one line, every third
    result with its facts (a few unauthorized or stale)."""
    rng = random.Random(seed)
    with path.open("w") as out:
        if form == "trec":
            for q in range(queries):
                out.writelines(f"q{q:04d} Q0 d{q:04d}-{i:05d} {i + 1} {rng.random() * 20:.5f} run{seed}\n"
                               for i in range(depth))
            return path
        out.write('{"format": "ragdrift.run.v1", "config": "c", "queries": {' if form == "facts" else "{")
        for q in range(queries):
            docs: list = [f"d{q:04d}-{i:05d}" for i in rng.sample(range(depth), depth)]
            if form == "facts":
                docs[::3] = [{"doc": doc, "authorized": rng.random() > 0.01, "stale": rng.random() < 0.05}
                             for doc in docs[::3]]
            entry = {"results": docs, "principal_groups": ["eng"], "latency_ms": 40.5} if form == "facts" else docs
            out.write(f'{", " if q else ""}"q{q:04d}": {json.dumps(entry, indent=None if form == "facts" else 1)}')
        out.write("}}\n" if form == "facts" else "}\n")
    return path


@pytest.mark.parametrize("form", ["trec", "json", "facts"])
def test_compare_holds_at_most_four_times_the_larger_run(tmp_path, form):
    rng = random.Random(0)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{q:04d} 0 d{q:04d}-{doc:05d} {rng.randrange(4)}\n"
                             for q in range(QUERIES) for doc in rng.sample(range(DEPTH), JUDGED)))
    small = [write_run(tmp_path / f"small{seed}", seed, QUERIES, 1, form) for seed in (1, 2)]
    large = [write_run(tmp_path / f"run{seed}", seed, QUERIES, DEPTHS[form], form) for seed in (1, 2)]
    size = max(path.stat().st_size for path in large)

    baseline = peak_kib("compare", qrels, *small, "10")  # the interpreter, its imports and the qrels
    peak = peak_kib("compare", qrels, *large, "10")
    ratio = (peak - baseline) * 1024 / size
    print(f"{form} run file {size / 1e6:.1f} MB; peak {peak / 1024:.1f} MiB, baseline {baseline / 1024:.1f} MiB: "
          f"{ratio:.2f} times the file")
    assert ratio <= 4
