"""What the producer library costs the app's thread per retrieval, beside a bare kafka-python send.

One tansu broker; in the same run, N calls per round of `Producer.retrieval`
for a realistic retrieval (a query of ten words, ten results each with about
800 characters of chunk text, an ACL of two groups, a user with three, dates,
stages, filters, a pipeline). The calling thread captures the values and
queues them; the library's thread builds, hashes, fingerprints, encodes and
sends. The baseline is N calls of kafka-python's
`KafkaProducer.send(topic, value)` with the same settings, of the very bytes
the producer sent (read back from the topic). Both are timed on the calling
thread (the library's thread and kafka-python's network thread run beside
it, as in an app), the two take turns for `--rounds` rounds, and each keeps
its best. The wall time per call is the figure; the calling thread's CPU
time is printed beside it, and the library's own cost per event (from the
first call of a round to its last event acknowledged: the most events a
second one process sends). Target: retrieval <= 1.5x the bare send.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from common import interpreter  # bench/ is the script's directory
from kafka import KafkaConsumer, KafkaProducer

from agent.demo.broker import Tansu
from agent.demo.process import wait_until
from ragdrift_producer import Filter, HashKey, Pipeline, Producer, Result, Stages, User
from ragdrift_producer.transport import DEFAULTS

TARGET = 1.5
WORDS = ("refund", "policy", "invoice", "customer", "account", "billing", "order", "shipping", "return", "warranty",
         "payment", "card", "subscription", "plan", "upgrade", "cancel", "contract", "renewal", "discount", "tax",
         "receipt", "delivery", "address", "password", "login", "security", "device", "support", "ticket",
         "escalation", "manager", "region", "europe")


def retrievals(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` different realistic retrievals, as keyword arguments of `Producer.retrieval`."""
    rng = random.Random(seed)
    user = User(tenant="acme", groups=["support", "emea", "tier-2"])
    calls = []
    for n in range(count):
        results = []
        for rank in range(10):
            text = " ".join(rng.choice(WORDS) for _ in range(130))[:800]
            effective = date(2026, 1, 1) + timedelta(days=rng.randrange(300))
            results.append(Result(
                chunk_id=f"kb-{n}-{rank}#c{rng.randrange(40)}", parent_id=f"kb-{n}-{rank}", source="helpdesk",
                score=round(1 - rank / 20 - rng.random() / 100, 4), rerank_score=round(rng.random(), 4),
                pre_rerank_rank=rank + 3, effective_date=effective, expires_at=effective + timedelta(days=365),
                status="current", acl=["support", "emea"], text=text, packed=rank < 5))
        calls.append({
            "query": " ".join(rng.choice(WORDS) for _ in range(10)), "user": user, "results": results,
            "query_type": "lookup", "language": "en",
            "stages": Stages(candidates=100, after_filter=60, after_rerank=20, packed=5),
            "filters": [Filter(name="acl", removed=30), Filter(name="freshness", removed=10)],
            "pipeline": Pipeline(version="2026.12", retriever="bm25+dense", reranker="cross-encoder-v2",
                                 embedding_model="e5-base"),
            "latency_ms": 42.5, "ts": datetime(2026, 12, 7, 9, 30, tzinfo=UTC),
        })
    return calls


def timed(call: Callable[[int], object], n: int) -> tuple[float, float]:
    """Wall and calling-thread CPU seconds per call of `call(i)` for i < n."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for i in range(n):
        call(i)
    return (time.perf_counter() - wall) / n, (time.thread_time() - cpu) / n


def drained(producer: Producer, sent_before: int, calls: int) -> None:
    wait_until(lambda: producer.stats().sent >= sent_before + calls, 600, 0.01, "the producer's events sent")


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse reports anything else in one line, exit 2)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a whole number of at least 1: {text!r}")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=positive, default=20000, help="calls per round")
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--distinct", type=positive, default=200, help="different retrievals, used in turn")
    args = parser.parse_args()
    kwargs = retrievals(args.distinct)
    with Tansu() as broker:
        for topic in ("bench.producer", "bench.raw"):
            broker.create_topic(topic, 1)
        kafka = {"bootstrap_servers": broker.bootstrap}
        producer = Producer(app="bench", key=HashKey(bytes(range(32))), kafka=kafka, topic="bench.producer",
                            max_queue_events=args.calls + args.distinct, max_queue_bytes=1 << 34, registry=None)
        wait_until(lambda: producer.connected, 30, 0.05, "the producer connected")
        for retrieval in kwargs:  # the bytes it sends, read back: the baseline sends the very same
            producer.retrieval(**retrieval)
        drained(producer, 0, args.distinct)
        consumer = KafkaConsumer("bench.producer", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        values: list[bytes] = []
        while len(values) < args.distinct:
            values += [record.value for batch in consumer.poll(timeout_ms=500).values() for record in batch]
        consumer.close()
        raw = KafkaProducer(**{**DEFAULTS, **kafka})

        def ours(i: int) -> object:
            return producer.retrieval(**kwargs[i % args.distinct])

        def baseline(i: int) -> object:
            return raw.send("bench.raw", values[i % args.distinct])

        best = {"baseline": (float("inf"), float("inf")), "ours": (float("inf"), float("inf"))}
        behind = float("inf")  # the library's thread: seconds per event from the first call to the last sent
        for _ in range(args.rounds):
            for name, call in (("baseline", baseline), ("ours", ours)):
                sent, started = producer.stats().sent, time.perf_counter()
                wall, cpu = timed(call, args.calls)
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
                if name == "ours":
                    drained(producer, sent, args.calls)
                    behind = min(behind, (time.perf_counter() - started) / args.calls)
                raw.flush()  # the round's sending done before the next is timed
        raw.close()
        stats = producer.close(30)
    assert not stats.dropped and not stats.failed, stats
    size = sum(map(len, values)) / len(values)
    (base_wall, base_cpu), (our_wall, our_cpu) = best["baseline"], best["ours"]
    print(f"{args.calls} calls per round, best of {args.rounds}, on {interpreter()}; events of {size:.0f} bytes "
          f"(10 results of 800 characters, each fingerprinted)")
    print(f"{'':<44} {'wall/call':>10} {'ratio':>6}   {'thread CPU/call':>15} {'ratio':>6}")
    print(f"{'KafkaProducer.send (baseline)':<44} {base_wall * 1e6:>7.1f} us {1:>6.2f}   "
          f"{base_cpu * 1e6:>12.1f} us {1:>6.2f}")
    print(f"{'Producer.retrieval, on the calling thread':<44} {our_wall * 1e6:>7.1f} us {our_wall / base_wall:>6.2f}   "
          f"{our_cpu * 1e6:>12.1f} us {our_cpu / base_cpu:>6.2f}")
    print(f"{'each event, built and sent by the library':<44} {behind * 1e6:>7.1f} us {behind / base_wall:>6.2f}   "
          "(its own thread: the most events/s one process sends)")
    print(f"target: Producer.retrieval on the calling thread <= {TARGET:.1f}x a bare send of the same bytes (wall)")


if __name__ == "__main__":
    main()
