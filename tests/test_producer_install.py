"""The producer library installs alone: `pip install ./producer` brings kafka-python and
crc32c, none of the agent's dependencies, and `[otel]` adds only OpenTelemetry's SDK.

One fresh venv, installed into twice as the docs say (with the project's constraints,
so versions are CI's; pip's cache is reused). The package list is printed: `pytest -s`
shows it. The library is copied out first, since pip builds in the source tree.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints" / "agent.txt"
# The agent's heavy dependencies, and the extras' packages, as normalised distribution names.
AGENT_ONLY = ("numpy", "scipy", "scikit-learn", "sqlalchemy", "apscheduler", "msgspec", "orjson", "psycopg",
              "psycopg-binary", "psycopg-c", "psycopg2", "psycopg2-binary", "prometheus-client")

_SMOKE = r"""
import json, sys
from ragdrift_producer import HashKey, Producer, User, Result
from ragdrift_producer.hashing import Hasher
vectors = json.load(open(sys.argv[1], encoding="utf-8"))
hasher = Hasher(HashKey(vectors["key"]["utf8"].encode()))
for case in vectors["cases"]:
    assert hasher.query(case["input"]) == (case["query_id"], case["term_tokens"]), case["name"]
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", requirement.split("==")[0]).lower()


def _run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _installed(python: Path, cwd: Path, title: str) -> set[str]:
    frozen = _run(python, "-m", "pip", "list", "--format=freeze", cwd=cwd)
    print(f"\n{title}:\n{frozen}")
    return {_name(line) for line in frozen.splitlines() if line.strip()}


def test_the_constraints_pin_what_the_producer_needs():
    pins = {_name(line) for line in CONSTRAINTS.read_text().splitlines() if "==" in line and not line.startswith("#")}
    assert {"kafka-python", "crc32c", "opentelemetry-sdk"} <= pins


def test_the_producer_installs_without_the_agents_dependencies(tmp_path):
    shutil.copytree(ROOT / "producer", tmp_path / "producer",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=300)
    python = tmp_path / "venv" / "bin" / "python"
    pip = (python, "-m", "pip", "install", "-c", CONSTRAINTS)

    _run(*pip, "./producer", cwd=tmp_path)
    installed = _installed(python, tmp_path, "pip install ./producer")
    assert {"ragdrift-producer", "kafka-python", "crc32c"} <= installed
    assert not installed & set(AGENT_ONLY)
    assert not {name for name in installed if name.startswith("opentelemetry")}
    loaded = json.loads(_run(python, "-c", _SMOKE, ROOT / "producer" / "hashing-vectors.json", cwd=tmp_path))
    assert "ragdrift_producer" in loaded and "opentelemetry" not in loaded

    _run(*pip, "./producer[otel]", cwd=tmp_path)
    with_otel = _installed(python, tmp_path, "pip install './producer[otel]'")
    assert "opentelemetry-sdk" in with_otel
    assert not with_otel & set(AGENT_ONLY)
    assert with_otel - installed <= {"opentelemetry-api", "opentelemetry-sdk", "opentelemetry-semantic-conventions",
                                     "typing-extensions", "importlib-metadata", "zipp", "deprecated", "wrapt"}
    _run(python, "-c", "import ragdrift_producer.otel", cwd=tmp_path)
