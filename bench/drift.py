"""The cost of drift evaluation per scrape, as a share of the agent's time.

In one run: the agent's core rate (decode, every metric family, the daily
drift counts; PartitionState.process, as bench/core.py measures it) on
generated events, with the baseline active (its vocabulary for new terms,
its clusters counted live), then the evaluation the agent does at each scrape: the
sub-day windows (5m, 1h) summed over a replica's partitions, each holding an
hour of that traffic, evaluated against a 7-day baseline of the same
deployment. The refresh job's daily windows (`today`, `yesterday`) are timed
too, once a minute. A saturated agent loses the evaluation's time from its
processing, so the cost is (sub-day evaluation per 15 s scrape + daily
evaluation per 60 s) over that time. Target: under 5 % of the throughput.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from typing import cast

from agent.core.config import CoreConfig
from agent.core.drift import evaluate, freeze
from agent.core.drift.days import DriftConfig, DriftDays, counts_of, recent_windows, window
from agent.core.state import ActiveBaseline, PartitionState
from agent.io.background.drift import RECENT_SECONDS, REFRESH_SECONDS
from agent.synth import generate

DAY0 = datetime(2026, 3, 2, tzinfo=UTC)


def best(run, repeats: int) -> float:
    """Seconds of the fastest of `repeats` runs (least disturbed)."""
    out = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        out = min(out, time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=6, help="partitions a replica owns")
    parser.add_argument("--per-partition", type=int, default=6000, help="events per partition in the last hour")
    parser.add_argument("--per-day", type=int, default=3000, help="events per baseline day")
    args = parser.parse_args()
    days: dict = {}
    for d in range(7):
        state = PartitionState(CoreConfig(), drift=DriftConfig())
        for line in generate(args.per_day, seed=d, start=DAY0 + timedelta(days=d), rate=args.per_day / 86400):
            state.process(line)
        days.update(counts_of(state.feature("drift").take()))
    baseline = freeze(days, "bench")
    assert baseline.queries is not None, "the days sampled no query terms"
    shared = ActiveBaseline(baseline.version, baseline.queries.vocabulary)

    start = DAY0 + timedelta(days=8)
    states, elapsed, events = [], 0.0, 0
    for p in range(args.partitions):
        lines = list(generate(args.per_partition, seed=100 + p, start=start, rate=args.per_partition / 3600))
        state = PartitionState(CoreConfig(), shared, drift=DriftConfig())
        drift = cast(DriftDays, state.feature("drift"))
        drift.queries = baseline.queries  # as the drift feature's `attach` leaves it: query clusters counted live
        t = time.perf_counter()
        for i, line in enumerate(lines):
            state.process(line)
            if i % 2000 == 1999:
                drift.take()  # a checkpoint
        elapsed += time.perf_counter() - t
        events += len(lines)
        states.append(state)
    rate = events / elapsed
    now = (start + timedelta(hours=1)).timestamp() - 1
    drifts = [cast(DriftDays, s.feature("drift")) for s in states]

    def sub_day():
        for counts in recent_windows(drifts, now).values():
            evaluate(baseline, counts)

    daily = window(days)  # one day's worth of counts per window
    sub = best(sub_day, 5)
    day = best(lambda: [evaluate(baseline, daily) for _ in range(2)], 5)
    share = sub / RECENT_SECONDS + day / REFRESH_SECONDS
    print(f"agent core rate (decode, core, drift counts and query clusters): {rate:,.0f} events/s")
    print(f"sub-day windows (5m, 1h) over {args.partitions} partitions x {args.per_partition} events/h: "
          f"{sub * 1000:.1f} ms per evaluation, every {RECENT_SECONDS:.0f} s")
    print(f"daily windows (today, yesterday): {day * 1000:.1f} ms per evaluation, every {REFRESH_SECONDS:.0f} s")
    print(f"share of a saturated agent's time: {share:.4f} ({share * rate * RECENT_SECONDS:,.0f} events of "
          f"{rate * RECENT_SECONDS:,.0f} per 15 s scrape interval)   target < 0.05")


if __name__ == "__main__":
    main()
