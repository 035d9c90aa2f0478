"""Wiring: store, Kafka clients, collectors, tracer and the metrics endpoint
around an agent, and running it until a signal."""

from __future__ import annotations

import logging
import signal
import socket
from dataclasses import dataclass

from kafka.errors import KafkaError
from prometheus_client import CollectorRegistry, ProcessCollector

from agent.io.kafka import broker
from agent.io.prometheus.endpoint import MetricsServer
from agent.io.prometheus.collectors import HealthCollector, Latest, RetrievalCollector
from agent.io.background.calibration import CalibrationWatch
from agent.io.store.calibrations import TABLES as CALIBRATION_TABLES
from agent.io.store.calibrations import Calibrations
from agent.io.store.drift import TABLES as DRIFT_TABLES
from agent.io.store.drift import DriftStore
from agent.io.background.drift import DriftCollector, DriftWatch
from agent.io.store.qrels import TABLES as QRELS_TABLES
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES, Queue
from agent.io.settings.judgment import gate
from agent.io.background.judgment import JudgmentCollector, JudgmentJobs
from agent.io.settings.agent import Settings
from agent.io.store.database import Store, StoreError
from agent.io.tracing import provider
from agent.runner import Agent

log = logging.getLogger("ragdrift.agent")


@dataclass
class Running:
    """An agent with its metrics endpoint, wired but not yet consuming."""

    agent: Agent
    server: MetricsServer
    store: Store
    tracer_provider: object
    judging: JudgmentJobs | None = None  # the weekly batch and the queues' figures
    drift_watch: DriftWatch | None = None  # drift of the stored days against the newest baseline
    calibration_watch: CalibrationWatch | None = None  # the stored score calibrations

    def close(self) -> None:
        if self.judging is not None:
            self.judging.stop()
        if self.calibration_watch is not None:
            self.calibration_watch.stop()
        if self.drift_watch is not None:
            self.drift_watch.stop()
        self.server.stop()
        self.store.close()
        self.tracer_provider.shutdown()


def build(settings: Settings, tracer_provider=None) -> Running:
    tracer_provider = tracer_provider or provider()
    store = Store(settings.store.url, settings.store.schema, TABLES + DRIFT_TABLES + CALIBRATION_TABLES + QRELS_TABLES)
    queue = Queue(store) if settings.judgment.enabled else None
    drift_store = DriftStore(store) if settings.drift.enabled else None
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
    judging = None
    if queue is not None:
        judging = JudgmentJobs(settings, queue, Qrels(store), settings.metrics.top_n)
        registry.register(JudgmentCollector(judging))
    watch = None
    if drift_store is not None:
        watch = DriftWatch(drift_store, settings.kafka.group_id)
        registry.register(DriftCollector(watch))
    calibrations = None
    if settings.judgment.enabled:
        calibration = settings.judgment.calibration
        calibrations = CalibrationWatch(Calibrations(store), gate(calibration), calibration.refresh_seconds)
    agent = Agent(settings, store, latest, tracer_provider.get_tracer("ragdrift"), consumer, producer, client_id, queue,
                  drift_store, watch, calibrations)
    m = settings.metrics
    server = MetricsServer(registry, m.address, m.port, agent.health, agent.ready, m.tls.cert_file, m.tls.key_file)
    return Running(agent, server.start(), store, tracer_provider, judging and judging.start(),
                   watch and watch.start(), calibrations and calibrations.start())


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
