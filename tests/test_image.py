"""The container image, built from this tree and run the way the Helm chart
runs it: read-only root filesystem, a tmpfs data directory, no capabilities,
UID 10001. Against the real broker it serves /healthz, /readyz and the same
metric families as the agent run from the tree, dead-letters a bad message,
and exits 0 on SIGTERM. Needs rootful podman, runc and mmdebstrap
(tests/image.py); `.ci/run` installs them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from kafka import KafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

from agent import synth
from agent.demo.process import wait_until
from tests.agentctl import AgentProcess, agent_config, new_port, produce
from tests.image import host_limits, podman_fixture  # noqa: F401 - the `podman` fixture
from tests.services import http_get, unique_name

pytestmark = pytest.mark.image

TAG = "localhost/ragdrift:test"
DATA = "/var/lib/ragdrift"


def families(port: int) -> set[str]:
    text = http_get(f"http://127.0.0.1:{port}/metrics").decode()
    return {f.name for f in text_string_to_metric_families(text) if f.name.startswith("ragdrift_")}


def answers(port: int, path: str) -> bool:
    try:
        http_get(f"http://127.0.0.1:{port}{path}", timeout=1)
        return True
    except OSError:
        return False


def events(port: int, **labels: str) -> float:
    """Sum of ragdrift_events_total over the series matching `labels`."""
    text = http_get(f"http://127.0.0.1:{port}/metrics").decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "ragdrift_events_total" and labels.items() <= s.labels.items())


def test_the_image_runs_the_agent_read_only_as_uid_10001(podman, broker, make_topic, group_id, tmp_path):
    podman.ensure_base()
    podman.build(TAG, tmp_path)

    topic, dlq = make_topic(1, "retrievals"), make_topic(1, "dlq")
    good = next(synth.generate(1, seed=3, start=datetime.now(UTC) - timedelta(minutes=3)))
    produce(broker.bootstrap, topic, [good, b"{not json"])
    port = new_port()
    config = agent_config(broker.bootstrap, topic, dlq, group_id, f"sqlite:///{DATA}/state.db", port)
    config_path = tmp_path / "ragdrift.yaml"
    config_path.write_text(yaml.safe_dump(config))
    config_path.chmod(0o644)

    name = unique_name("ragdrift")
    podman.run("run", "--detach", "--name", name, "--network", "host", "--read-only",
               "--tmpfs", f"{DATA}:rw,size=64m,U",
               "--cap-drop", "ALL", "--security-opt", "no-new-privileges", *host_limits(),
               "--volume", f"{config_path}:/etc/ragdrift/ragdrift.yaml:ro", TAG)
    reference = None
    try:
        wait_until(lambda: answers(port, "/healthz"), 60, 0.2, "container /healthz")
        wait_until(lambda: events(port) >= 2, 60, 0.2, "container handled both messages")
        wait_until(lambda: answers(port, "/readyz"), 30, 0.2, "container /readyz")

        consumer = KafkaConsumer(dlq, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=10000)
        letters = [record for _, record in zip(range(1), consumer)]
        consumer.close()
        assert (events(port, outcome="processed"), events(port, outcome="rejected")) == (1, 1)
        assert [(r.value, dict(r.headers)["ragdrift-reason"]) for r in letters] == [(b"{not json", b"invalid_json")]

        assert podman.run("exec", name, "id", "-u").stdout.strip() == "10001"
        write = podman.run("exec", name, "touch", "/probe", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr

        # The image exports every family the agent run from this tree exports.
        reference = AgentProcess(agent_config(broker.bootstrap, topic, make_topic(1, "dlq"), unique_name("g"),
                                              f"sqlite:///{tmp_path}/s.db", new_port())).start()
        wait_until(lambda: events(reference.port) >= 2, 60, 0.2, "reference agent handled both messages")
        exported = families(port)
        assert exported == families(reference.port)
        assert len(exported) > 100

        podman.run("kill", "--signal", "TERM", name)
        assert podman.run("wait", name, timeout=60).stdout.strip() == "0"
    except BaseException:
        print(podman.run("logs", name, check=False).stderr[-6000:])
        raise
    finally:
        if reference is not None:
            reference.stop()
        podman.run("rm", "--force", "--ignore", name, check=False)
