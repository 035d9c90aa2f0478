"""One agent replica of bench/scaleout.py, in a process of its own, held until its group has settled.

`python replica.py SPEC` builds the agent as deployed (agent/service.py's
`build`: the store, the features, the dead-letter producer, the metrics
endpoint) from SPEC, a JSON object: bootstrap, topic, group, store (a
database URL), judgment and drift (each on or off). It joins the group but
keeps every partition it is assigned paused, so that nothing is consumed
while the group is still forming, and talks to the bench in JSON lines:

- it writes `{"assigned": n}` whenever its partitions change;
- on the line `go` on its stdin it resumes them (the agent's own resume path);
- after each poll it processed it writes `{"seen": records so far, "at":
  time.monotonic(), "cpu": the process's CPU seconds, all threads}`, and
  before the first also `{"first": ..., "cpu": ...}`; `"early": true` marks
  records that came before `go`, which would spoil the measurement;
- on `stop` (or when its stdin closes) it stops, checkpoints, leaves the group
  and writes `{"stopped": true}`.

With SPEC `{"alone": n}` it is the machine's control instead: the same
per-event processing (decode, core, judgment queue, drift counts) of n
generated events in a fresh partition state, with no broker, store or loop.
It writes `{"ready": true}` once the events are generated, processes them on
`go` and writes `{"seconds": elapsed, "cpu": CPU seconds}`.

time.monotonic() is the system's monotonic clock, the same in every process,
so the bench can put the replicas' marks on one time line.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from kafka import TopicPartition

from agent.core.config import CoreConfig
from agent.core.drift.days import DriftConfig
from agent.core.judgment import JudgmentConfig
from agent.core.reasons import RejectedEvent
from agent.core.state import PartitionState
from agent.io.settings.agent import KafkaSettings, MetricsSettings, Settings, StoreSettings
from agent.io.settings.drift import DriftSettings
from agent.io.settings.judgment import JudgmentSettings
from agent.service import build
from agent.synth import generate

_said = threading.Lock()


def say(**fields) -> None:
    with _said:
        print(json.dumps(fields), flush=True)


def settings(spec: dict) -> Settings:
    """The defaults as shipped, but for where the broker and store are, short group timeouts (as the other
    broker benches), a salt for the judgment queue, and the two features the spec switches."""
    return Settings(
        kafka=KafkaSettings(bootstrap_servers=spec["bootstrap"], topics=[spec["topic"]],
                            dead_letter_topic=spec["topic"] + ".dlq", group_id=spec["group"],
                            session_timeout_ms=2000, heartbeat_interval_ms=500),
        store=StoreSettings(url=spec["store"]),
        metrics=MetricsSettings(address="127.0.0.1", port=0),
        judgment=JudgmentSettings(enabled=spec["judgment"], salt="bench-scaleout"),
        drift=DriftSettings(enabled=spec["drift"]),
    )


def run(spec: dict) -> None:
    running = build(settings(spec))
    agent = running.agent
    consumer = agent.consumer
    go = threading.Event()
    hold, assign, revoke, process = agent._hold_while_failing, agent.assign, agent.revoke, agent._process_poll
    poll = consumer.poll
    seen = 0

    def polling(timeout_ms: int = 0, **options) -> dict:
        """Until `go`, a poll waits at most 20 ms, so that every replica resumes within that of the release."""
        return poll(timeout_ms=timeout_ms if go.is_set() else min(timeout_ms, 20), **options)

    def held() -> None:
        if go.is_set():
            hold()  # resumes what is paused, as after a store outage
        else:
            consumer.pause(*consumer.assignment())

    def on_assigned(assigned: list[TopicPartition]) -> None:
        if not go.is_set():
            consumer.pause(*assigned)  # before the first fetch for them
        assign(assigned)
        say(assigned=len(agent.owned))

    def on_revoked(revoked: list[TopicPartition], lost: bool = False) -> None:
        revoke(revoked, lost)
        say(assigned=len(agent.owned))

    def timed(polled) -> bool:
        nonlocal seen
        if not seen:
            say(first=time.monotonic(), cpu=time.process_time())
        wanted = process(polled)
        seen += sum(map(len, polled.values()))
        say(seen=seen, at=time.monotonic(), cpu=time.process_time(), early=not go.is_set())
        return wanted

    # The real methods, wrapped: the group's rebalance listener calls agent.assign and agent.revoke.
    consumer.poll = polling
    agent._hold_while_failing = held  # type: ignore[method-assign]
    agent.assign = on_assigned  # type: ignore[method-assign]
    agent.revoke = on_revoked  # type: ignore[method-assign]
    agent._process_poll = timed  # type: ignore[method-assign]

    def orders() -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
            elif line.strip() == "stop":
                break
        agent.stop()  # on `stop`, or the bench gone

    threading.Thread(target=orders, daemon=True).start()
    try:
        agent.run()
    finally:
        running.close()
    say(stopped=True)


def alone(events: int) -> None:
    lines = list(generate(events, seed=7))
    state = PartitionState(CoreConfig(), judgment=JudgmentConfig(salt="bench-scaleout"), drift=DriftConfig())
    say(ready=True)
    sys.stdin.readline()  # go
    began, cpu = time.monotonic(), time.process_time()
    for line in lines:
        try:
            state.process(line)
        except RejectedEvent:
            pass
    say(seconds=time.monotonic() - began, cpu=time.process_time() - cpu)


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    if "alone" in spec:
        alone(spec["alone"])
    else:
        run(spec)
