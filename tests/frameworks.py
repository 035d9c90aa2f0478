"""Real LangChain and Haystack for tests: the ``frameworks_python`` fixture.

The frameworks (with their OpenInference instrumentors, opentelemetry-sdk and
the producer library's dependencies) live in their own virtual environment,
never in the project's: ``.ci/frameworks`` installs what
``constraints/frameworks.txt`` pins into ``$RAGDRIFT_FRAMEWORKS_VENV``
(default ``~/.cache/ragdrift/frameworks-venv``), and the producer library
(``producer/``) editable. ``make test`` runs it first (``make tools``). When
the venv is missing or stale, a test using the fixture FAILS in CI
(``CI=true``) and skips elsewhere, saying to run that script.

A test runs its app as a child process of that venv's python, offline:
Haystack's telemetry off, Hugging Face offline, every HTTP(S) proxy set to a
closed local port so that a library reaching for the network fails at once
instead of passing by luck, LangSmith tracing off.

    def test_x(frameworks_python, tmp_path):
        done = frameworks_python.run("app.py", cwd=tmp_path)   # CompletedProcess, text
        frameworks_python.path                                   # the venv's python
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.services import Missing, unavailable

INSTALL_HINT = "run .ci/frameworks to install it"
MISSING = Missing("frameworks venv (LangChain, Haystack)", "make tools", root=False)
ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints" / "frameworks.txt"
PRODUCER = ROOT / "producer"
STAMP = ".ragdrift-constraints"  # .ci/frameworks writes the constraints' SHA-256 here
NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once

# What every child process of the venv gets on top of the caller's environment.
OFFLINE = {
    "HAYSTACK_TELEMETRY_ENABLED": "False",  # else Haystack posts usage and writes ~/.haystack
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "HTTP_PROXY": NOWHERE, "HTTPS_PROXY": NOWHERE, "ALL_PROXY": NOWHERE,
    "http_proxy": NOWHERE, "https_proxy": NOWHERE, "all_proxy": NOWHERE,
    "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",  # the test's own broker and servers
}
# The caller's interpreter settings: the child is the venv's python, nothing else.
DROPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


def venv() -> Path:
    default = Path.home() / ".cache" / "ragdrift" / "frameworks-venv"
    return Path(os.environ.get("RAGDRIFT_FRAMEWORKS_VENV") or default)


def problem() -> str | None:
    """Why the venv cannot be used as it is, or None: missing, not installed with
    the current constraints, or without this checkout's producer library."""
    where = venv()
    if not (where / "bin" / "python").is_file():
        return f"the frameworks venv is not installed in {where}: {INSTALL_HINT}"
    stamp = where / STAMP
    if not stamp.is_file() or stamp.read_text().strip() != hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest():
        return f"{where} was not installed with the current {CONSTRAINTS.relative_to(ROOT)}: {INSTALL_HINT}"
    if (PRODUCER / "pyproject.toml").is_file() and producer_source(where) != PRODUCER.as_uri():
        return f"{where} does not hold {PRODUCER} editable: {INSTALL_HINT}"
    return None


def producer_source(where: Path) -> str | None:
    """The URL the venv's ragdrift-producer was installed from, when installed editable."""
    for info in where.glob("lib/python*/site-packages/ragdrift_producer-*.dist-info/direct_url.json"):
        url = json.loads(info.read_text())
        if url.get("dir_info", {}).get("editable"):
            return url.get("url")
    return None


@dataclass(frozen=True)
class FrameworksPython:
    """The frameworks venv's python and the offline environment its child processes run in."""

    path: Path
    env: dict[str, str] = field(repr=False)

    def run(self, *args: str | Path, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
        """``python ARGS`` in that environment (plus ``env``), output captured as text; the exit status is not checked."""
        return subprocess.run([self.path, *args], env={**self.env, **(env or {})},
                              capture_output=True, text=True, **kwargs)


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env.update(OFFLINE)
    return env


def installed() -> FrameworksPython:
    """The venv .ci/frameworks installs; when it is not usable, the test fails in CI and skips elsewhere."""
    reason = problem()
    if reason is not None:
        unavailable(reason, MISSING)
    return FrameworksPython(venv() / "bin" / "python", offline_env())


@pytest.fixture(scope="session", name="frameworks_python")
def frameworks_python_fixture() -> FrameworksPython:
    """The frameworks venv's python (``.path``, ``.env``, ``.run(*args)``), one per session."""
    return installed()
