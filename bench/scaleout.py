"""Scale-out: two agent replicas beside one, over the same events, on one broker and one PostgreSQL store.

One tansu broker, one 4-partition topic filled with generated events (its
producer flushed and closed before any replica starts). Then, in turns for
`--rounds` rounds, each measurement in a new consumer group and a fresh
PostgreSQL database: one replica owning all 4 partitions (the baseline), two
replicas owning 2 each, and one replica with the judgment queue off, with
the drift counts off, and with both off. Every replica is a process of its
own (bench/replica.py: the agent as deployed, with the shipped defaults), so
two can use two cores.

What is timed: each replica joins its group with its partitions held paused;
once every partition of the topic is assigned (to the one replica, or 2 to
each of the two), all are let go together. A rate counts from the first
record any replica received to the last record any replica processed, so
process start-up and the group join are not measured, alike for one replica
and two. Target: two replicas >= 1.7 times one.

Also printed, per measurement: each replica's CPU seconds over its events
(events per CPU-second: the per-core figure a deployment is sized by), and
what the machine's cores did from the release to the last event (the
replicas, tansu, every PostgreSQL process on the machine, the rest, and the
hypervisor's steal), to tell a broker-, store- or machine-bound run from a
replica-bound one. The ratio of two replicas over one is the product of two
quotients it also prints: of the cores the replicas got (their CPU seconds
over the measured seconds) and of their events per CPU-second. And in each
round a control: the same per-event processing alone (no broker, store or
loop) in one process and in two at once, which is what the machine gave two
processes at that moment, whatever else ran on it.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from common import fill, interpreter  # bench/ is the script's directory

from agent.demo.broker import Tansu
from agent.synth import generate

TOPIC = "bench.scaleout.v1"
PARTITIONS = 4
REPLICA = Path(__file__).resolve().parent / "replica.py"
POSTGRES = os.environ.get("RAGDRIFT_TEST_PG", "postgresql://root@127.0.0.1:5432/test")
HZ = os.sysconf("SC_CLK_TCK")
SETTLE_SECONDS = 60  # start-up and group join, at most
FINISH_SECONDS = 600


@dataclass(frozen=True)
class Workload:
    name: str
    replicas: int
    _: KW_ONLY
    judgment: bool = True
    drift: bool = True


BASELINE = Workload("one replica, full product (baseline)", 1)
TWO = Workload("two replicas, full product", 2)
WORKLOADS = (BASELINE, TWO, Workload("one replica, judgment queue off", 1, judgment=False),
             Workload("one replica, drift counts off", 1, drift=False),
             Workload("one replica, both off", 1, judgment=False, drift=False))


@dataclass(frozen=True, kw_only=True)
class Measured:
    rate: float  # events/s, first record received to last processed
    seconds: float
    per_cpu_second: float  # events per CPU-second of the replicas (all their threads)
    shares: list[int]  # records each replica processed
    cores: dict[str, float]  # cores busy from the release to the last event, by whom
    skew: float  # seconds between the replicas' first records

    @property
    def replica_cores(self) -> float:
        """The replicas' CPU seconds over the measured seconds: rate = replica_cores * per_cpu_second."""
        return self.rate / self.per_cpu_second


class Replica:
    """A bench/replica.py process, and what it has said."""

    def __init__(self, spec: dict, said: queue.Queue, index: int, *, logs: Path):
        self.log = logs / f"replica-{uuid.uuid4().hex[:8]}.log"
        with open(self.log, "wb") as stderr:
            self.proc = subprocess.Popen([sys.executable, str(REPLICA), json.dumps(spec)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1,
                                         cwd=REPLICA.parent)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both piped
        self.orders, self.said = self.proc.stdin, self.proc.stdout
        self.assigned = self.seen = 0
        self.first: tuple[float, float] | None = None  # monotonic time, CPU seconds
        self.last: tuple[float, float] | None = None
        self.early = self.rebalanced = self.released = self.ready = self.done = False
        self.alone: tuple[float, float] | None = None  # the control's seconds and CPU seconds
        threading.Thread(target=self._read, args=(said, index), daemon=True).start()

    def _read(self, said: queue.Queue, index: int) -> None:
        for line in self.said:
            said.put((index, json.loads(line)))
        said.put((index, None))

    def heard(self, message: dict) -> None:
        if "assigned" in message:
            self.assigned = message["assigned"]
            self.rebalanced = self.rebalanced or self.released
        elif "first" in message:
            self.first = message["first"], message["cpu"]
        elif "seen" in message:
            self.seen, self.last = message["seen"], (message["at"], message["cpu"])
            self.early = self.early or message["early"]
        elif "ready" in message:
            self.ready = True
        elif "seconds" in message:
            self.alone, self.done = (message["seconds"], message["cpu"]), True
        elif "stopped" in message:
            self.done = True

    def tell(self, order: str) -> None:
        self.released = self.released or order == "go"
        self.orders.write(order + "\n")
        self.orders.flush()

    def failure(self) -> str:
        tail = self.log.read_text(errors="replace").strip().splitlines()[-5:]
        return f"replica exited with {self.proc.poll()}: " + (" | ".join(tail) or "(no output)")

    def end(self) -> None:
        try:
            self.tell("stop")
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)


class Database:
    """A fresh PostgreSQL database on the server at `admin`, dropped (its connections closed) at the end."""

    def __init__(self, admin: str):
        self.admin = admin
        self.name = f"ragdrift_bench_{uuid.uuid4().hex[:12]}"
        self.url = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + self.name

    def _run(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def __enter__(self) -> str:
        self._run(f'CREATE DATABASE "{self.name}"')
        return self.url

    def __exit__(self, *exc) -> None:
        self._run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


def ticks(pid: int) -> int:
    """CPU clock ticks a process has used (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime


def postgres_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def machine() -> tuple[int, int]:
    """The machine's busy and steal clock ticks, all cores."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return user + nice + system + irq + softirq, steal


def sample(replicas: list[Replica], broker: Tansu) -> dict[str, int]:
    busy, steal = machine()
    assert broker.proc is not None  # started
    return {"replicas": sum(ticks(r.proc.pid) for r in replicas), "tansu": ticks(broker.proc.pid),
            "machine": busy, "steal": steal, **{f"postgres {pid}": ticks(pid) for pid in postgres_pids()}}


def used(before: dict[str, int], after: dict[str, int], seconds: float) -> dict[str, float]:
    """Cores busy between two samples, by whom (PostgreSQL: the processes there at both)."""
    delta = {name: (after[name] - before[name]) / (seconds * HZ) for name in before.keys() & after.keys()}
    cores = {name: delta[name] for name in ("replicas", "tansu")}
    cores["postgres"] = sum(v for name, v in delta.items() if name.startswith("postgres "))
    cores["rest"] = delta["machine"] - sum(cores.values())
    cores["steal"] = delta["steal"]
    cores["idle"] = (os.cpu_count() or 1) - delta["machine"] - delta["steal"]
    return cores


def wait_for(replicas: list[Replica], said: queue.Queue, done, seconds: float, what: str) -> None:
    """Take in what the replicas say until `done()`, or exit naming `what` and the replica that failed."""
    deadline = time.monotonic() + seconds
    while not done():
        try:
            index, message = said.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise SystemExit(f"scaleout: no {what} within {seconds} s") from None
        if message is None and not replicas[index].done:
            raise SystemExit(f"scaleout: waiting for {what}: {replicas[index].failure()}")
        if message is not None:
            replicas[index].heard(message)


def measure(broker: Tansu, admin: str, workload: Workload, count: int, logs: Path) -> Measured:
    with Database(admin) as store:
        group = f"scaleout-{uuid.uuid4().hex[:8]}"
        spec = {"bootstrap": broker.bootstrap, "topic": TOPIC, "group": group, "store": store,
                "judgment": workload.judgment, "drift": workload.drift}
        said: queue.Queue = queue.Queue()
        replicas: list[Replica] = []
        try:
            replicas += [Replica(spec, said, i, logs=logs) for i in range(workload.replicas)]
            share = PARTITIONS // workload.replicas
            wait_for(replicas, said, lambda: all(r.assigned == share for r in replicas), SETTLE_SECONDS,
                     f"settled group ({share} partitions each)")
            before = sample(replicas, broker)
            released = time.monotonic()
            for replica in replicas:
                replica.tell("go")
            wait_for(replicas, said, lambda: sum(r.seen for r in replicas) >= count, FINISH_SECONDS,
                     f"end of the {count} events")
            after = sample(replicas, broker)
            finished = time.monotonic()
        finally:
            for replica in replicas:
                replica.end()
    if any(r.early for r in replicas):
        raise SystemExit("scaleout: a replica received records before its group had settled; the measurement "
                         "would include the group join")
    if any(r.rebalanced for r in replicas):
        raise SystemExit("scaleout: the group rebalanced during the measurement")
    marks = [(r.first, r.last) for r in replicas if r.first and r.last]
    first = min(start[0] for start, _ in marks)
    last = max(end[0] for _, end in marks)
    cpu = sum(end[1] - start[1] for start, end in marks)
    return Measured(rate=count / (last - first), seconds=last - first, per_cpu_second=count / cpu,
                    shares=[r.seen for r in replicas], cores=used(before, after, finished - released),
                    skew=max(start[0] for start, _ in marks) - first)


def alone(count: int, processes: int, logs: Path) -> tuple[float, float]:
    """The control: the rate of the agent's per-event processing with no broker, store or loop
    (bench/replica.py), in `processes` processes at once, each over its share of `count` events;
    and its events per CPU-second."""
    said: queue.Queue = queue.Queue()
    children: list[Replica] = []
    try:
        children += [Replica({"alone": count // processes}, said, i, logs=logs) for i in range(processes)]
        wait_for(children, said, lambda: all(c.ready for c in children), SETTLE_SECONDS, "generated events")
        for child in children:
            child.tell("go")
        wait_for(children, said, lambda: all(c.alone for c in children), FINISH_SECONDS, "the control's end")
    finally:
        for child in children:
            child.end()
    done = [c.alone for c in children if c.alone]
    events = processes * (count // processes)
    return events / max(seconds for seconds, _ in done), events / sum(cpu for _, cpu in done)


def show(workload: Workload, m: Measured, baseline: float) -> str:
    cores = ", ".join(f"{name} {value:.2f}" for name, value in m.cores.items())
    shares = " + ".join(f"{s:,}" for s in m.shares)
    return (f"  {workload.name:<38} {m.rate:>8,.0f} events/s  ratio {m.rate / baseline:.2f}  "
            f"({m.seconds:.2f} s; {m.per_cpu_second:,.0f} events per replica CPU-second; the replicas used "
            f"{m.replica_cores:.2f} cores; events {shares}"
            + (f", first records {m.skew:.3f} s apart" if len(m.shares) > 1 else "")
            + f"; cores busy from the release: {cores})")


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", default=POSTGRES, help="a database on the server to create the bench's in "
                        "(default: $RAGDRIFT_TEST_PG or %(default)s)")
    args = parser.parse_args()
    if args.events < 1 or args.rounds < 1:
        parser.error("--events and --rounds must be at least 1")
    try:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True, connect_timeout=5) as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]  # SHOW has a row
    except Exception as exc:  # psycopg missing, a bad URL, no server: one line, whichever
        print(f"scaleout: PostgreSQL at {args.postgres} unusable: {str(exc).strip().splitlines()[0]}",
              file=sys.stderr)
        sys.exit(2)
    results: dict[Workload, list[Measured]] = {w: [] for w in WORKLOADS}
    controls: list[float] = []
    with Tansu() as broker, tempfile.TemporaryDirectory(prefix="ragdrift-scaleout-") as logs:
        broker.create_topic(TOPIC, PARTITIONS)
        broker.create_topic(TOPIC + ".dlq", 1)
        lines = list(generate(args.events, seed=7))
        fill(broker.bootstrap, lines, TOPIC)
        print(f"{args.events} generated events, {sum(map(len, lines)) // len(lines)} bytes each on average, on tansu "
              f"({PARTITIONS} partitions, filled and its producer closed before any replica starts); store "
              f"PostgreSQL {server}, a fresh database per measurement; {os.cpu_count()} cores; {interpreter()}")
        print("rates: first record any replica received to the last any processed, after the group settled "
              "(start-up and the group join are not measured); cores busy: from the release to the last event")
        for i in range(args.rounds):
            print(f"round {i + 1}, load average {load()}:")
            (one, one_cpu), (two, two_cpu) = alone(args.events, 1, Path(logs)), alone(args.events, 2, Path(logs))
            controls.append(two / one)
            print(f"  {'control: the processing alone, 1 process':<38} {one:>8,.0f} events/s "
                  f"({one_cpu:,.0f} per CPU-second); 2 processes at once {two:,.0f} events/s ({two_cpu:,.0f} per "
                  f"CPU-second): the machine gives {two / one:.2f}")
            baseline = 0.0
            for workload in WORKLOADS:
                m = measure(broker, args.postgres, workload, args.events, Path(logs))
                baseline = baseline or m.rate
                results[workload].append(m)
                print(show(workload, m, baseline), flush=True)
    ratios = [two.rate / one.rate for one, two in zip(results[BASELINE], results[TWO], strict=True)]
    print(f"load average at the end {load()}")
    print(f"two replicas over one, each round: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"median {statistics.median(ratios):.2f}; target >= 1.7")
    print("  each as the cores the replicas got x their events per CPU-second, two over one: " + "; ".join(
        f"{two.replica_cores / one.replica_cores:.2f} x {two.per_cpu_second / one.per_cpu_second:.2f}"
        for one, two in zip(results[BASELINE], results[TWO], strict=True)))
    print(f"the control (the processing alone, no broker, store or loop), 2 processes over 1, each round: "
          f"{', '.join(f'{r:.2f}' for r in controls)}; median {statistics.median(controls):.2f}: "
          f"what the machine gave two processes then")
    print("events per replica CPU-second (per core), median over rounds:")
    for workload in WORKLOADS:
        rates = [m.per_cpu_second for m in results[workload]]
        print(f"  {workload.name:<38} {statistics.median(rates):>8,.0f}   (elapsed: median "
              f"{statistics.median(m.rate for m in results[workload]):,.0f} events/s)")


if __name__ == "__main__":
    main()
