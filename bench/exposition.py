"""A /metrics render at the label cap beside prometheus-client's own exposition.

Traffic with hundreds of distinct apps, sources, filters, query types and
languages fills every label dimension to its cap (top N shown, the rest
folded into `other`). The agent's collectors render that snapshot; the
baseline is a registry of plain prometheus-client gauges holding exactly the
same series (names, labels, values), rendered by the same `generate_latest`.
Target: the agent's render costs at most 2x the baseline's.
"""

from __future__ import annotations

import argparse
import time

import orjson
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agent.core.config import CoreConfig
from agent.core.snapshot import Exposition
from agent.core.state import PartitionState, sums
from agent.io.prometheus.collectors import HealthCollector, Latest, RetrievalCollector
from agent.synth import generate

TARGET = 2.0


def capped_state(config: CoreConfig, events: int, distinct: int) -> PartitionState:
    """Generated traffic whose label values run through `distinct` names per dimension."""
    state = PartitionState(config)
    for i, line in enumerate(generate(events, seed=11, rate=20, invalid_rate=0)):
        doc = orjson.loads(line)

        n = i % distinct
        doc["app"] = f"app-{n}"
        doc["query"]["type"] = f"type_{n}"
        doc["query"]["language"] = "".join(chr(ord("a") + int(d)) for d in f"{n:03d}")
        for j, result in enumerate(doc["results"]):
            result["source"] = f"source-{(n + j) % distinct}"
        for j, item in enumerate(doc.get("filters", [])):
            item["name"] = f"filter_{(n + j) % distinct}"
        state.process(orjson.dumps(doc))
    return state


def native_registry(text: bytes) -> CollectorRegistry:
    """The same series as plain prometheus-client gauges."""
    registry = CollectorRegistry()
    gauges: dict[str, Gauge] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            gauge = gauges.get(sample.name)
            if gauge is None:
                gauge = gauges[sample.name] = Gauge(sample.name, family.documentation or sample.name,
                                                    sorted(sample.labels), registry=registry)
            (gauge.labels(**sample.labels) if sample.labels else gauge).set(sample.value)
    return registry


def best_seconds(registry: CollectorRegistry, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        generate_latest(registry)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--distinct", type=int, default=300, help="label values per dimension in the traffic")
    parser.add_argument("--top-n", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    config = CoreConfig(max_label_values=200)
    state = capped_state(config, args.events, args.distinct)
    now = state.windows.watermark
    assert now is not None, "no event counted"
    windows = sums(config, [state], now)
    counters = windows.pop("totals")
    latest = Latest()
    latest.publish(Exposition(config, args.top_n).snapshot(counters, windows, now))
    agent = CollectorRegistry()
    agent.register(RetrievalCollector(config, latest))
    agent.register(HealthCollector(latest))
    text = generate_latest(agent)
    native = native_registry(text)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    assert series == sum(1 for line in generate_latest(native).splitlines() if line and not line.startswith(b"#"))
    ours, theirs = best_seconds(agent, args.repeats), best_seconds(native, args.repeats)
    print(f"{series} series, {len(text) / 1024:.0f} KiB per scrape (top {args.top_n} of {args.distinct} values)")
    print(f"{'prometheus-client gauges (baseline)':<36} {theirs * 1000:>8.1f} ms   ratio 1.00")
    print(f"{'agent collectors':<36} {ours * 1000:>8.1f} ms   ratio {ours / theirs:.2f}")
    print(f"target: agent render <= {TARGET:.1f}x prometheus-client's own exposition")


if __name__ == "__main__":
    main()
