"""`ragdrift demo`: an embedded broker, a made-up app's live traffic with incidents, and the agent.

Everything runs in this process or as its child (the tansu broker), and
Ctrl-C or SIGTERM stops all of it, leaving no process behind. The app
(agent/demo/retriever.py) sends its retrievals through the producer
library, as a team's app would: hashed with a key of this run's own, their
texts kept by a `JsonLinesRecorder` in the demo's directory. What the agent
stores stays there too (`ragdrift-demo/` by default), with a configuration
for the other commands whose resolver reads that file: `ragdrift batch build
--config ragdrift-demo/ragdrift.yaml --week ... --partial` builds a judgment
batch of the demo's traffic with the app's own query and chunk texts.
"""

from __future__ import annotations

import itertools
import random
import secrets
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

from agent.core.access import UNAUTHORIZED_RESULTS
from agent.core.freshness import STALE_RESULTS
from agent.core.sampling import iso_week
from agent.core.snapshot import Snapshot
from agent.core.tally import Counter, Tally
from agent.core.zero_results import RETRIEVALS, ZERO_RESULTS
from agent.demo.broker import Tansu
from agent.demo.retriever import Helpdesk
from agent.io import logs
from agent.io.settings.agent import load
from agent.service import build
from ragdrift_producer import HashKey, JsonLinesRecorder, Producer

TOPIC = "retrieval.v1"
DLQ = "retrieval.v1.dlq"
# A leak, a stale spike and a score drift: minutes after the start, each for
# INCIDENT_MINUTES, in a share of the retrievals (real incidents hit some traffic, not all).
SCHEDULE = (("leak", 2.0), ("stale", 5.0), ("score-drift", 8.0))
INCIDENT_MINUTES = 10.0
SHARE = {"leak": 0.15, "stale": 0.2, "score-drift": 0.3}
# A trickle of events from a producer that is not on the library, which the agent dead-letters.
INVALID_RATE = 0.002
INVALID = (
    b'{"schema": "retrieval.v1", "event_id": "cut-short", "ts": "2026-',  # a line cut short
    b"retrieval served in 120 ms",  # a log line on the wrong topic
    b'{"schema": "retrieval.v0", "event_id": "old-client"}',  # an old client's schema
)


class Demo:
    def __init__(self, *, rate: float = 50.0, port: int = 9108, minutes: float = 0, seed: int = 1, out=sys.stdout,
                 directory: str = "ragdrift-demo"):
        self.directory = Path(directory)
        self.rate = rate
        self.port = port
        self.minutes = minutes
        self.seed = seed
        self.out = out
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> int:
        logs.setup("auto", "ERROR")  # keep the live summary readable
        # Our own handlers, whatever was inherited: a shell's background job
        # or a process manager may start us with SIGINT ignored.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop.set())
        broker = Tansu().start()
        running = None
        threads: list[threading.Thread] = []
        try:
            broker.create_topic(TOPIC, 3)
            broker.create_topic(DLQ, 1)
            running = build(load(self._configure(broker.bootstrap), environ={}))
            threads = [
                threading.Thread(target=running.agent.run, name="agent", daemon=True),
                threading.Thread(target=self._traffic, args=(broker.bootstrap,), name="traffic", daemon=True),
            ]
            for thread in threads:
                thread.start()
            print(f"ragdrift demo: metrics at http://127.0.0.1:{running.server.port}/metrics", file=self.out)
            print(f"broker (tansu) at {broker.bootstrap}, topics {TOPIC} and {DLQ}", file=self.out)
            incidents = ", ".join(f"{kind}@{minute:g}" for kind, minute in SCHEDULE)
            print(f"incidents: {incidents} (minutes from now); Ctrl-C stops", file=self.out)
            print(f"a judgment batch of this traffic, any time: ragdrift batch build --config "
                  f"{self.directory / 'ragdrift.yaml'} --week {iso_week(time.time())} --partial", file=self.out)
            self._watch(running.agent, threads[0])
        finally:
            self.stop.set()
            if running is not None:
                running.agent.stop()
            for thread in threads:
                thread.join(timeout=15)
            if running is not None:
                running.close()
            broker.stop()
        print("\nragdrift demo: stopped", file=self.out)
        return 0

    def _configure(self, bootstrap: str) -> Path:
        """The demo's directory (made by the command, before anything starts):
        a fresh store and texts file (the embedded broker keeps nothing across
        runs, and each run hashes with a key of its own), batches kept, and the
        configuration file."""
        store = self.directory / "state.db"
        for stale in [*self.directory.glob("state.db*"), self.texts]:
            stale.unlink(missing_ok=True)
        config = {
            "kafka": {"bootstrap_servers": bootstrap, "topics": [TOPIC], "dead_letter_topic": DLQ,
                      "group_id": "ragdrift-demo", "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000},
            "store": {"url": f"sqlite:///{store.resolve()}"},
            "metrics": {"address": "127.0.0.1", "port": self.port},
            "logging": {"format": "auto", "level": "ERROR"},
            "judgment": {"export_dir": str((self.directory / "batches").resolve()), "budget": 5, "uniform_budget": 20,
                         "salt": secrets.token_hex(16),  # a secret of this run's own: it keys the batch's order
                         "resolver": {"kind": "file", "path": str(self.texts.resolve())}},
        }
        path = self.directory / "ragdrift.yaml"
        path.write_text("# Written by `ragdrift demo` for the commands that read its store.\n"
                        + yaml.safe_dump(config, sort_keys=False))
        return path

    @property
    def texts(self) -> Path:
        """The app's texts, kept by its recorder, read by the batch's resolver."""
        return self.directory / "texts.jsonl"

    def _traffic(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        rng = random.Random(self.seed)
        app = Helpdesk(datetime.now(UTC))
        recorder = JsonLinesRecorder(self.texts)
        producer = Producer(app="helpdesk", key=HashKey(secrets.token_hex(32).encode()),
                            kafka={"bootstrap_servers": bootstrap}, topic=TOPIC, recorder=recorder,
                            registry=None)  # the app's counts: this process serves only the agent's /metrics
        # The library never sends an invalid event: the dead-letter path needs a bare producer's bytes.
        bare = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
        started = time.monotonic()
        try:
            for i in itertools.count():
                delay = started + i / self.rate - time.monotonic()
                if delay > 0 and self.stop.wait(delay):
                    break
                if self.stop.is_set():
                    break
                if rng.random() < INVALID_RATE:
                    bare.send(TOPIC, rng.choice(INVALID))
                    self.sent += 1
                    continue
                minute = (time.monotonic() - started) / 60
                faults = frozenset(kind for kind, start in SCHEDULE
                                   if start <= minute < start + INCIDENT_MINUTES and rng.random() < SHARE[kind])
                query, query_type, user = app.ask(rng)
                found = app.retrieve(query, user, rng, faults)
                if producer.retrieval(query=query, user=user, results=found.results, query_type=query_type,
                                      language="en", stages=found.stages, filters=found.filters,
                                      pipeline=found.pipeline, latency_ms=found.latency_ms) is not None:
                    self.sent += 1
        finally:
            producer.close(timeout=5)
            recorder.close()
            bare.close(timeout=5)

    def _watch(self, agent, agent_thread: threading.Thread) -> None:
        deadline = time.monotonic() + self.minutes * 60 if self.minutes else float("inf")
        tty = self.out.isatty()
        while not self.stop.wait(2.0):
            if not agent_thread.is_alive():
                print("\nragdrift demo: the agent stopped unexpectedly (see the log above)", file=self.out)
                return
            line = _status(agent.latest.snapshot, self.sent)
            print(("\r" + line) if tty else line, end="" if tty else "\n", file=self.out, flush=True)
            if time.monotonic() >= deadline:
                return


def _status(snapshot: Snapshot, sent: int) -> str:
    def total(family: Counter, tally: Tally) -> int:
        return int(sum(v for k, v in tally.items() if k[0] == family.name))

    window = snapshot.windows.get("5m", {})
    events = total(RETRIEVALS, window)
    zero_rate = f"{total(ZERO_RESULTS, window) / events:.1%}" if events else "-"
    return (
        f"sent {sent}  processed {int(snapshot.processed)}  dead-lettered {sum(snapshot.rejected.values())}  "
        f"zero-result(5m) {zero_rate}  unauthorized {total(UNAUTHORIZED_RESULTS, snapshot.counters)}  "
        f"stale {total(STALE_RESULTS, snapshot.counters)}  lag {sum(snapshot.health.lag.values())}   "
    )
