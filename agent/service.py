"""Wiring: store, Kafka clients, features, collectors, tracer and the metrics endpoint
around an agent, and running it until a signal."""

from __future__ import annotations

import logging
import signal
import socket
from dataclasses import dataclass

from apscheduler.schedulers.background import BackgroundScheduler
from kafka.errors import KafkaError
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, ProcessCollector

from agent.io.background.judgment import WEEKLY
from agent.io.background.periodic import new_scheduler
from agent.io.features import Wiring, built, tables_of, warnings
from agent.io.features.calibration import ScoreCalibrations
from agent.io.features.drift import Drift
from agent.io.features.judgment import Judgment
from agent.io.features.live_gate import LiveGate
from agent.io.kafka import broker
from agent.io.prometheus.collectors import HealthCollector, Latest, RetrievalCollector
from agent.io.prometheus.endpoint import MetricsServer
from agent.io.settings.agent import Settings
from agent.io.store.database import Store, StoreError
from agent.io.tracing import provider
from agent.jobs.batch import scheduled
from agent.runner import Agent

log = logging.getLogger("ragdrift.agent")

# Every feature beside the metric families, in the order they observe events, write rows and export.
# The agent creates every one's tables; the settings enable each.
FEATURES = (
    Judgment,
    Drift,
    ScoreCalibrations,
    LiveGate,
)
# The jobs (agent/jobs) a feature runs, which io may not import, by the name it looks each up by.
JOBS = {WEEKLY: scheduled}


@dataclass(kw_only=True)
class Running:
    """An agent with its metrics endpoint, wired but not yet consuming."""

    agent: Agent
    server: MetricsServer
    store: Store
    tracer_provider: TracerProvider
    scheduler: BackgroundScheduler  # every feature's background jobs

    def close(self) -> None:
        self.scheduler.shutdown(wait=False)
        self.server.stop()
        self.store.close()
        self.tracer_provider.shutdown()


def build(settings: Settings, tracer_provider: TracerProvider | None = None) -> Running:
    tracer_provider = tracer_provider or provider()
    store = Store(settings.store.url, settings.store.schema, tables_of(FEATURES))
    scheduler = new_scheduler()
    features = built(FEATURES, Wiring(settings, store, scheduler, jobs=JOBS))
    for warning in warnings(FEATURES, settings):
        log.warning(warning)  # once, at start: check-config says the same
    client_id = f"ragdrift-{socket.gethostname()}"
    try:
        consumer = broker.consumer(settings.kafka, client_id)
        producer = broker.producer(settings.kafka, client_id)
    except BaseException:
        store.close()
        raise
    latest = Latest()
    registry = CollectorRegistry()
    registry.register(RetrievalCollector(settings.core(), latest))
    registry.register(HealthCollector(latest))
    ProcessCollector(registry=registry)  # process_start_time_seconds marks restarts for the rules
    for feature in features:
        for collector in feature.collectors():
            registry.register(collector)
    agent = Agent(settings=settings, store=store, latest=latest, tracer=tracer_provider.get_tracer("ragdrift"),
                  clients=broker.Clients(consumer, producer, client_id), features=features)
    m = settings.metrics
    server = MetricsServer(registry, m.address, m.port, health=agent.health, ready=agent.ready,
                           cert_file=m.tls.cert_file, key_file=m.tls.key_file)
    server.start()
    scheduler.start()
    for feature in features:
        feature.start()
    return Running(agent=agent, server=server, store=store, tracer_provider=tracer_provider, scheduler=scheduler)


def serve(settings: Settings) -> int:
    """Run the agent until SIGTERM or SIGINT, then drain and exit 0 (1 on a fatal error)."""
    try:
        running = build(settings)
    except (StoreError, KafkaError, OSError) as exc:
        log.error("cannot start", extra={"error": str(exc)})
        return 1
    log.info("metrics listening", extra={"port": running.server.port})
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: running.agent.stop())
    try:
        running.agent.run()
    except (StoreError, KafkaError) as exc:
        log.error("agent stopped on an error", extra={"error": str(exc)})
        return 1
    finally:
        running.close()
    return 0
