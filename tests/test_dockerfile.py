"""The Dockerfile the chart's image is built from, read as text (no Docker
daemon is needed; tests/test_image.py builds and runs it): a wheel of this
package installed in a virtual environment that a slim Python 3.11 stage
copies, without the demo extra, running as the non-root
UID that the chart's securityContext names, with the entrypoint and config
path the chart's Deployment relies on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
VALUES = yaml.safe_load((ROOT / "helm" / "ragdrift" / "values.yaml").read_text())


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [(w.upper(), rest.strip()) for w, _, rest in
            (line.partition(" ") for line in lines if line and not line.startswith("#"))]


def stages() -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            out.append([])
        out[-1].append(ins)
    return out


def test_a_wheel_of_this_package_is_installed_in_a_venv_that_the_slim_python_311_stage_copies():
    build, final = stages()
    assert build[0][1].startswith("python:3.11-slim-bookworm AS ")
    (install,) = [a for i, a in build if i == "RUN" and "pip install" in a]
    assert "python3 -m venv /opt/ragdrift" in install and "pip wheel" in install
    assert "pip install --no-cache-dir -c constraints/agent.txt " in install  # the versions CI tested
    assert "ragdrift_agent-" in install and ".whl" in install and "crc32c" in install
    assert "has_fast_crc()" in install  # the build fails without the fast CRC
    assert install.endswith("pip uninstall --yes --quiet pip")  # no pip in the image
    assert final[0][1] == "python:3.11-slim-bookworm"
    assert ("COPY", "--from=build /opt/ragdrift /opt/ragdrift") in final
    assert not any(i == "RUN" and "pip" in a for i, a in final)
    assert dict(final[1:])["ENV"].split("PATH=")[1].startswith("/opt/ragdrift/bin:")


def test_no_demo_extra_is_installed():
    text = (ROOT / "Dockerfile").read_text()
    assert "[demo]" not in text and "calfkit" not in text
    assert not any("demo" in a for i, a in instructions() if i == "RUN")


def test_the_image_runs_as_the_non_root_uid_of_the_charts_security_context():
    final = stages()[-1]
    users = [a for i, a in final if i == "USER"]
    assert users, "no USER: the image would run as root"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0  # numeric, so runAsNonRoot can verify it
    assert int(uid) == VALUES["podSecurityContext"]["runAsUser"] == VALUES["securityContext"]["runAsUser"]
    assert int(gid) == VALUES["podSecurityContext"]["runAsGroup"]


def test_entrypoint_command_and_port_match_the_chart():
    final = dict(stages()[-1][1:])
    assert json.loads(final["ENTRYPOINT"]) == ["ragdrift"]
    assert json.loads(final["CMD"]) == ["run", "--config", "/etc/ragdrift/ragdrift.yaml"]
    assert final["EXPOSE"] == str(VALUES["config"]["metrics"]["port"]) == "9108"
